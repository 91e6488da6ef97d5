"""The Markdown of held-push comments (the approval request, and each way it can end), the replies
to `/beam approve|reject`, and the pull request opened after a push.

The approval request shows exactly what would be pushed (the commit, its files, a short diff) and
how to answer; once decided, the same comment is edited to say who decided, when, and what happened.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from dataclasses import dataclass
from typing import Any

from bot.app import markdown as md
from bot.app.approvals.pushes import HeldPush
from bot.app.checks import render as render_checks
from bot.app.checks.flow import CheckReport, report_of
from bot.app.context.prompt import ReviewNote

MARKER = "<!-- beam-push:{id} shows:{digest} -->"
_SHOWN = re.compile(r"<!-- beam-push:([A-Za-z0-9-]+) shows:([0-9a-f]{64}) -->")
MAX_DIFF_LINES = 400
# GitHub refuses a comment over 65,536 characters (a 422): the diff shown keeps to this many, so one
# very long line (a minified file) is cut like any other, and said at the top.
MAX_DIFF_CHARS = 40_000
COLLAPSE_OVER = 40
MAX_LISTED_FILES = 500  # a comment holds 65,536 characters; past this the notice at the top says so
MAX_NAMED = 20


def _when(epoch: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(epoch))


def _files_table(diffstat: dict[str, Any]) -> str:
    files = diffstat.get("files", [])
    rows = [
        f"| {md.code(f['path'], table=True)} | +{f['additions']} | -{f['deletions']} |"
        for f in files[:MAX_LISTED_FILES]
    ]
    if len(files) > MAX_LISTED_FILES:
        rows.append(f"| … {len(files) - MAX_LISTED_FILES} more files: see the full comparison | | |")
    total = f"{len(files)} files, +{diffstat.get('additions', 0)} -{diffstat.get('deletions', 0)}"
    return f"{total}\n\n| file | added | removed |\n|---|---|---|\n" + "\n".join(rows)


def _sections(diff: str) -> list[list[str]]:
    """A unified patch split per file, in the order of its files (each starts at `diff --git`)."""
    out: list[list[str]] = []
    for line in diff.splitlines():
        if line.startswith("diff --git ") or not out:
            out.append([])
        out[-1].append(line)
    return out


@dataclass(frozen=True)
class ShownDiff:
    """What of a diff the comment shows, and what it leaves out (said at the top, never quietly)."""

    lines: list[str]
    total_lines: int
    hidden_lines: int
    hidden_files: list[str]
    partial_files: list[str]

    @property
    def cut(self) -> bool:
        return bool(self.hidden_lines or self.hidden_files or self.partial_files)


def shown_diff(
    diff: str, files: list[dict[str, Any]], max_lines: int = MAX_DIFF_LINES, max_chars: int = MAX_DIFF_CHARS
) -> ShownDiff:
    """Whole files while they fit in `max_lines` and `max_chars`; the first that does not is shown in
    part, and every file after it (or whose patch is missing) is left out and named."""
    sections = _sections(diff)
    if len(sections) > len(files):  # cannot tell the files apart: show none, name all
        sections = []
    shown: list[str] = []
    hidden_lines, total = 0, 0
    hidden: list[str] = []
    partial: list[str] = []
    budget, chars = max_lines, max_chars
    for index, entry in enumerate(files):
        path = str(entry["path"])
        if index >= len(sections):  # the patch stopped before this file (held_push.MAX_PATCH_CHARS)
            size = int(entry.get("additions", 0)) + int(entry.get("deletions", 0))
            hidden.append(path)
            hidden_lines += size
            total += size
            continue
        lines = sections[index]
        total += len(lines)
        fits = _fitting(lines, budget, chars)
        if fits == len(lines):
            shown += lines
            budget -= fits
            chars -= sum(len(line) + 1 for line in lines)
        elif fits > 0 or budget > 0 < chars:
            shown += lines[:fits]
            partial.append(path)
            hidden_lines += len(lines) - fits
            budget = chars = 0
        else:
            hidden.append(path)
            hidden_lines += len(lines)
    return ShownDiff(shown, total, hidden_lines, hidden, partial)


def _fitting(lines: list[str], budget: int, chars: int) -> int:
    """How many of `lines`, from the first, fit in `budget` lines and `chars` characters."""
    count = 0
    for line in lines[:budget]:
        chars -= len(line) + 1
        if chars < 0:
            break
        count += 1
    return count


def _names(paths: list[str]) -> str:
    named = ", ".join(md.code(p) for p in paths[:MAX_NAMED])
    return named + (f" and {len(paths) - MAX_NAMED} more" if len(paths) > MAX_NAMED else "")


def cut_notice(diff: ShownDiff, file_count: int, compare_url: str | None) -> str:
    """The words at the top of an approval comment whose diff is cut: how much is not shown, where."""
    parts = []
    if diff.hidden_files:
        noun = "files is" if len(diff.hidden_files) == 1 else "files are"
        parts.append(
            f"{len(diff.hidden_files)} of {file_count} {noun} not shown at all ({_names(diff.hidden_files)})"
        )
    if diff.partial_files:
        parts.append(f"{len(diff.partial_files)} is shown only in part ({_names(diff.partial_files)})")
    where = (
        f" Read the whole change before you approve: [the full comparison on GitHub]({compare_url}) "
        "(it opens once the commit is pushed; every file is listed in the table below)."
        if compare_url
        else " Every file is listed in the table below."
    )
    files = "; ".join(parts)
    return (
        f"⚠️ **This comment does not show the whole change.** {diff.hidden_lines:,} of "
        f"{diff.total_lines:,} diff lines are not shown" + (f": {files}." if files else ".") + where
    )


def _commits(push: HeldPush) -> str:
    """Every commit that would become new in the base repository, under its own heading."""
    commits = push.diffstat.get("commits")
    if not isinstance(commits, list) or not commits:
        return ""
    theirs = sum(1 for c in commits if not c.get("own", True))
    origin = ""
    if push.context.from_fork:
        fork = md.code(push.context.head_repo or "a fork")
        origin = f"; {theirs} from the fork {fork}, {len(commits) - theirs} made by this run"
    rows = []
    for entry in commits:
        who = md.code(f"{entry.get('author', '')} <{entry.get('email', '')}>")
        subject = md.code(md.one_line(str(entry.get("subject", ""))) or "(no message)")
        mark = "" if entry.get("own", True) else " (from the fork)"
        rows.append(f"- `{str(entry.get('sha', ''))[:12]}` by {who}: {subject}{mark}")
    heading = f"**Commits that would become new in {md.code(push.repo)}** ({len(commits)}{origin}):"
    return heading + "\n\n" + "\n".join(rows)


def fork_warning(push: HeldPush) -> str:
    fork = md.code(push.context.head_repo or "a fork")
    return (
        f"⚠️ This pull request comes from the fork {fork}. This repository allows pushes of a fork's "
        f"commits (`fork_pushes: allow`), so approving pushes **every commit listed below** into "
        f"{md.code(push.repo)}, where its push-triggered workflows run them."
    )


NOT_SHOWN = (
    "the approval comment does not show this commit (it was edited, or the push changed since it was "
    "written): nothing was pushed; ask for the change again"
)


def shown_digest(push: HeldPush) -> str:
    """What an approval comment shows, as one digest: the push, its commit, the branch it goes to,
    the commit it builds on and every commit that lands. Approving lands only a push whose row
    still has this digest (landing.py): a row changed after the comment was written lands nothing."""
    shown = {
        "id": push.id,
        "commit": push.commit_sha,
        "branch": push.branch,
        "base": push.head_sha,
        "expected_tip": push.context.expected_tip,
        "commits": push.diffstat.get("commits"),
    }
    return hashlib.sha256(json.dumps(shown, sort_keys=True, default=str).encode()).hexdigest()


def marker(push: HeldPush) -> str:
    return MARKER.format(id=push.id, digest=shown_digest(push))


def shows(body: str, push: HeldPush) -> bool:
    """Whether the bot's marker in a comment body (the last one: the bot writes its own after
    everything quoted above it) is of exactly this push as it is now."""
    found = _SHOWN.findall(body)
    return bool(found) and found[-1] == (push.id, shown_digest(push))


def approval_request(
    push: HeldPush,
    diff: str,
    message: str,
    checks: CheckReport | None = None,
    *,
    compare_url: str | None = None,
    by_reaction: bool = True,
) -> str:
    """The approval comment: what lands (every new commit, every file, the diff or what of it fits),
    the checks, and how to answer (without `by_reaction`, in the Action, only by command: a reaction
    starts no workflow). Everything from the model or the repository goes through `bot.app.markdown`;
    a cut diff is said first."""
    files = list(push.diffstat.get("files", []))
    diff_shown = shown_diff(diff, files)
    shown = "\n".join(diff_shown.lines)
    block = md.fenced(shown, "diff")
    if len(diff_shown.lines) > COLLAPSE_OVER:
        block = f"<details><summary>Diff ({len(diff_shown.lines)} lines)</summary>\n\n{block}\n\n</details>"
    if diff_shown.cut:
        more = diff_shown.hidden_lines
        block += f"\n\n*(The diff is cut here: {more:,} more lines, see the top of this comment.)*"
    subject = md.code(md.one_line(message) or "(no message)")
    checked = render_checks.section(checks)
    answer = (
        f"**To answer**: react 👍 on this comment to approve or 👎 to reject, or comment "
        f"`/beam approve {push.id}` or `/beam reject {push.id}`. It expires on {_when(push.expires_at)}."
        if by_reaction
        else f"**To answer**: comment `/beam approve {push.id}` to approve or `/beam reject {push.id}` to "
        f"reject (this workflow sees no reactions). It expires on {_when(push.expires_at)}."
    )
    if checks is not None and checks.blocks:
        answer = render_checks.not_offered(checks)
    top = [
        f"🔒 **Held push `{push.id}`**: @{push.requester} asked for a change; nothing is pushed until a "
        f"maintainer approves."
    ]
    if diff_shown.cut or len(files) > MAX_LISTED_FILES:
        top.append(cut_notice(diff_shown, len(files), compare_url))
    if push.context.from_fork:
        top.append(fork_warning(push))
    top.append(f"Commit `{push.commit_sha}` ({subject}) to branch `{push.branch}`.")
    commits = _commits(push)
    return (
        "\n\n".join(top)
        + "\n\n"
        + (f"{commits}\n\n" if commits else "")
        + f"{_files_table(push.diffstat)}\n\n{block}\n\n"
        + (f"{checked}\n\n" if checked else "")
        + f"{answer}\n\n"
        + marker(push)
    )


def decided(push: HeldPush, headline: str, detail: str = "") -> str:
    extra = f"\n\n{detail}" if detail else ""
    return (
        f"{headline}\n\nHeld push `{push.id}`: commit `{push.commit_sha}` for branch `{push.branch}`, "
        f"asked for by @{push.requester}.{extra}\n\n" + marker(push)
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


def fork_refused(command: str, fork: str | None, repo: str) -> str:
    """The one reply to `/beam author|docs|update` on a fork's pull request where `fork_pushes` is off."""
    where = f"the fork {md.code(fork)}" if fork else "a fork (its repository is gone)"
    return (
        f"🔒 `/beam {command}` did not run (BEM-347): this pull request comes from {where}, and this "
        f"repository does not let the bot push a fork's commits into it. The bot's branch would carry "
        f"every commit of the fork into {md.code(repo)}, where its push-triggered workflows run them.\n\n"
        f"A maintainer can allow it with `fork_pushes: allow` in `.github/beam.yml` on the default "
        f"branch; each approval comment then lists every commit that would land. Nothing was run."
    )


