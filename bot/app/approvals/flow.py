"""Held pushes end to end: `/beam author`, the approval comment, the poller, answers, and the push.

Deciding is `rules.decide`; this module gathers its inputs (reactions, commands, current
permissions) and acts on the verdict through the state verbs of `pushes.Pushes`. Pushing happens
only in the `push_watch` job of that push (one job at a time per key), through `landing.Landing`,
so two answers, two workers or a retry after a crash can never push twice; a crashed push is
finished by the same job's retry, the same way. The approval comment, the push and the pull request
go through the effects journal (issue 8): a push that landed before its pull request was opened is
finished by its watch job.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import anyio

from bot.app.approvals import render as render_push
from bot.app.approvals.followup import addressed_note, follow_up_finder
from bot.app.approvals.held_commits import DEFAULT_MAX_HELD_PUSH_BYTES, commit_bases, pack_held_commit
from bot.app.approvals.held_push import (
    CommitSummary,
    check_paths,
    check_target,
    head_commit,
    sha256,
    summarize_commit,
)
from bot.app.approvals.landing import Landing
from bot.app.approvals.landing_range import fork_refused, landing_range
from bot.app.approvals.pushes import OPEN_STATES, HeldPush, PushAction, PushContext, Pushes, new_push_id
from bot.app.approvals.rules import (
    Policy,
    Signal,
    SignalKind,
    Verdict,
    decide,
    next_poll_delay,
    signals_from_reactions,
)
from bot.app.approvals.verified import blocking_report, refuse_approval
from bot.app.checks import render as render_checks
from bot.app.checks.flow import check_commit
from bot.app.commands import Command
from bot.app.commands import parse as parse_command
from bot.app.git.checkout import RunTree
from bot.app.github.auth import GitHubApp
from bot.app.github.client import InstallationClient, PullRequest
from bot.app.github.payloads import PullRequestEvent
from bot.app.jobs.queue import Job, JobQueue
from bot.app.jobs.signals import Reschedule
from bot.app.permissions import permission_at_least
from bot.app.repo_config import RepoConfig, load_repo_config
from bot.app.runs.context import JobContext
from bot.app.runs.docs import docs_plan
from bot.app.runs.plan import RunPlan
from bot.app.runs.run import Outcome, RunDeps, SkillRun
from bot.beam.errors import BeamError
from bot.beam.sandbox import WorkingTree
from bot.beam.sandbox_policy import AllowedPaths
from bot.beam.types import AgentResult

log = logging.getLogger("beam.approvals")
WATCH = "push_watch"


@dataclass(frozen=True)
class PollTiming:
    minimum: float = 5.0
    maximum: float = 30.0


class Approvals:
    def __init__(
        self,
        github: GitHubApp,
        deps: RunDeps,
        queue: JobQueue,
        *,
        timing: PollTiming | None = None,
        clock: Callable[[], float] = time.time,
        max_held_bytes: int = DEFAULT_MAX_HELD_PUSH_BYTES,
        by_reaction: bool = True,
    ) -> None:
        self.github = github
        self.by_reaction = by_reaction  # BEAM_APPROVE_BY_REACTION: off in the Action
        self.deps = deps
        self.queue = queue
        self.pushes = Pushes(deps.store)
        self.timing = timing or PollTiming()
        self.clock = clock
        self.max_held_bytes = max_held_bytes  # BEAM_MAX_HELD_PUSH_BYTES: the bundle kept in the database
        self.landing = Landing(self.pushes, deps, clock)

    # -- /beam author -------------------------------------------------------------------------------

    async def author(self, ctx: JobContext) -> None:
        """`/beam author` (on the bot's own pull request it continues that pull request's branch) and
        `/beam docs` (the author skill on a `docs-<run8>` branch, writing only `docs.paths`)."""
        if await fork_refused(ctx):
            return
        plan = RunPlan(follow_up=follow_up_finder(self.pushes, ctx))
        if ctx.command.name == "docs":
            if not ctx.command.text and not ctx.event.on_pull_request:
                await ctx.reply(render_push.DOCS_NEEDS_TEXT)
                return
            plan = docs_plan(ctx.config)
        await SkillRun(self.deps, ctx, on_interrupt=self._hold, recover=self._recover, plan=plan).run()

    async def _recover(self, run: SkillRun) -> Outcome | None:
        """A retried author run whose push is already held only says so again: asking the model
        again would supersede the push a maintainer may be looking at."""
        push = await self.pushes.for_run(run.run_id)
        if push is None or push.approval_comment_id is None:
            return None
        if push.state in OPEN_STATES:  # the attempt may have died before it armed the poller
            await self._schedule(push, self.clock())
        url = f"{push.context.html_url}/issues/{push.number}#issuecomment-{push.approval_comment_id}"
        return Outcome(answer=render_push.held(push, url), held=True)

    async def _hold(
        self,
        run: SkillRun,
        result: AgentResult,
        tree: WorkingTree,
        run_tree: RunTree,
        pull: PullRequest | None,
    ) -> Outcome:
        """The run asked to push: check it, pin the commit, record it, and ask for approval."""
        asked = [a for a in result.action_required or [] if a.get("tool") == "git_push"]
        if not asked:
            raise BeamError("BEM-335", {"detail": render_push.CANNOT_HOLD})
        raw_args = asked[0].get("args")
        args: dict[str, Any] = raw_args if isinstance(raw_args, dict) else {}
        refused = check_target(args.get("ref"), run_tree.branch, run.protected_refs(pull))
        if refused is not None:
            raise refused
        commit = await head_commit(tree)
        if commit is None or commit == run_tree.base_commit:
            return Outcome(answer=render_push.NOTHING_TO_PUSH)
        summary = await anyio.to_thread.run_sync(
            summarize_commit, str(run_tree.path), run_tree.base_commit, commit
        )
        ctx = run.ctx
        check_paths(summary, ctx.config.blocked, AllowedPaths(run.plan.allowed_paths))
        action = PushAction(
            action_id=str(asked[0].get("action_id")),
            args={"ref": run_tree.branch},
            session_id=str(result.session_id),
            interaction_id=str(result.interaction_id),
        )
        push, url = await self.hold_commit(
            ctx, run.run_id, run_tree, summary, pull, action, continues=run.follow_up is not None
        )
        answer = render_push.held(push, url) + addressed_note(run.follow_up, summary)
        return Outcome(answer=answer, result=result, held=True)

    async def hold_commit(
        self,
        ctx: JobContext,
        run_id: str,
        run_tree: RunTree,
        summary: CommitSummary,
        pull: PullRequest | None,
        action: PushAction,
        *,
        continues: bool,
    ) -> tuple[HeldPush, str]:
        """Pin a checked commit and bundle it for the database (issue 23: any worker on any host can
        push it), run the repository's checks on it, supersede older pushes, record it, post the
        approval comment. `continues`: the branch is the bot's own, pushed only while it is still at
        the run's start."""
        repo = ctx.repository
        number = ctx.event.number
        commit = summary.sha
        push_id = new_push_id()
        checkouts = self.deps.checkouts
        bases = await commit_bases(checkouts, repo.full_name, run_tree, commit)  # before the pin
        ref = await checkouts.pin(repo.full_name, run_tree, commit, push_id)
        try:  # issue 28: every commit that would land is listed, and checked against `blocked_paths`
            landing = await landing_range(checkouts, ctx, run_tree, commit, pull)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await checkouts.drop_pin(repo.full_name, ref)
            raise
        shown = summary if landing.summary is None else landing.summary
        held = await pack_held_commit(
            checkouts, repo.full_name, push_id, ref, run_tree, commit, bases, self.max_held_bytes
        )
        checks = await check_commit(
            self.deps.checks,
            self.deps.checkouts,
            ctx.effects.journal,
            run_id=run_id,
            repo_full_name=repo.full_name,
            sha=commit,
            branch=run_tree.branch,
            config=ctx.config,
        )
        await self._supersede(ctx.gh, repo.full_name, number, render_push.replaced_by(push_id))
        now = self.clock()
        push = HeldPush(
            id=push_id,
            run_id=run_id,
            repo=repo.full_name,
            number=number,
            base_sha=pull.base.sha if pull else None,
            head_sha=pull.head.sha if pull else run_tree.base_commit,
            commit_sha=commit,
            branch=run_tree.branch,
            requester=ctx.requester,
            action=action,
            context=PushContext(
                installation_id=ctx.installation_id,
                clone_url=repo.clone_url,
                html_url=repo.html_url,
                default_branch=repo.default_branch,
                on_pull_request=pull is not None,
                head_ref=pull.head.ref if pull else None,
                base_ref=pull.base.ref if pull else None,
                head_repo=pull.head.repo.full_name if pull and pull.head.repo else None,
                from_fork=bool(pull and pull.from_fork),
                instructions=ctx.command.text[:300],
                command=ctx.command.name,
                expected_tip=run_tree.base_commit if continues else None,
            ),
            created_at=now,
            expires_at=now + ctx.config.expiry_delta.total_seconds(),
            diffstat={**shown.diffstat, "commits": landing.commits},
            result={"checks": checks.to_json()} if checks is not None else {},
        )
        body = render_push.approval_request(
            push,
            shown.patch,
            summary.message,
            checks,
            compare_url=landing.compare_url,
            by_reaction=self.by_reaction,
        )
        comment = await ctx.effects.comment(
            f"{run_id}:approval", push.owner, push.name, number, body, kind="approval"
        )
        # The posted body carries the effect's marker: the comment is unedited while it hashes the same.
        push = replace(push, approval_comment_id=comment.id, approval_body_sha256=sha256(comment.body))
        await self.pushes.create(push, held)
        await self._schedule(push, now + self.timing.minimum)
        return push, comment.html_url

    async def _supersede(self, gh: InstallationClient, repo: str, number: int | None, reason: str) -> None:
        for old in await self.pushes.pending_for(repo, number):
            if await self.pushes.supersede(old.id, self.clock()):
                await self.landing.edit(gh, old, render_push.superseded(old, reason))
                await self.deps.checkouts.drop_pin(old.repo, old.pending_ref)

    async def _schedule(self, push: HeldPush, at: float) -> None:
        await self.queue.schedule(WATCH, f"push:{push.id}", {"push_id": push.id}, at)

    # -- answers ----------------------------------------------------------------------------------

    async def _signals(self, gh: InstallationClient, push: HeldPush, etag: str | None) -> list[Signal] | None:
        """Reactions on our own unedited approval comment plus the `/beam approve|reject <id>`
        comments on the pull request, both as GitHub lists them now with their authors (never a
        stored list, which a carried or restored row could have written); None if unchanged."""
        assert push.approval_comment_id is not None  # only pushes with a comment are ever stored
        reactions, new_etag = await gh.list_reactions(
            push.owner, push.name, push.approval_comment_id, etag=etag
        )
        if reactions is None:
            return None
        await self.pushes.update(push.id, etag=new_etag)
        comment = await gh.get_comment(push.owner, push.name, push.approval_comment_id)
        ours = (await self.deps.identity.login()) or ""
        login = (comment.user.login if comment.user else "").lower()
        unedited = sha256(comment.body or "") == push.approval_body_sha256
        signals: list[Signal] = []
        if login == ours.lower() and unedited:
            signals = signals_from_reactions(
                (r.user.login, r.content, r.user.is_bot) for r in reactions if r.user is not None
            )
        else:
            log.warning(
                "push %s: approval comment is not ours or was edited; its reactions do not count", push.id
            )
        return signals + await self._commands(gh, push, ours)

    async def _commands(self, gh: InstallationClient, push: HeldPush, ours: str) -> list[Signal]:
        """The answers to this push written as commands, by people (a bot's comment, ours included,
        quotes `/beam approve <id>` and approves nothing)."""
        if push.number is None:
            return []
        found: list[Signal] = []
        for comment in await gh.list_comments(push.owner, push.name, push.number):
            user = comment.user
            if user is None or user.is_bot or user.login.lower() == ours.lower():
                continue
            command = parse_command(comment.body or "")
            if (
                isinstance(command, Command)
                and command.name in ("approve", "reject")
                and command.arg == push.id
            ):
                found.append(
                    Signal(user.login, "approve" if command.name == "approve" else "reject", "command")
                )
        return found

    async def _verdict(
        self, gh: InstallationClient, push: HeldPush, signals: list[Signal], config: RepoConfig
    ) -> Verdict:
        permissions: dict[str, str] = {}
        for user in {s.user.lower() for s in signals if not s.is_bot}:
            permissions[user] = await gh.get_permission(push.owner, push.name, user)
        policy = Policy(config.approve_permission, config.self_approval, config.approvals_required)
        return decide(
            state=push.state,
            expires_at=push.expires_at,
            now=self.clock(),
            signals=signals,
            permissions=permissions,
            requester=push.requester,
            policy=policy,
        )

    async def answer(self, ctx: JobContext) -> None:
        """`/beam approve <id>` or `/beam reject <id>`, from the webhook."""
        command, gh = ctx.command, ctx.gh
        push = await self.pushes.get(command.arg or "")
        if push is None or push.repo.lower() != ctx.repository.full_name.lower():
            await ctx.reply(render_push.no_such_push(command.arg))
            return
        login = ctx.requester
        needed = ctx.config.approve_permission
        permission = await gh.get_permission(push.owner, push.name, login)
        is_requester = login.lower() == push.requester.lower()
        if not permission_at_least(permission, needed) and not (command.name == "reject" and is_requester):
            await ctx.reply(render_push.cannot_answer(login, needed, push.id))
            return
        blocked = blocking_report(push)
        if command.name == "approve" and blocked is not None:
            await ctx.reply(render_checks.approval_refused(login, push.id, blocked))
            return
        if command.name == "approve" and push.state == "failed":
            if await self.pushes.approve(push.id, login, self.clock(), again=True):
                await self._schedule(push, self.clock())
            return
        if push.state != "pending":
            await ctx.reply(render_push.already_decided(push))
            return
        kind: SignalKind = "approve" if command.name == "approve" else "reject"
        # This command is GitHub's word too (the delivery), in case its comment is not listed yet.
        signals = [*(await self._signals(gh, push, None) or []), Signal(login, kind, "command")]
        verdict = await self._verdict(gh, push, signals, ctx.config)
        if (
            verdict.outcome == "wait"
            and kind == "approve"
            and login.lower() not in (a.lower() for a in verdict.approvers)
        ):
            reason = dict(verdict.ignored).get(login, "it does not count")
            await ctx.reply(render_push.approval_ignored(login, push.id, reason))
        await self._apply(gh, push, verdict, in_watch_job=False)

    async def _apply(
        self, gh: InstallationClient, push: HeldPush, verdict: Verdict, *, in_watch_job: bool
    ) -> None:
        now = self.clock()
        if verdict.outcome == "approve" and blocking_report(push) is not None:
            return  # `checks_required` and its checks did not pass: nothing approves it
        if verdict.outcome == "approve":
            if await self.pushes.approve(push.id, ",".join(verdict.approvers), now):
                if in_watch_job:
                    await self.landing.complete(gh, push.id)
                else:
                    await self._schedule(push, now)
        elif verdict.outcome == "reject" and verdict.rejected_by:
            if await self.pushes.reject(push.id, verdict.rejected_by, now):
                await self.landing.edit(gh, push, render_push.rejected(push, verdict.rejected_by, now))
                await self.deps.checkouts.drop_pin(push.repo, push.pending_ref)
        elif verdict.outcome == "expire" and await self.pushes.expire(push.id, now):
            await self.landing.edit(gh, push, render_push.expired(push))
            await self.deps.checkouts.drop_pin(push.repo, push.pending_ref)

    # -- the poller job -----------------------------------------------------------------------------

    async def watch(self, job: Job) -> None:
        push = await self.pushes.get(str((job.payload or {}).get("push_id")))
        if push is None:
            return
        gh = InstallationClient(self.github, push.context.installation_id)
        if push.state in ("approved", "pushing") or (push.state == "pushed" and "pull" not in push.result):
            await self.landing.complete(
                gh, push.id
            )  # issue 8: also a push whose pull request is not open yet
            return
        if push.state != "pending":
            return
        now = self.clock()
        if now >= push.expires_at:
            await self._apply(gh, push, Verdict("expire"), in_watch_job=True)
            return
        signals = await self._signals(gh, push, push.etag)
        if signals is not None:
            config = await load_repo_config(gh.get_file, push.owner, push.name, push.context.default_branch)
            verdict = await self._verdict(gh, push, signals, config.config)
            blocked = blocking_report(push)
            if verdict.outcome == "approve" and blocked is not None:  # nothing approves it
                await refuse_approval(self.deps.effects(gh), push, verdict.approvers[0], blocked)
            elif verdict.outcome != "wait":
                await self._apply(gh, push, verdict, in_watch_job=True)
                return
        delay = next_poll_delay(
            now - push.created_at, minimum=self.timing.minimum, maximum=self.timing.maximum
        )
        raise Reschedule(now + delay)  # the same job row polls again: a poll is not a new job

    async def pull_closed(self, event: PullRequestEvent) -> None:
        """A closed pull request supersedes its held pushes."""
        repo = event.repository.full_name
        pending = await self.pushes.pending_for(repo, event.number)
        if not pending:
            return
        installation = event.installation.id if event.installation else pending[0].context.installation_id
        gh = InstallationClient(self.github, installation)
        await self._supersede(gh, repo, event.number, render_push.PULL_CLOSED)
