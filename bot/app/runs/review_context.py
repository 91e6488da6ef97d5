"""The diff part of a prompt, shared by `/beam review` (runs/prompt.py), automatic reviews
(reviews/prompt.py) and `beam-bot run`: numbered hunks (diff_context.py) of the files that matter,
packed into calls within the token budget (budget.py), each call with the linters' findings on its
files and the extra sections a caller adds, all of it data from outside.

The inputs are what GitHub gives (the pull request's files with their `patch`) plus what the checkout
holds (the head's `.gitattributes`, linter findings), so a local run builds the same prompt.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio

from bot.app.github.models import PullFile
from bot.app.limits.policy import Limits
from bot.app.repo_config.review_rules import ReviewRules
from bot.app.runs.budget import (
    CHARS_PER_TOKEN,
    AttrRule,
    BudgetPlan,
    Section,
    estimate_tokens,
    ordered,
    parse_gitattributes,
    plan_budget,
    skip_reason,
)
from bot.app.runs.diff_context import (
    added_lines,
    file_heading,
    format_file,
    format_hunk,
    normalised_claim,
    parse_hunks,
)
from bot.app.runs.linters import LintFinding, LintReport, run_linters
from bot.beam.errors import BeamError
from bot.beam.sandbox import SandboxRoot

DEFAULT_TOKENS_PER_CALL = 24_000
DEFAULT_MAX_CALLS = 3
RESERVED_TOKENS = 3_000  # the system prompt, the tool schemas and room for the model's answer
MAX_EXTRA_SHARE = 4  # extra sections take at most a quarter of a call
MAX_GITATTRIBUTES_BYTES = 256 * 1024
MAX_NAMED = 40  # file names per list in a prompt; the rest are counted


@dataclass(frozen=True)
class UntrustedSection:
    """Data a caller adds to every call of a review (the maintainers' path instructions, the findings
    already dismissed): `title` is ours, `text` is fenced with the pull request as data."""

    title: str
    text: str


@dataclass(frozen=True)
class ReviewContext:
    """What a prompt gets beyond the pull request's files: the checkout's `.gitattributes` at the
    head, the linters' report, extra sections, and the budget (tokens per call, calls)."""

    gitattributes: str | None = None
    lint: LintReport | None = None
    sections: Sequence[UntrustedSection] = ()
    tokens_per_call: int = DEFAULT_TOKENS_PER_CALL
    max_calls: int = DEFAULT_MAX_CALLS


@dataclass
class DiffChunk:
    """The data lines of one call: its files' numbered hunks, their lint findings, the extra sections."""

    lines: list[str]
    files: list[str]


@dataclass
class DiffPlan:
    chunks: list[DiffChunk] = field(default_factory=list)
    budget: BudgetPlan = field(default_factory=BudgetPlan)

    @property
    def left_out(self) -> list[tuple[str, str]]:
        return self.budget.left_out

    def left_out_names(self) -> list[str]:
        """For the summary's "not reviewed" line: each file with why."""
        return [f"{path} ({why})" for path, why in self.left_out]


def _blocks(item: PullFile) -> list[str]:
    blocks = [file_heading(item)]
    blocks += ["\n".join(format_hunk(h)) for h in parse_hunks(item.patch or "")]
    return blocks


def _lint_lines(findings: Sequence[LintFinding]) -> list[str]:
    if not findings:
        return []
    return [
        "linter findings on changed lines (evidence from ruff/shellcheck: confirm each before you "
        "report it, in your own words, or leave it out):",
        *(f"- {f.describe()}" for f in findings),
    ]


def _extra_lines(sections: Sequence[UntrustedSection], room: int) -> list[str]:
    out: list[str] = []
    left = room
    for section in sections:
        if left <= 20:
            break
        text = section.text
        cost = estimate_tokens(text) + estimate_tokens(section.title) + 1
        if cost > left:
            text = text[: max(0, int((left - 20) * CHARS_PER_TOKEN))] + "\n(cut to fit the budget)"
            cost = left
        out += [f"{section.title}:", text]
        left -= cost
    return out


