"""`/beam update`: merge the base branch into the bot's own pull request branch with git, no model.

The merge commit is made in a run tree at the branch tip and held like any push (same approval
comment, same one push path, fast-forward only from that tip). On conflicts nothing is held and the
reply lists the conflicting files. A blocked path may change only to the base's own version of it: the
merge brings what the base already has, never a new change to a blocked file.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

import anyio
import pygit2

from bot.app.approvals import render as render_push
from bot.app.approvals.flow import Approvals
from bot.app.approvals.followup import own_branch
from bot.app.approvals.held_push import summarize_commit
from bot.app.approvals.landing_range import refuse_fork
from bot.app.approvals.pushes import PushAction
from bot.app.git.checkout import CheckoutError
from bot.app.github.api import GitHubError
from bot.app.github.client import PullRequest
from bot.app.runs import render
from bot.app.runs.context import JobContext
from bot.app.runs.run import FINAL_STATUSES, RUN_NAMESPACE, run_id_for
from bot.beam.errors import BeamError

log = logging.getLogger("beam.approvals")


@dataclass(frozen=True)
class Merged:
    sha: str


@dataclass(frozen=True)
class Conflicts:
    paths: list[str]


@dataclass(frozen=True)
class UpToDate:
    pass


def merge_base(
    path: str,
    tip: str,
    base: str,
    message: str,
    identity: tuple[str, str],
    blocked: Callable[[str], bool],
) -> Merged | Conflicts | UpToDate:
    """Merge commit `base` into `tip` in the repository at `path`, on its HEAD branch (blocking)."""
    repo = pygit2.Repository(path)
    if tip == base or repo.descendant_of(tip, base):
        return UpToDate()
    index = repo.merge_commits(tip, base)
    if index.conflicts is not None:
        paths = {entry.path for sides in index.conflicts for entry in sides if entry is not None}
        return Conflicts(sorted(paths))
    tree = repo.get(index.write_tree(repo))
    ours, theirs = repo.get(tip), repo.get(base)
    assert isinstance(tree, pygit2.Tree)
    assert isinstance(ours, pygit2.Commit) and isinstance(theirs, pygit2.Commit)
    for patch in repo.diff(ours.tree, tree):
        changed = patch.delta.new_file.path
        if blocked(changed) and _blob(tree, changed) != _blob(theirs.tree, changed):
            raise BeamError("BEM-334", {"detail": changed})
    signature = pygit2.Signature(*identity)
    oid = repo.create_commit("HEAD", signature, signature, message, tree.id, [ours.id, theirs.id])
    return Merged(str(oid))


def _blob(tree: pygit2.Tree, path: str) -> str | None:
    try:
        return str(tree[path].id)
    except KeyError:
        return None


class Updates:
    def __init__(self, approvals: Approvals) -> None:
        self.approvals = approvals
        self.deps = approvals.deps

    async def update(self, ctx: JobContext) -> None:
        if not ctx.event.on_pull_request:
            await ctx.reply(render.needs_pull_request("/beam update"))
            return
        run_id = run_id_for(ctx.job)
        store = self.deps.store
        existing = await store.get_run(run_id)
        if existing is not None and existing.get("status") in FINAL_STATUSES:
            return  # a retried job whose answer is already given
        repo, gh = ctx.repository, ctx.gh
        pull = await gh.get_pull(repo.owner.login, repo.name, ctx.event.number)
        if await refuse_fork(ctx, pull):  # issue 28: a fork's commits are not pushed unless allowed
            return
        branch = await own_branch(self.approvals.pushes, repo, pull)
        if branch is None:
            await ctx.reply(render_push.UPDATE_NEEDS_OWN_PULL)
            return
        try:
            await ctx.effects.react(  # through the effects journal, as every write of a job
                f"{run_id}:eyes",
                repo.owner.login,
                repo.name,
                ctx.event.comment.id,
                "eyes",
                review_comment=ctx.event.is_review_comment,
            )
        except GitHubError as error:  # a courtesy, as for every command
            log.warning("update %s: could not react to the command: %s", run_id, error)
        if existing is None:
            await store.create_run(
                run_id=run_id,
                repo=repo.full_name,
                number=ctx.event.number,
                skill="update",
                requester=ctx.requester,
                job_id=ctx.job.id,
                status="running",
                started_at=time.time(),
            )
        progress = render.Progress(command="/beam update", run_id=run_id)
        status, code, reason = "succeeded", None, None
        try:
            answer, held = await self._merge(ctx, run_id, pull.base.ref, branch, pull)
            status = "interrupted" if held else "succeeded"
        except CheckoutError as error:
            status, reason = "failed", error.message
            answer = render.failed(progress, reason)
        except BeamError as error:
            detail = f": {error.detail}" if error.detail else ""
            status, code, reason = "failed", error.code, f"{error.message}{detail}"
            answer = render.failed(progress, reason, code)
        await ctx.reply(answer)
        await store.update_run(
            run_id, status=status, error_code=code, error_message=reason, finished_at=time.time()
        )

    async def _merge(
        self, ctx: JobContext, run_id: str, base: str, branch: str, pull: PullRequest
    ) -> tuple[str, bool]:
        """The reply, and whether a push is now held."""
        repo, checkouts = ctx.repository, self.deps.checkouts
        token = await self.deps.installation_token(ctx.installation_id)
        refs = [f"refs/heads/{name}:refs/heads/{name}" for name in dict.fromkeys((base, branch))]
        refresh = self.deps.refresher(ctx.installation_id)
        await checkouts.update_mirror(repo.full_name, repo.clone_url, token, refs, refresh=refresh)
        tip, base_sha = await self._tips(repo.full_name, branch, base)
        # A partial copy of the repository: a merge reads what changed on both sides since they parted.
        ancestor = await checkouts.merge_base(repo.full_name, tip, base_sha)
        if ancestor is not None:
            for side in (tip, base_sha):
                await checkouts.mirrors.fetch_diff_blobs(repo.full_name, ancestor, side)
        await checkouts.discard_leftover(repo.full_name, run_id)
        run_tree = await checkouts.create_run_tree(repo.full_name, run_id, tip, branch)
        try:
            login = self.deps.identity.known or "beam-bot"
            identity = (login, f"{login}@users.noreply.github.com")
            requester = ctx.event.comment.user
            message = (
                f"{render_push.merge_message(base, branch)}\n\n"
                f"Co-authored-by: {requester.login} <{requester.noreply_email}>\n"
            )
            merged = await anyio.to_thread.run_sync(
                merge_base, str(run_tree.path), tip, base_sha, message, identity, ctx.config.blocked
            )
            if isinstance(merged, UpToDate):
                return render_push.up_to_date(branch, base), False
            if isinstance(merged, Conflicts):
                return render_push.merge_conflicts(branch, base, merged.paths), False
            summary = await anyio.to_thread.run_sync(summarize_commit, str(run_tree.path), tip, merged.sha)
            action = PushAction(
                action_id=str(uuid.uuid5(RUN_NAMESPACE, f"update-action:{run_id}")),
                args={"ref": branch},
                session_id=str(uuid.uuid5(RUN_NAMESPACE, f"update-session:{run_id}")),
                interaction_id=str(uuid.uuid5(RUN_NAMESPACE, f"update-interaction:{run_id}")),
            )
            push, url = await self.approvals.hold_commit(
                ctx, run_id, run_tree, summary, pull, action, continues=True
            )
            return render_push.held(push, url), True
        finally:
            with anyio.CancelScope(shield=True):
                await run_tree.remove()

    async def _tips(self, repo_full_name: str, branch: str, base: str) -> tuple[str, str]:
        mirror = self.deps.checkouts.mirror_path(repo_full_name)

        def resolve() -> tuple[str, str]:
            git = pygit2.Repository(str(mirror))
            tip = git.revparse_single(f"refs/heads/{branch}").id
            return str(tip), str(git.revparse_single(f"refs/heads/{base}").id)

        return await anyio.to_thread.run_sync(resolve)
