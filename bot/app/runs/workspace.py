"""A run's sandboxed checkout: the refs it fetches, its branch, its working tree and protected refs,
and the prompt built from it (the head's `.gitattributes`, a review's linter findings).

`SkillRun` holds one, so the rules about where a run may write (its own `beam/...` branch, a
follow-up on the bot's own branch, never a protected ref) read in one place of their own.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import anyio
import pygit2

from bot.app.context.pass_prompts import Asked, PromptBuilder
from bot.app.context.review_context import UntrustedSection
from bot.app.git.blob_budget import BlobBudget
from bot.app.git.checkout import RunTree
from bot.app.github.client import PullRequest
from bot.app.runs.context import JobContext
from bot.app.runs.deps import READING_SKILLS, RunDeps
from bot.app.runs.plan import FollowUp, RunPlan
from bot.beam.commit_tree import CommitTree
from bot.beam.sandbox import SandboxRoot, WorkingTree

log = logging.getLogger("beam.runs")


class RunWorkspace:
    """The checkout of one `SkillRun`, and the prompt built from it."""

    def __init__(self, deps: RunDeps, ctx: JobContext, plan: RunPlan, run_id: str, skill: str) -> None:
        self.deps = deps
        self.ctx = ctx
        self.plan = plan
        self.run_id = run_id
        self.skill = skill
        self.number = ctx.event.number
        self.follow_up: FollowUp | None = None  # set once the pull request is known (`RunPlan.follow_up`)

    def prompts(
        self,
        tree: WorkingTree | CommitTree,
        pull: PullRequest | None,
        total: int,
        *,
        sections: Sequence[UntrustedSection] = (),
        remembered: Sequence[str] = (),
    ) -> PromptBuilder:
        """The prompts of the run's calls, built as `beam-bot run` builds them for a local change:
        the request is the command's (its text, the plan's guidance and default task, a follow-up's
        unresolved comments)."""
        asked = Asked(
            self.ctx.event,
            self.skill,
            self.ctx.command.text,
            guidance=self.plan.guidance,
            default_task=self.plan.default_task,
            notes=self.follow_up.notes if self.follow_up is not None else (),
        )
        return PromptBuilder(
            tree.sandbox,
            asked,
            pull,
            total,
            self.ctx.config.review,
            self.deps.policy.limits,
            sections=sections,
            remembered=remembered,
        )

    async def checkout(
        self, pull: PullRequest | None, files: Sequence[str] = ()
    ) -> tuple[WorkingTree | CommitTree, RunTree, str]:
        """The run's tree at the head. A run that only reads (`READING_SKILLS`) gets the head commit
        read from the mirror's objects (`CommitTree`) and, on disk, only `files` (the change's, for
        the linters) and `.gitattributes`: never the whole tree (issue 43). A run that writes gets a
        whole checkout on its own branch."""
        repo = self.ctx.event.repository
        token = await self.deps.installation_token(self.ctx.installation_id)
        refs = [f"refs/heads/{repo.default_branch}:refs/heads/{repo.default_branch}"]
        follow_up = self.follow_up
        if follow_up is not None:  # the bot's own branch: start at its tip as git has it now
            refs.append(f"refs/heads/{follow_up.branch}:refs/heads/{follow_up.branch}")
        elif pull is not None:
            refs.append(f"refs/pull/{pull.number}/head:refs/pull/{pull.number}/head")
        if pull is not None and pull.base.ref != repo.default_branch:
            refs.append(f"refs/heads/{pull.base.ref}:refs/heads/{pull.base.ref}")
        refresh = self.deps.refresher(self.ctx.installation_id)
        await self.deps.checkouts.update_mirror(repo.full_name, repo.clone_url, token, refs, refresh=refresh)
        if follow_up is not None:
            head_sha = await self._branch_sha(follow_up.branch)
            branch = follow_up.branch
        else:
            head_sha = pull.head.sha if pull is not None else await self._branch_sha(repo.default_branch)
            kind = "pr" if pull is not None else "issue"
            branch = f"beam/{kind}-{self.number}/{self.plan.label or self.skill}-{self.run_id[:8]}"
        # A retried run (the worker died mid-run) starts again from a clean tree.
        if await self.deps.checkouts.discard_leftover(repo.full_name, self.run_id):
            log.info("run %s: removed the tree of an earlier attempt", self.run_id)
        reading = self.skill in READING_SKILLS
        checkouts = self.deps.checkouts
        run_tree = await checkouts.create_run_tree(
            repo.full_name, self.run_id, head_sha, branch, checkout=not reading
        )
        if reading:
            budget = BlobBudget(checkouts.mirrors, repo.full_name, self.deps.max_fetch_bytes)
            view = CommitTree(
                checkouts.mirror_path(repo.full_name),
                head_sha,
                fetch=budget,
                scratch=SandboxRoot(run_tree.path),
            )
            await anyio.to_thread.run_sync(view.materialise, [*files, ".gitattributes"])
            return view, run_tree, head_sha
        requester = self.ctx.event.comment.user
        login = self.deps.identity.known or "beam-bot"
        identity = (login, f"{login}@users.noreply.github.com")
        tree = WorkingTree(
            SandboxRoot(run_tree.path),
            self.protected_refs(pull),
            blocked_paths=tuple(self.ctx.config.blocked_paths),
            allowed_paths=self.plan.allowed_paths,
            allowed_push_branches={branch},
            author=identity,
            committer=identity,
            commit_trailer=f"Co-authored-by: {requester.login} <{requester.noreply_email}>",
        )
        return tree, run_tree, head_sha

    def protected_refs(self, pull: PullRequest | None) -> list[str]:
        """main, master, the default branch, and the pull request's base and head branches; a follow-up
        may move the head branch only when it is the bot's own (`self.follow_up`)."""
        protected = {"main", "master", self.ctx.event.repository.default_branch}
        if pull is not None:
            protected.add(pull.base.ref)
            if self.follow_up is None or self.follow_up.branch != pull.head.ref:
                protected.add(pull.head.ref)
        return sorted(protected)

    async def _branch_sha(self, branch: str) -> str:
        mirror = self.deps.checkouts.mirror_path(self.ctx.event.repository.full_name)

        def resolve() -> str:
            return str(pygit2.Repository(str(mirror)).revparse_single(f"refs/heads/{branch}").id)

        return await anyio.to_thread.run_sync(resolve)