def plan_diff(files: Sequence[PullFile], context: ReviewContext, overhead: int) -> DiffPlan:
    """Pack `files` into calls. `overhead`: tokens of the rest of one call's prompt (task, metadata)."""
    rules: list[AttrRule] = parse_gitattributes(context.gitattributes)
    skipped: list[tuple[str, str]] = []
    deleted: list[str] = []
    kept: list[PullFile] = []
    for item in files:
        reason = skip_reason(item.filename, rules)
        if reason is not None:
            skipped.append((item.filename, reason))
        elif item.status == "removed":
            deleted.append(item.filename)
        else:
            kept.append(item)
    extra_room = context.tokens_per_call // MAX_EXTRA_SHARE
    extra = _extra_lines(context.sections, extra_room)
    fixed = overhead + RESERVED_TOKENS + estimate_tokens("\n".join(extra)) + _names_reserve(files)
    room = max(500, context.tokens_per_call - fixed)
    findings = context.lint.findings if context.lint is not None else []
    sections: list[tuple[Section, list[str]]] = []
    for item in ordered(kept, rules):
        text = format_file(item)
        lint = [f for f in findings if f.path == item.filename]
        cost = estimate_tokens(text) + estimate_tokens("\n".join(_lint_lines(lint)))
        sections.append((Section(item, text, cost), _blocks(item)))
    budget = plan_budget(
        sections, room=room, max_calls=max(1, context.max_calls), skipped=skipped, deleted=deleted
    )
    plan = DiffPlan(budget=budget)
    for chunk in budget.chunks or [[]]:
        names = [s.item.filename for s in chunk]
        lines = [s.text for s in chunk]
        if deleted:
            lines.append("deleted files (not shown): " + _names(deleted))
        lines += _lint_lines([f for f in findings if f.path in names])
        lines += extra
        plan.chunks.append(DiffChunk(lines, names))
    return plan


def left_out_lines(plan: DiffPlan, index: int) -> list[str]:
    """What this call does not show: files other calls read, and files no call reads."""
    lines: list[str] = []
    others = [name for i, chunk in enumerate(plan.chunks) if i != index for name in chunk.files]
    if others:
        lines.append(
            f"This is part {index + 1} of {len(plan.chunks)} of the review; other parts read: "
            + _names(others)
        )
    if plan.left_out:
        lines.append("not shown: " + _names(plan.left_out_names()))
    return lines


def _names(names: Sequence[str]) -> str:
    shown = ", ".join(names[:MAX_NAMED])
    return shown + (f" and {len(names) - MAX_NAMED} more" if len(names) > MAX_NAMED else "")


def _names_reserve(files: Sequence[PullFile]) -> int:
    """Tokens the lists of names may take (deleted, in other calls, not shown: `MAX_NAMED` each), so
    that a pull request of many files still keeps its calls within the budget."""
    longest = sorted((estimate_tokens(f.filename) + 8 for f in files), reverse=True)[:MAX_NAMED]
    return 3 * sum(longest) + 60


def read_gitattributes(root: SandboxRoot) -> str | None:
    """The checkout's top `.gitattributes` at the head, read like any other file of the tree (a symlink
    out of the checkout is not followed); None when it is absent or unreadable."""
    try:
        path = root.resolve(".gitattributes")
        if not path.is_file() or path.stat().st_size > MAX_GITATTRIBUTES_BYTES:
            return None
        return path.read_text(encoding="utf-8", errors="replace")
    except (BeamError, OSError):
        return None


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    near = a["path"] == b["path"] and abs(int(a["line"]) - int(b["line"])) <= 1
    return near and normalised_claim(a.get("finding", a["body"])) == normalised_claim(
        b.get("finding", b["body"])
    )


def merge_parts(parts: Sequence[tuple[str, list[dict[str, Any]]]]) -> tuple[str, list[dict[str, Any]]]:
    """One review from the calls of a chunked review: the bodies in order, the comments without the
    ones a call repeated (same file, within a line, same claim once normalised)."""
    bodies = [body.strip() for body, _ in parts if body.strip()]
    comments: list[dict[str, Any]] = []
    for _, found in parts:
        for comment in found:
            if not any(_same(comment, kept) for kept in comments):
                comments.append(comment)
    return "\n\n".join(dict.fromkeys(bodies)), comments


async def review_context(
    root: SandboxRoot,
    files: Sequence[PullFile],
    rules: ReviewRules,
    limits: Limits,
    sections: Sequence[UntrustedSection] = (),
    *,
    lint: bool = True,
) -> ReviewContext:
    """A review's context from its checkout: the head's `.gitattributes`, the linters' findings on
    changed lines (unless `review.linters` is off), the budget (`review.max_calls` lowers the server's)."""
    changed = {f.filename: added_lines(f.patch) for f in files if f.status != "removed"}
    report = None
    if lint and rules.linters is not False:
        report = await run_linters(root, changed, enabled=rules.linter_enabled)
    return ReviewContext(
        gitattributes=await anyio.to_thread.run_sync(read_gitattributes, root),
        lint=report,
        sections=sections,
        tokens_per_call=limits.review_tokens_per_call,
        max_calls=rules.calls_limit(limits.review_max_calls),
    )


@dataclass
class CallParts:
    """What the calls of a chunked review posted; merged and posted once when all have run."""

    parts: list[tuple[str, list[dict[str, Any]]]] = field(default_factory=list)

    async def collect(self, body: str, comments: list[dict[str, Any]]) -> int | None:
        self.parts.append((body, comments))
        return len(self.parts)

    def merged(self) -> tuple[str, list[dict[str, Any]]] | None:
        return merge_parts(self.parts) if self.parts else None


def call_session(run_id: str, index: int) -> uuid.UUID:
    """Each call of a chunked review is a conversation of its own: no call sees another's files."""
    return uuid.uuid5(uuid.UUID(run_id), f"review-call-{index}")
