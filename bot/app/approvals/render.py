"""The Markdown of held-push comments (the approval request, and each way it can end), the replies
to `/beam approve|reject`, and the pull request opened after a push.

The approval request shows exactly what would be pushed (the commit, its files, a short diff) and
how to answer; once decided, the same comment is edited to say who decided, when, and what happened.
"""

from __future__ import annotations

import re
import time
from typing import Any

from bot.app.approvals.pushes import HeldPush
from bot.app.checks import render as render_checks
from bot.app.checks.flow import CheckReport, report_of
from bot.app.runs.plan import ReviewNote

MARKER = "<!-- beam-push:{id} -->"
MAX_DIFF_LINES = 400
COLLAPSE_OVER = 40


def _fence(text: str) -> str:
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def _when(epoch: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(epoch))


def _files_table(diffstat: dict[str, Any]) -> str:
    files = diffstat.get("files", [])
    rows = [f"| `{f['path']}` | +{f['additions']} | -{f['deletions']} |" for f in files[:100]]
    if len(files) > 100:
        rows.append(f"| … {len(files) - 100} more files | | |")
    total = f"{len(files)} files, +{diffstat.get('additions', 0)} -{diffstat.get('deletions', 0)}"
    return f"{total}\n\n| file | added | removed |\n|---|---|---|\n" + "\n".join(rows)


def approval_request(push: HeldPush, diff: str, message: str, checks: CheckReport | None = None) -> str:
    lines = diff.splitlines()
    cut = len(lines) > MAX_DIFF_LINES
    shown = "\n".join(lines[:MAX_DIFF_LINES]) + ("\n… (diff cut here)" if cut else "")
    fence = _fence(shown)
    block = f"{fence}diff\n{shown}\n{fence}"
    if len(lines) > COLLAPSE_OVER:
        block = f"<details><summary>Diff ({len(lines)} lines)</summary>\n\n{block}\n\n</details>"
    subject = (message.strip().splitlines()[0] if message.strip() else "(no message)").replace("`", "'")
    checked = render_checks.section(checks)
    answer = (
        f"**To answer**: react 👍 on this comment to approve or 👎 to reject, or comment "
        f"`/beam approve {push.id}` or `/beam reject {push.id}`. It expires on {_when(push.expires_at)}."
    )
    if checks is not None and checks.blocks:
        answer = render_checks.not_offered(checks)
    return (
        f"🔒 **Held push `{push.id}`**: @{push.requester} asked for a change; nothing is pushed until a "
        f"maintainer approves.\n\n"
        f"Commit `{push.commit_sha}` ({subject}) to branch `{push.branch}`.\n\n"
        f"{_files_table(push.diffstat)}\n\n{block}\n\n"
        + (f"{checked}\n\n" if checked else "")
        + f"{answer}\n\n"
        + MARKER.format(id=push.id)
    )


def decided(push: HeldPush, headline: str, detail: str = "") -> str:
    extra = f"\n\n{detail}" if detail else ""
    return (
        f"{headline}\n\nHeld push `{push.id}`: commit `{push.commit_sha}` for branch `{push.branch}`, "
        f"asked for by @{push.requester}.{extra}\n\n" + MARKER.format(id=push.id)
    )


def pushed(push: HeldPush, approvers: list[str], when: float, pull_link: str | None, note: str = "") -> str:
    by = ", ".join(f"@{a}" for a in approvers) or "a maintainer"
    where = f"\n\nOpened {pull_link}." if pull_link else ""
    return decided(push, f"✅ **Approved by {by}** on {_when(when)} and pushed.", f"{note}{where}".strip())


def rejected(push: HeldPush, by: str, when: float) -> str:
    return decided(push, f"🚫 **Rejected by @{by}** on {_when(when)}. Nothing was pushed.")


def expired(push: HeldPush) -> str:
    return decided(push, f"⌛ **Expired** on {_when(push.expires_at)} without approval. Nothing was pushed.")


def superseded(push: HeldPush, reason: str) -> str:
    return decided(push, f"↪️ **Superseded**: {reason}. Nothing was pushed.")


def push_failed(push: HeldPush, reason: str) -> str:
    return decided(
        push,
        f"⚠️ **Approved, but the push failed**: {reason}",
        f"Nothing changed on the branch. Try again with `/beam approve {push.id}`.",
    )