def landing_changed(unlisted: list[str]) -> str:
    """Why an approved push was refused at push time (BEM-348)."""
    shown = ", ".join(f"`{sha[:12]}`" for sha in unlisted[:10])
    more = f" and {len(unlisted) - 10} more" if len(unlisted) > 10 else ""
    return (
        f"{len(unlisted)} commit(s) that the approval comment did not list would land with it "
        f"({shown}{more}): a branch the listing relied on moved or was deleted (BEM-348)"
    )


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
    rows = [
        f"- [{md.code(n.path)} line {n.line}]({n.url}) by @{n.author}: {_one_line(n.body)}"
        for n in notes[:50]
    ]
    return "\n\n**Review comments this commit addresses**\n" + "\n".join(rows)


def _one_line(text: str, limit: int = 120) -> str:
    line = md.untrusted(md.visible(" ".join(text.split()))).replace("`", "'")
    return line if len(line) <= limit else line[: limit - 1] + "…"


def up_to_date(branch: str, base: str) -> str:
    return f"`{branch}` already contains `{base}`; there is nothing to merge."


def merge_conflicts(branch: str, base: str, paths: list[str]) -> str:
    shown = "\n".join(f"- {md.code(p)}" for p in paths[:100])
    more = f"\n- … {len(paths) - 100} more" if len(paths) > 100 else ""
    return (
        f"Merging `{base}` into `{branch}` conflicts in these files, so nothing was pushed:\n\n"
        f"{shown}{more}\n\nResolve them on the branch, or ask with `/beam author`."
    )


def merge_message(base: str, branch: str) -> str:
    return f"Merge branch '{base}' into {branch}"
