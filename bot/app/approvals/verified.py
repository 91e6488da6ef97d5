"""Verified pushes: the checks at the two ends of a held push, whether it may be approved at all,
and the `beam / checks` check run on the commit once it is pushed.

GitHub cannot hold a check run for a commit it does not have, so the results shown on the approval
comment are published after the push, on the pushed sha: the merge screen then shows what the
maintainer approved with. Both writes go through the effects journal: a retried watch job finds the
check run by its `external_id` and finds a completion that landed by its status.
"""

from __future__ import annotations

import logging
import time

from bot.app.approvals.pushes import HeldPush
from bot.app.checks import render
from bot.app.checks.flow import CheckReport, report_of
from bot.app.effects.writer import GitHubEffects, Written
from bot.app.github.api import GitHubError

log = logging.getLogger("beam.checks")


def blocking_report(push: HeldPush) -> CheckReport | None:
    """The push's checks when they keep it from approval (`checks_required` and not all passed)."""
    report = report_of(push.result)
    return report if report is not None and report.blocks else None


async def refuse_approval(effects: GitHubEffects, push: HeldPush, login: str, report: CheckReport) -> None:
    """Say once on the pull request why an approval of this push does not count."""
    if push.number is None:
        return
    key = f"push:{push.id}:refused"
    body = render.approval_refused(login, push.id, report)
    try:
        await effects.comment(key, push.owner, push.name, push.number, body, kind="reply")
    except GitHubError as error:
        log.warning("push %s: could not say why its approval is refused: %s", push.id, error)


async def publish_check_run(effects: GitHubEffects, push: HeldPush) -> str | None:
    """Complete `beam / checks` on the pushed commit with the push's results; its URL, or None."""
    report = report_of(push.result)
    if report is None:
        return None
    gh = effects.gh
    owner, name, sha = push.owner, push.name, push.commit_sha
    key = f"push:{push.id}:checks"
    try:
        made = await effects.check_run(key, owner, name, sha, render.CHECK_RUN_NAME)

        async def completed(since: float) -> Written | None:
            for found in await gh.list_check_runs(owner, name, sha, render.CHECK_RUN_NAME):
                if found.id == made.id and found.status == "completed":
                    return Written(found.id, found.html_url or "")
            return None

        async def complete() -> Written:
            stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            done = await gh.update_check_run(
                owner,
                name,
                made.id,
                status="completed",
                conclusion=render.conclusion(report),
                completed_at=stamp,
                output=render.check_run_output(report, push.id, push.approvers),
            )
            return Written(done.id, done.html_url or "")

        written = await effects.once(f"{key}:completed", "check_run", completed, complete)
    except GitHubError as error:  # the push landed; a missing check run must not hide that
        log.warning("push %s: could not publish its checks on %s: %s", push.id, sha[:12], error)
        return None
    return written.html_url or made.html_url or None