def held(push: HeldPush, comment_url: str) -> str:
    checks = report_of(push.result)
    if checks is not None and checks.blocks:
        return (
            f"Prepared commit `{push.commit_sha[:12]}` on `{push.branch}`, but it is not offered for "
            f"approval: {render_checks.why_blocked(checks)} (see [held push `{push.id}`]({comment_url}))."
        )
    if checks is not None:
        verdict = f" Checks: {render_checks.headline(checks)}."
        return held_text(push, comment_url) + verdict
    return held_text(push, comment_url)


def held_text(push: HeldPush, comment_url: str) -> str:
    return (
        f"Prepared commit `{push.commit_sha[:12]}` on `{push.branch}`. It is held until a maintainer "
        f"approves: see [held push `{push.id}`]({comment_url})."
    )


# -- replies to `/beam author`, `/beam approve` and `/beam reject` ---------------------------------

CANNOT_HOLD = "the run stopped for an action the bot cannot hold"
NOTHING_TO_PUSH = "The agent asked to push but made no commit, so there is nothing to approve."
PULL_CLOSED = "the pull request was closed"


def replaced_by(push_id: str) -> str:
    """Why an older held push was superseded."""
    return f"a newer `/beam author` run replaced it ({push_id})"


def no_such_push(push_id: str | None) -> str:
    return f"There is no held push `{push_id}` on this repository."


def cannot_answer(login: str, needed: str, push_id: str) -> str:
    return f"@{login}, only people with {needed} permission can answer held push `{push_id}`."


def already_decided(push: HeldPush) -> str:
    return f"Held push `{push.id}` is already {push.state}."


def approval_ignored(login: str, push_id: str, reason: str) -> str:
    return f"@{login}, your approval of `{push_id}` does not count: {reason}."


# -- the pull request opened after the push -------------------------------------------------------


def from_fork(compare_url: str) -> str:
    return f"The pull request comes from a fork, so I cannot open one into it: [compare]({compare_url})."


def pull_not_opened(reason: str) -> str:
    return f"Could not open a pull request: {reason}."


def pull_title(instructions: str) -> str:
    first = (instructions or "Change").splitlines() or ["Change"]
    return f"beam: {first[0][:80]}"


def pull_body(push: HeldPush) -> str:
    return (
        f"Made by `/beam {push.context.command}` for @{push.requester} in #{push.number}, "
        f"held push `{push.id}`, approved by {push.decided_by}.\n\nCommit {push.commit_sha}."
    )


# -- follow-ups, `/beam update` and `/beam docs` ---------------------------------------------------

SAME_PULL = "The commit is on this pull request's branch."
DOCS_NEEDS_TEXT = (
    "`/beam docs` on an issue needs instructions, for example `/beam docs explain the config file`. "
    "On a pull request it can go without: it then documents the pull request's change."
)
UPDATE_NEEDS_OWN_PULL = (
    "`/beam update` works only on a pull request whose branch the bot made (a `beam/...` branch it "
    "pushed in this repository): it merges the base branch into that branch."
)


def addressed(notes: list[ReviewNote]) -> str:
    """The review comments a follow-up's commit addresses, under its answer."""
    if not notes:
        return "\n\nThe commit addresses none of the review comments."
    rows = [f"- [`{n.path}` line {n.line}]({n.url}) by @{n.author}: {_one_line(n.body)}" for n in notes[:50]]
    return "\n\n**Review comments this commit addresses**\n" + "\n".join(rows)


def _one_line(text: str, limit: int = 120) -> str:
    line = " ".join(text.split()).replace("`", "'")
    return line if len(line) <= limit else line[: limit - 1] + "…"


def up_to_date(branch: str, base: str) -> str:
    return f"`{branch}` already contains `{base}`; there is nothing to merge."


def merge_conflicts(branch: str, base: str, paths: list[str]) -> str:
    shown = "\n".join(f"- `{p}`" for p in paths[:100])
    more = f"\n- … {len(paths) - 100} more" if len(paths) > 100 else ""
    return (
        f"Merging `{base}` into `{branch}` conflicts in these files, so nothing was pushed:\n\n"
        f"{shown}{more}\n\nResolve them on the branch, or ask with `/beam author`."
    )


def merge_message(base: str, branch: str) -> str:
    return f"Merge branch '{base}' into {branch}"
