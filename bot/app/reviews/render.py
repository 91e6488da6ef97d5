"""Every text of automatic reviews: the summary comment, the check run's output, the review body's
footer and the answers in review threads.

The summary comment is the bot's one comment per pull request about automatic reviews: it is edited
as ranges are reviewed and never posted twice (the hidden marker finds it again after a crash).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import datetime

from bot.app import markdown as md
from bot.app.repo_config import CONFIG_PATH
from bot.app.reviews.state import Entry
from bot.app.runs import render as run_render
from bot.app.runs.render import thread_marker
from bot.beam.errors import CATALOG

SUMMARY_MARKER = "<!-- beam-review-summary -->"
CHECK_NAME = "beam / review"
MAX_NAMED_FILES = 20


def short(sha: str | None) -> str:
    return (sha or "")[:7]


def commit_range(entry: Entry) -> str:
    return f"{short(entry.since)}..{short(entry.head)}" if entry.since else short(entry.head)


def _files(names: Sequence[str]) -> str:
    shown = ", ".join(md.code(name) for name in names[:MAX_NAMED_FILES])
    more = len(names) - MAX_NAMED_FILES
    return shown + (f" and {more} more" if more > 0 else "")


def entry_line(entry: Entry) -> str:
    span = f"`{commit_range(entry)}`"
    note = md.untrusted(entry.note)  # may quote an error, a model's words or the configuration
    scope = "full review" if entry.full else "new commits"
    if entry.kind == "reviewed":
        noun = "finding" if entry.findings == 1 else "findings"
        line = f"- {span} ({scope}): [{entry.findings} {noun}]({entry.url})"
    elif entry.kind == "no_findings":
        # Nothing new was posted: findings of earlier ranges may still be open (the count below
        # says how many), and one the model repeated is not posted twice, so "no findings" was false.
        line = f"- {span} ({scope}): no new findings in {span}"
    elif entry.kind == "unchanged":
        line = (
            f"- {span}: no review; the push only merged or rebased the base branch, the pull "
            "request's own changes are the same"
        )
    elif entry.kind in ("too_large", "over_limit"):
        line = f"- {span}: skipped; {note}"
    elif entry.kind == "capped":
        line = (
            f"- {span} ({scope}): stopped at {note} before it posted a review; the next push "
            "reviews these commits again"
        )
    elif entry.kind == "superseded":
        line = f"- {span}: stopped, superseded by a newer push"
    elif entry.kind == "cancelled":
        line = f"- {span}: cancelled; {note}"
    elif entry.kind == "failed":
        line = f"- {span}: the review failed ({note}); the next push tries again"
    elif entry.kind == "not_reviewed":  # the model never gave a review: nothing was posted
        line = f"- {span} ({scope}): not reviewed, nothing was posted: {note} The next push tries again."
    elif entry.kind == "invalid_config":
        code = run_render.CONFIG_ERROR_CODE
        line = (
            f"- {span}: no review; `{CONFIG_PATH}` on the default branch is invalid ({code}), "
            "so automatic reviews wait until it is fixed there:\n"
            + run_render.config_error_block(entry.note.split("\n"), indent="  ")
        )
    else:
        line = f"- {span}: skipped ({note})"
    if entry.skipped_files:
        line += f"\n  - not reviewed: {_files(entry.skipped_files)}"
    if entry.kind in ("reviewed", "no_findings") and note:
        line += f"\n  - {note}"
    return line


def linters_skipped(names: Sequence[str]) -> str:
    """The summary's note when a linter could not run: skipped, never fatal (issue 21)."""
    return "linters skipped: " + ", ".join(names) if names else ""


def findings_line(counts: Mapping[str, int]) -> str:
    """The ledger's count of this pull request's findings (issue 21), or "" before the first."""
    if not any(counts.values()):
        return ""
    parts = [f"{counts.get(state, 0)} {state}" for state in ("open", "fixed", "dismissed")]
    return (
        f'Findings: {", ".join(parts)}. A 👎, a reply with "won\'t fix", "not a bug" or '
        "`/beam dismiss`, or resolving the thread dismisses one: it is not raised again here."
    )


def summary(entries: Sequence[Entry], counts: Mapping[str, int] | None = None) -> str:
    lines = [
        SUMMARY_MARKER,
        "### beam-bot automatic review",
        "",
        "Reviewed commit ranges, oldest first. New pushes are reviewed incrementally: only lines they "
        "change get comments, and a finding already made is not repeated.",
        "",
        *(entry_line(entry) for entry in entries),
    ]
    counted = findings_line(counts or {})
    if counted:
        lines += ["", counted]
    return "\n".join(lines) + "\n"


# -- the findings ledger (issue 21): what the model is told, and the reply to a fixed finding ------

DISMISSED_TITLE = (
    "findings already dismissed on this pull request by its maintainers: do not raise them again, "
    "even where the code changed"
)


def dismissed_line(path: str, line: int, claim: str) -> str:
    return f"- {path} line {line}: {' '.join(claim.split())[:300]}"


def fixed_in(commit: str) -> str:
    return f"Fixed in `{short(commit)}`."


def too_large(changed: int, limit: int) -> str:
    return (
        f"{changed:,} changed lines is more than `auto_review.max_changed_lines` ({limit:,}); "
        "ask for one with `/beam review`"
    )


