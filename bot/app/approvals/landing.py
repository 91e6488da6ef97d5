"""The end of an approved held push: push it (once, through `resume.push_held`), open its pull
request, and say what happened on the approval comment.

Runs only in the push's own `push_watch` job (see `flow.py`), so a retry after a crash finishes the
same push the same way: a push that landed before its pull request was opened is announced then.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import replace

from bot.app.approvals import render as render_push
from bot.app.approvals.pushes import HeldPush, Pushes
from bot.app.approvals.resume import push_held
from bot.app.approvals.verified import publish_check_run
from bot.app.checks import render as render_checks
from bot.app.checks.flow import report_of
from bot.app.git.checkout import CheckoutError
from bot.app.github.api import GitHubError
from bot.app.github.client import InstallationClient
from bot.app.runs.run import RunDeps
from bot.beam.errors import BeamError

log = logging.getLogger("beam.approvals")


class Landing:
    """Pushes an approved push and announces it; every GitHub write goes through the effects journal."""

    def __init__(self, pushes: Pushes, deps: RunDeps, clock: Callable[[], float] = time.time) -> None:
        self.pushes = pushes
        self.deps = deps
        self.clock = clock

    async def complete(self, gh: InstallationClient, push_id: str) -> None:
        push = await self.pushes.get(push_id)
        if push is None or push.state not in ("approved", "pushing", "pushed"):
            return
        if push.state == "pushed":  # issue 8: an attempt died after the push, before the pull request
            if "pull" not in push.result:
                await self._announce(gh, push, self.clock())
            return
        if not await self._shown(gh, push):
            await self._failed(gh, push, render_push.NOT_SHOWN)
            return
        # Where the commit goes is what GitHub says of the repository now, not a stored row's URL.
        where = await gh.get_repo(push.owner, push.name)
        push = replace(
            push,
            context=push.context.model_copy(
                update={"clone_url": where.clone_url, "html_url": where.html_url}
            ),
        )
        installation_id = push.context.installation_id
        token = await self.deps.installation_token(installation_id)
        try:
            effects = self.deps.effects(gh)
            refresh = self.deps.refresher(installation_id)
            await push_held(self.pushes, self.deps.checkouts, push, token, effects, refresh)
        except BeamError as error:
            if error.code == "BEM-066":
                return
            await self._failed(gh, push, str(error))
            return
        except CheckoutError as error:
            await self._failed(gh, push, error.message)
            return
        now = self.clock()
        if not await self.pushes.mark_pushed(push.id, now):
            return
        await self._announce(gh, push, now)

    async def _shown(self, gh: InstallationClient, push: HeldPush) -> bool:
        """Whether the approval comment on GitHub, written by the bot, shows exactly this push: an
        approval answers what a maintainer read, so a row that differs from it lands nothing."""
        if push.approval_comment_id is None:
            return False
        comment = await gh.get_comment(push.owner, push.name, push.approval_comment_id)
        author = comment.user.login.lower() if comment.user else ""
        if author != ((await self.deps.identity.login()) or "").lower():
            log.warning("push %s: its approval comment is not the bot's", push.id)
            return False
        if not render_push.shows(comment.body or "", push):
            log.warning(
                "push %s: its approval comment does not show commit %s", push.id, push.commit_sha[:12]
            )
            return False
        return True

    async def _announce(self, gh: InstallationClient, push: HeldPush, now: float) -> None:
        """Publish the checks on the pushed commit, open its pull request, and say so on the approval
        comment."""
        checks_url = await publish_check_run(self.deps.effects(gh), push)
        link, note = await self._open_pull(gh, push)
        report = report_of(push.result)
        if report is not None:
            note = f"{render_checks.pushed_note(report, checks_url)} {note}".strip()
        await self.pushes.update(push.id, result={**push.result, "pull": link})
        await self.edit(
            gh, push, render_push.pushed(push, push.approvers, push.decided_at or now, link, note)
        )

    async def _failed(self, gh: InstallationClient, push: HeldPush, reason: str) -> None:
        if await self.pushes.fail(push.id, reason):
            await self.edit(gh, push, render_push.push_failed(push, reason))

    async def _open_pull(self, gh: InstallationClient, push: HeldPush) -> tuple[str | None, str]:
        target = push.context
        if target.expected_tip is not None:  # the bot's own branch already has its pull request
            return None, render_push.SAME_PULL
        if target.on_pull_request and target.from_fork:
            web = target.html_url.rsplit("/", 2)[0]
            head = f"{push.owner}:{push.name}:{push.branch}"
            return None, render_push.from_fork(f"{web}/{target.head_repo}/compare/{target.head_ref}...{head}")
        base = (target.head_ref if target.on_pull_request else None) or target.default_branch
        try:
            pull = await self.deps.effects(gh).pull(
                f"push:{push.id}:pull",
                push.owner,
                push.name,
                title=render_push.pull_title(target.instructions),
                head=push.branch,
                base=base,
                body=render_push.pull_body(push),
                draft=not target.on_pull_request,
            )
        except GitHubError as error:
            return None, render_push.pull_not_opened(error.message)
        return pull.html_url, ""

    async def edit(self, gh: InstallationClient, push: HeldPush, body: str) -> None:
        if push.approval_comment_id is None:
            return
        try:
            await self.deps.effects(gh).edit(None, push.owner, push.name, push.approval_comment_id, body)
        except GitHubError as error:
            log.warning("push %s: could not edit the approval comment: %s", push.id, error)
