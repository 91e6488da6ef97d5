"""The Markdown of every comment the bot writes, in one place so the tone and the states stay alike.

Every tracking comment carries a hidden marker with the run id, so a retried job finds and edits its
own comment instead of posting a second one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from bot.app.commands import help_text

MARKER = "<!-- beam-run:{run_id} -->"
MAX_COMMENT_CHARS = 60_000  # GitHub refuses bodies over 65,536 characters.
_CITATION = re.compile(r"(?<![\w/`\[])`?(?P<path>[\w.\-/]+\.\w+)(?::(?P<start>\d+)(?:-(?P<end>\d+))?)?`?")


@dataclass
class Progress:
    """What a run has done so far, as the tracking comment shows it."""

    command: str
    run_id: str
    tools: list[str] = field(default_factory=list)

    def add_tool(self, name: str, args: object) -> None:
        label = name
        if isinstance(args, dict):
            target = args.get("path") or args.get("query") or args.get("ref")
            if isinstance(target, str) and target:
                label = f"{name} `{_inline(target)}`"
        self.tools.append(label)


def _inline(text: str, limit: int = 80) -> str:
    text = text.replace("`", "'").replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _clip(text: str) -> str:
    if len(text) <= MAX_COMMENT_CHARS:
        return text
    return text[:MAX_COMMENT_CHARS] + "\n\n*(cut here: the answer was longer than a GitHub comment allows)*"


def _marker(run_id: str) -> str:
    return MARKER.format(run_id=run_id)


def _steps(progress: Progress, limit: int = 30) -> str:
    shown = progress.tools[-limit:]
    lines = [f"- [x] {tool}" for tool in shown]
    if len(progress.tools) > limit:
        lines.insert(0, f"- … {len(progress.tools) - limit} earlier steps")
    return "\n".join(lines)


def review_posted(url: str, answer: str = "") -> str:
    """The tracking comment's answer for a review run: where the review is, then the model's words."""
    text = "Posted a review on this pull request."
    if url:
        text += f" ([the review]({url}))"
    return f"{text}\n\n{answer}" if answer else text


def working(progress: Progress) -> str:
    steps = _steps(progress)
    body = f"⏳ Working on `{progress.command}` (run `{progress.run_id[:8]}`)…"
    if steps:
        body += f"\n\n{steps}"
    return f"{body}\n\n{_marker(progress.run_id)}"


def finished(progress: Progress, answer: str, notes: Sequence[str] = ()) -> str:
    details = ""
    if progress.tools:
        steps = _steps(progress, 200)
        details = f"\n\n<details><summary>{len(progress.tools)} steps</summary>\n\n{steps}\n\n</details>"
    extra = "".join(f"\n\n> [!NOTE]\n> {note}" for note in notes)
    footer = f"\n\n<sub>`{progress.command}` · run `{progress.run_id[:8]}`</sub>"
    return (
        _clip(answer.strip() or "*(the model gave an empty answer)*")
        + extra
        + details
        + footer
        + f"\n{_marker(progress.run_id)}"
    )


def failed(progress: Progress, reason: str, code: str | None = None) -> str:
    coded = f" ({code})" if code else ""
    return (
        f"❌ `{progress.command}` failed{coded}: {reason}\n\n"
        f"Run id: `{progress.run_id}`. Nothing was pushed. You can try again with the same command."
        f"\n\n{_marker(progress.run_id)}"
    )


def retrying(progress: Progress, reason: str, attempt: int, attempts: int) -> str:
    return (
        f"⏳ `{progress.command}` hit a temporary problem ({reason}); retrying (attempt {attempt + 1} of "
        f"{attempts}), run `{progress.run_id[:8]}`.\n\n{_marker(progress.run_id)}"
    )


def refusal(login: str, needed: str) -> str:
    return (
        f"Sorry @{login}, `/beam` commands need {needed} permission on this repository. "
        "A maintainer can run the command instead."
    )


def command_help(problem: str | None = None) -> str:
    lead = f"{problem}\n\n" if problem else ""
    return f"{lead}Here is what I can do:\n\n{help_text()}"


def needs_pull_request(command: str) -> str:
    return f"`{command}` works on pull requests; this is an issue. Try it in a pull request's conversation."


def not_read_note(
    skipped: Iterable[str], truncated: Iterable[str], total_files: int, listed_files: int
) -> list[str]:
    """Plain words for what the run could not read, instead of hiding it."""
    notes: list[str] = []
    if listed_files < total_files:
        notes.append(
            f"This pull request changes {total_files} files; I looked at the first {listed_files} only."
        )
    skipped = list(skipped)
    if skipped:
        notes.append("Skipped (binary or too large): " + ", ".join(f"`{_inline(p)}`" for p in skipped[:20]))
    truncated = list(truncated)
    if truncated:
        notes.append("Read in part only: " + ", ".join(f"`{_inline(p)}`" for p in truncated[:20]))
    return notes


def link_citations(text: str, known_paths: set[str], blob_base: str) -> str:
    """Turn `path` and `path:12-20` mentions of files in the checkout into links at the head commit."""

    def replace(match: re.Match[str]) -> str:
        path = match.group("path")
        if path not in known_paths:
            return match.group(0)
        start, end = match.group("start"), match.group("end")
        anchor = f"#L{start}" + (f"-L{end}" if end else "") if start else ""
        label = path + (f":{start}" if start else "") + (f"-{end}" if end else "")
        return f"[`{label}`]({blob_base}/{path}{anchor})"

    return _CITATION.sub(replace, text)