def invalid_config(errors: Sequence[str]) -> str:
    """An invalid-config entry's note: the validation messages, one a line."""
    return "\n".join(error.replace("\n", " ") for error in errors)


def over_limit(author: str, limit: str, value: float, resets_at: datetime) -> str:
    """Why a push was not reviewed, in a command's words; a per-user limit is the author's (the
    pull request's author is who an automatic review counts against, docs/costs-and-limits.md)."""
    return run_render.would_go_over(limit, value, resets_at, whose=f"@{author}'s")


def gave_up(code: str) -> str:
    """A failed entry's note when the review job was given up: the code and its catalog reason (BEM-339
    the worker was lost on the last attempt, BEM-340 an error no retry mends or retries ran out)."""
    message = CATALOG[code].message.rstrip(".")
    word = message.split(" ", 1)[0]
    if not any(c.isupper() for c in word[1:]):  # "The job ..." reads on as "the job"; "GitHub" stays
        message = message[0].lower() + message[1:]
    return f"{code}: {message}"


def capped(limit: str, value: float) -> str:
    return run_render.limit_words(limit, value)


def coverage(scope_total: int, reviewed: int, unread: Sequence[str], ignored: Sequence[str]) -> list[str]:
    """The files a review did not read, named (binary, too large, past the file limit, ignored)."""
    names = [*unread, *(f"{name} (ignore_paths)" for name in ignored)]
    if scope_total > reviewed + len(names):
        names.append(f"{scope_total - reviewed - len(names)} files GitHub did not list")
    return names


def review_body(body: str, entry_range: str, full: bool) -> str:
    scope = "the whole pull request" if full else f"the commits `{entry_range}`"
    return f"{md.untrusted(body.strip())}\n\n<sub>Automatic review of {scope} by beam-bot.</sub>"


def check_output(entry: Entry) -> dict[str, str]:
    """The check run's title and summary for how a range ended (the conclusion is always neutral)."""
    span = f"`{commit_range(entry)}`"
    titles = {
        "reviewed": f"{entry.findings} finding{'s' if entry.findings != 1 else ''}",
        "no_findings": "No new findings",
        "unchanged": "No review: only the base changed",
        "too_large": "Skipped: too large",
        "over_limit": "Skipped: over a limit",
        "capped": "Stopped at a limit",
        "superseded": "Superseded by a newer push",
        "cancelled": "Cancelled",
        "failed": "The review failed",
        "not_reviewed": "Not reviewed: the model gave no review",
        "skipped": "Skipped",
        "invalid_config": "Skipped: invalid configuration",
    }
    text = entry_line(entry).removeprefix("- ")
    if entry.kind == "reviewed":
        text += f"\n\nThe review: {entry.url}"
    return {"title": titles[entry.kind], "summary": f"Range {span}.\n\n{text}"}


QUEUED_SUPERSEDED = Entry(kind="superseded", head="")
CLOSED = "the pull request was closed"


# The effects journal's own marker (effects/writer.py), the one line a written reply has after ours.
_EFFECT_LINE = re.compile(r"\n<!-- beam-effect:[^\n]*-->$")


def _in_thread(text: str, comment_id: int, usage: run_render.Usage | None) -> str:
    """A text of the bot's in a review thread: the run's usage footer (as every run's answer has),
    then the marker that says which comment it answers."""
    if usage is not None:
        text = run_render.with_usage(text, usage)
    return f"{text}\n\n{thread_marker(comment_id)}"


def thread_reply(answer: str, comment_id: int, usage: run_render.Usage | None = None) -> str:
    """The model's answer in a review thread (shown, never hiding a marker: `markdown.untrusted`),
    then the marker that says which comment it answers; the marker counts only as the last line of
    a comment of the bot's (`answers`)."""
    shown = md.untrusted(answer.strip()) or "I have no answer to add."
    return _in_thread(shown, comment_id, usage)


def answers(body: str, comment_id: int) -> bool:
    """Whether `body` (a comment of the bot's) is its answer to `comment_id`: the marker where
    `thread_reply` puts it, at the very end (before the effects journal's line, which the journal
    adds to everything it writes), not anywhere a quoted text could place it."""
    text = _EFFECT_LINE.sub("", body.rstrip()).rstrip()
    return text.endswith(f"\n{thread_marker(comment_id)}")


def thread_failed(comment_id: int, usage: run_render.Usage | None = None) -> str:
    return thread_reply("Sorry, I could not answer this time; mention me again to retry.", comment_id, usage)


def thread_stopped(comment_id: int, limit: str, value: float, usage: run_render.Usage) -> str:
    """A question whose answer a cap stopped: before the model was asked (its prompt alone would reach
    a token cap), or while it wrote (the time cap)."""
    words = run_render.limit_words(limit, value)
    return _in_thread(f"No answer: this run stopped at {words} before the model answered.", comment_id, usage)


def thread_cancelled(comment_id: int, run_id: str, by: str, usage: run_render.Usage) -> str:
    text = f"🛑 This answer (run `{run_id[:8]}`) was cancelled by @{md.inline(by)}."
    return _in_thread(text, comment_id, usage)
