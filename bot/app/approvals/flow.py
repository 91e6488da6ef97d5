"""Held pushes end to end: `/beam author`, the approval comment, the poller, answers, and the push.

Deciding is `approval_rules.decide`; this module gathers its inputs (reactions, commands, current
permissions) and acts on the verdict with compare-and-set transitions. Pushing happens only in the
`push_watch` job of that push (one job at a time per key), so two answers, two workers or a retry
after a crash can never push twice; a crashed push is finished by the same job's retry.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import anyio

from bot.app.approvals import render as render_push
from bot.app.approvals.held_push import (
    check_target,
    head_commit,
    push_pinned,
    resume_push,
    sha256,
    summarize_commit,
)
from bot.app.approvals.pushes import OPEN_STATES, HeldPush, Pushes, new_push_id
from bot.app.approvals.rules import Policy, Signal, Verdict, decide, next_poll_delay, signals_from_reactions
from bot.app.commands import Command
from bot.app.git.checkout import CheckoutError, RunTree
from bot.app.github.api import GitHubError
from bot.app.github.client import GitHubApp, InstallationClient, PullRequest
from bot.app.jobs.queue import Job, JobQueue
from bot.app.jobs.workers import Reschedule
from bot.app.repo_config import ConfigResult, RepoConfig, load_repo_config, permission_at_least
from bot.app.runs.run import Outcome, RunDeps, RunRequest, SkillRun
from bot.beam.errors import BeamError
from bot.beam.sandbox import WorkingTree
from bot.beam.types import AgentResult

if TYPE_CHECKING:
    from bot.app.webhooks.handlers import JobScope

log = logging.getLogger("beam.approvals")
WATCH = "push_watch"


@dataclass
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
        bot_login: Callable[[], str | None] = lambda: None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.github = github
        self.deps = deps
        self.queue = queue
        self.pushes = Pushes(deps.store)
        self.timing = timing or PollTiming()
        self.bot_login = bot_login
        self.clock = clock

    # -- /beam author -------------------------------------------------------------------------------

    async def author(self, scope: JobScope, command: Command, config: ConfigResult) -> None:
        assert scope.event is not None and scope.gh is not None
        deps = self.deps.with_blocked_paths(config.config.blocked_paths)
        request = RunRequest(scope.event, command, scope.job, scope.gh, scope.installation_id)

        async def hold(
            run: SkillRun, result: AgentResult, tree: WorkingTree, run_tree: RunTree, pull: PullRequest | None
        ) -> Outcome:
            return await self._hold(run, config.config, result, tree, run_tree, pull)

        await SkillRun(deps, request, on_interrupt=hold, recover=self._recover).run()

    async def _recover(self, run: SkillRun) -> Outcome | None:
        """A retried author run whose push is already held only says so again: asking the model
        again would supersede the push a maintainer may be looking at."""
        push = await self.pushes.for_run(run.run_id)
        if push is None or push.approval_comment_id is None:
            return None
        if push.state in OPEN_STATES:  # the attempt may have died before it armed the poller
            await self._schedule(push, self.clock())
        url = f"{push.action.get('html_url')}/issues/{push.number}#issuecomment-{push.approval_comment_id}"
        return Outcome(answer=render_push.held(push, url), held=True)

    async def _hold(
        self,
        run: SkillRun,
        config: RepoConfig,
        result: AgentResult,
        tree: WorkingTree,
        run_tree: RunTree,
        pull: PullRequest | None,
    ) -> Outcome:
        """The run asked to push: check it, pin the commit, record it, and ask for approval."""
        asked = [a for a in result.action_required or [] if a.get("tool") == "git_push"]
        if not asked:
            raise BeamError("BEM-335", {"detail": "the run stopped for an action the bot cannot hold"})
        action = asked[0]
        raw_args = action.get("args")
        args: dict[str, Any] = raw_args if isinstance(raw_args, dict) else {}
        refused = check_target(args.get("ref"), run_tree.branch, run.protected_refs(pull))
        if refused is not None:
            raise refused
        commit = await head_commit(tree)
        if commit is None or commit == run_tree.base_commit:
            return Outcome(
                answer="The agent asked to push but made no commit, so there is nothing to approve."
            )
        summary = await anyio.to_thread.run_sync(
            summarize_commit, str(run_tree.path), run_tree.base_commit, commit
        )
        for changed in summary.diffstat["files"]:
            if config.blocked(changed["path"]):
                raise BeamError("BEM-334", {"detail": changed["path"]})
        event, gh = run.req.event, run.req.gh
        repo = event.repository
        push_id = new_push_id()
        await self.deps.checkouts.pin(repo.full_name, run_tree, commit, push_id)
        await self._supersede(
            gh, repo.full_name, run.number, f"a newer `/beam author` run replaced it ({push_id})"
        )
        now = self.clock()
        push = HeldPush(
            id=push_id,
            run_id=run.run_id,
            repo=repo.full_name,
            number=run.number,
            base_sha=pull.base.sha if pull else None,
            head_sha=pull.head.sha if pull else run_tree.base_commit,
            commit_sha=commit,
            branch=run_tree.branch,
            requester=event.comment.user.login,
            action={},
            created_at=now,
            expires_at=now + config.expiry_delta.total_seconds(),
            diffstat=summary.diffstat,
        )
        body = render_push.approval_request(push, summary.patch, summary.message)
        comment = await run.effects.comment(
            run.key("approval"), push.owner, push.name, run.number, body, kind="approval"
        )
        push = replace(
            push,
            approval_comment_id=comment.id,
            action={
                "action_id": action.get("action_id"),
                "tool": "git_push",
                "args": {"ref": run_tree.branch},
                "agent_name": "author",
                "session_id": str(result.session_id),
                "interaction_id": str(result.interaction_id),
                "installation_id": run.req.installation_id,
                "clone_url": repo.clone_url,
                "html_url": repo.html_url,
                "default_branch": repo.default_branch,
                "on_pull_request": pull is not None,
                "head_ref": pull.head.ref if pull else None,
                "head_repo": pull.head.repo.full_name if pull and pull.head.repo else None,
                "from_fork": bool(pull and pull.from_fork),
                "instructions": run.req.command.text[:300],
                "approval_body_sha256": sha256(comment.body),
            },
        )
        await self.pushes.create(push)
        await self._schedule(push, now + self.timing.minimum)
        return Outcome(answer=render_push.held(push, comment.html_url), result=result, held=True)

    async def _supersede(self, gh: InstallationClient, repo: str, number: int | None, reason: str) -> None:
        for old in await self.pushes.pending_for(repo, number):
            if await self.pushes.transition(old.id, ("pending",), "superseded", decided_at=self.clock()):
                await self._edit(gh, old, render_push.superseded(old, reason))
                await self.deps.checkouts.drop_pin(old.repo, old.pending_ref)

    async def _schedule(self, push: HeldPush, at: float) -> None:
        await self.queue.schedule(WATCH, f"push:{push.id}", {"push_id": push.id}, at)

    # -- answers ----------------------------------------------------------------------------------

    def _client(self, push: HeldPush) -> InstallationClient:
        return InstallationClient(self.github, int(push.action["installation_id"]))

    async def _signals(self, gh: InstallationClient, push: HeldPush, etag: str | None) -> list[Signal] | None:
        """Reactions on our own unedited approval comment plus stored commands; None if unchanged."""
        assert push.approval_comment_id is not None
        reactions, new_etag = await gh.list_reactions(
            push.owner, push.name, push.approval_comment_id, etag=etag
        )
        if reactions is None:
            return None
        await self.pushes.update(push.id, etag=new_etag)
        comment = await gh.get_comment(push.owner, push.name, push.approval_comment_id)
        login = (comment.user.login if comment.user else "").lower()
        ours = login == (self.bot_login() or "").lower()
        unedited = sha256(comment.body or "") == push.action.get("approval_body_sha256")
        signals: list[Signal] = []
        if ours and unedited:
            signals = signals_from_reactions(
                (r.user.login, r.content, r.user.is_bot) for r in reactions if r.user is not None
            )
        else:
            log.warning(
                "push %s: approval comment is not ours or was edited; its reactions do not count", push.id
            )
        signals += [Signal(c["user"], c["kind"], "command") for c in push.result.get("commands", [])]
        return signals

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

    async def decide_command(self, scope: JobScope, command: Command, config: ConfigResult) -> None:
        """`/beam approve <id>` or `/beam reject <id>`, from the webhook."""
        assert scope.event is not None and scope.gh is not None
        gh, event = scope.gh, scope.event
        push = await self.pushes.get(command.arg or "")
        if push is None or push.repo.lower() != event.repository.full_name.lower():
            await scope.reply(f"There is no held push `{command.arg}` on this repository.")
            return
        login = event.comment.user.login
        needed = config.config.approve_permission
        permission = await gh.get_permission(push.owner, push.name, login)
        is_requester = login.lower() == push.requester.lower()
        if not permission_at_least(permission, needed) and not (command.name == "reject" and is_requester):
            await scope.reply(
                f"@{login}, only people with {needed} permission can answer held push `{push.id}`."
            )
            return
        if command.name == "approve" and push.state == "failed":
            if await self.pushes.transition(
                push.id, ("failed",), "approved", decided_by=login, decided_at=self.clock()
            ):
                await self._schedule(push, self.clock())
            return
        if push.state != "pending":
            await scope.reply(f"Held push `{push.id}` is already {push.state}.")
            return
        kind = "approve" if command.name == "approve" else "reject"
        commands = [*push.result.get("commands", []), {"user": login, "kind": kind}]
        await self.pushes.update(push.id, result={**push.result, "commands": commands})
        push = replace(push, result={**push.result, "commands": commands})
        signals = await self._signals(gh, push, None) or []
        verdict = await self._verdict(gh, push, signals, config.config)
        if (
            verdict.outcome == "wait"
            and kind == "approve"
            and login.lower() not in (a.lower() for a in verdict.approvers)
        ):
            reason = dict(verdict.ignored).get(login, "it does not count")
            await scope.reply(f"@{login}, your approval of `{push.id}` does not count: {reason}.")
        await self._apply(gh, push, verdict, in_watch_job=False)

    async def _apply(
        self, gh: InstallationClient, push: HeldPush, verdict: Verdict, *, in_watch_job: bool
    ) -> None:
        now = self.clock()
        if verdict.outcome == "approve":
            by = ",".join(verdict.approvers)
            if await self.pushes.transition(push.id, ("pending",), "approved", decided_by=by, decided_at=now):
                if in_watch_job:
                    await self._complete(gh, push.id)
                else:
                    await self._schedule(push, now)
        elif verdict.outcome == "reject" and verdict.rejected_by:
            if await self.pushes.transition(
                push.id, ("pending",), "rejected", decided_by=verdict.rejected_by, decided_at=now
            ):
                await self._edit(gh, push, render_push.rejected(push, verdict.rejected_by, now))
                await self.deps.checkouts.drop_pin(push.repo, push.pending_ref)
        elif verdict.outcome == "expire" and await self.pushes.transition(
            push.id, ("pending",), "expired", decided_at=now
        ):
            await self._edit(gh, push, render_push.expired(push))
            await self.deps.checkouts.drop_pin(push.repo, push.pending_ref)

    # -- the poller job -----------------------------------------------------------------------------

    async def watch(self, job: Job) -> None:
        push = await self.pushes.get(str((job.payload or {}).get("push_id")))
        if push is None:
            return
        gh = self._client(push)
        if push.state in ("approved", "pushing") or (push.state == "pushed" and "pull" not in push.result):
            await self._complete(gh, push.id)  # issue 8: also a push whose pull request is not open yet
            return
        if push.state != "pending":
            return
        now = self.clock()
        if now >= push.expires_at:
            await self._apply(gh, push, Verdict("expire"), in_watch_job=True)
            return
        signals = await self._signals(gh, push, push.etag)
        if signals is not None:
            config = await load_repo_config(
                gh.get_file, push.owner, push.name, str(push.action["default_branch"])
            )
            verdict = await self._verdict(gh, push, signals, config.config)
            if verdict.outcome != "wait":
                await self._apply(gh, push, verdict, in_watch_job=True)
                return
        delay = next_poll_delay(
            now - push.created_at, minimum=self.timing.minimum, maximum=self.timing.maximum
        )
        raise Reschedule(now + delay)  # the same job row polls again: a poll is not a new job

    # -- the push -----------------------------------------------------------------------------------

    async def _complete(self, gh: InstallationClient, push_id: str) -> None:
        push = await self.pushes.get(push_id)
        if push is None or push.state not in ("approved", "pushing", "pushed"):
            return
        if push.state == "pushed":  # issue 8: an attempt died after the push, before the pull request
            if "pull" not in push.result:
                await self._announce(gh, push, self.clock())
            return
        token = await self.deps.installation_token(int(push.action["installation_id"]))
        try:
            effects = self.deps.effects(gh)
            refresh = self.deps.refresher(int(push.action["installation_id"]))
            if push.state == "approved":
                await resume_push(self.pushes, self.deps.checkouts, push, token, effects, refresh)
            else:  # this job's earlier attempt died mid-push: the journal and the branch tip tell
                await push_pinned(self.deps.checkouts, push, token, effects, refresh)
        except BeamError as error:
            if error.code == "BEM-066":
                return
            await self._failed(gh, push, str(error))
            return
        except CheckoutError as error:
            await self._failed(gh, push, error.message)
            return
        now = self.clock()
        if not await self.pushes.transition(push.id, ("pushing",), "pushed", pushed_at=now):
            return
        await self._announce(gh, push, now)

    async def _announce(self, gh: InstallationClient, push: HeldPush, now: float) -> None:
        """Open the pull request of a pushed commit and say so on the approval comment."""
        link, note = await self._open_pull(gh, push)
        await self.pushes.update(push.id, result={**push.result, "pull": link})
        approvers = (push.decided_by or "").split(",") if push.decided_by else []
        await self._edit(gh, push, render_push.pushed(push, approvers, push.decided_at or now, link, note))

    async def _failed(self, gh: InstallationClient, push: HeldPush, reason: str) -> None:
        if await self.pushes.transition(push.id, ("pushing", "approved"), "failed", error=reason[:2000]):
            await self._edit(gh, push, render_push.push_failed(push, reason))

    async def _open_pull(self, gh: InstallationClient, push: HeldPush) -> tuple[str | None, str]:
        action = push.action
        if action.get("on_pull_request") and action.get("from_fork"):
            web = str(action["html_url"]).rsplit("/", 2)[0]
            head = f"{push.owner}:{push.name}:{push.branch}"
            compare = f"{web}/{action['head_repo']}/compare/{action['head_ref']}...{head}"
            return (
                None,
                f"The pull request comes from a fork, so I cannot open one into it: [compare]({compare}).",
            )
        base = str(action["head_ref"] if action.get("on_pull_request") else action["default_branch"])
        title = (str(action.get("instructions") or "Change").splitlines() or ["Change"])[0][:80]
        body = (
            f"Made by `/beam author` for @{push.requester} in #{push.number}, held push `{push.id}`, "
            f"approved by {push.decided_by}.\n\nCommit {push.commit_sha}."
        )
        try:
            pull = await self.deps.effects(gh).pull(
                f"push:{push.id}:pull",
                push.owner,
                push.name,
                title=f"beam: {title}",
                head=push.branch,
                base=base,
                body=body,
                draft=not action.get("on_pull_request"),
            )
        except GitHubError as error:
            return None, f"Could not open a pull request: {error.message}."
        return pull.html_url, ""

    async def _edit(self, gh: InstallationClient, push: HeldPush, body: str) -> None:
        if push.approval_comment_id is None:
            return
        try:
            await self.deps.effects(gh).edit(None, push.owner, push.name, push.approval_comment_id, body)
        except GitHubError as error:
            log.warning("push %s: could not edit the approval comment: %s", push.id, error)

    async def pull_closed(self, scope: JobScope, data: dict[str, Any]) -> None:
        repo = str(data.get("repository", {}).get("full_name", ""))
        number = data.get("number")
        if not repo or not isinstance(number, int):
            return
        pending = await self.pushes.pending_for(repo, number)
        if not pending:
            return
        installation = data.get("installation") or {}
        gh = InstallationClient(
            self.github, int(installation.get("id") or pending[0].action["installation_id"])
        )
        await self._supersede(gh, repo, number, "the pull request was closed")
