"""The diff part of a prompt, shared by `/beam review` (context/prompt.py), automatic reviews
(context/prompt.py) and `beam-bot run`: numbered hunks (diff_context.py) of the files that matter,
each widened to its enclosing function or class when focused (focus.py), packed into calls within
the token budget (budget.py), each call with the linters' findings on its files and the extra
sections a caller adds, all of it data from outside.

The inputs are what GitHub gives (the pull request's files with their `patch`) plus what the checkout
holds (the head's `.gitattributes` and changed files, linter findings), so a local run builds the
same prompt.
"""

from __future__ import annotations

import math
import random
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio

from bot.app.context.budget import (
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
from bot.app.context.diff_context import added_lines, file_heading, format_file
from bot.app.context.focus import Block, focused_hunks, hunk_blocks
from bot.app.context.grammars import grammar_for
from bot.app.context.linters import LintFinding, LintReport, run_linters
from bot.app.github.models import PullFile
from bot.app.limits.policy import Limits
from bot.app.repo_config.review_rules import ReviewRules
from bot.beam.errors import BeamError
from bot.beam.sandbox import SandboxRoot

DEFAULT_TOKENS_PER_CALL = 24_000
DEFAULT_MAX_CALLS = 3
RESERVED_TOKENS = 3_000  # the system prompt, the tool schemas and room for the model's answer
MAX_EXTRA_SHARE = 4  # extra sections take at most a quarter of a call
MAX_GITATTRIBUTES_BYTES = 256 * 1024
MAX_NAMED = 40  # file names per list in a prompt; the rest are counted
# A focused call's diff, in tokens, while the change fits `max_calls` of them. SWE-PRBench: a ~2k-token
# structured diff beat full context for every model tried, and more pasted context made models worse.
FOCUS_TOKENS = 2_500
MAX_SOURCE_BYTES = 512 * 1024  # a changed file read for focus; a larger one is shown as bare hunks


@dataclass(frozen=True)
class UntrustedSection:
    """Data a caller adds to every call of a review (the maintainers' path instructions, the findings
    already dismissed): `title` is ours, `text` is fenced with the pull request as data."""

    title: str
    text: str


@dataclass(frozen=True)
class ReviewContext:
    """What a prompt gets beyond the pull request's files: the checkout's `.gitattributes` at the
    head, the linters' report, extra sections, and the budget (tokens per call, calls).
    `sources`: the head's text of the changed files, to widen each hunk to its enclosing definition
    (focus.py); None shows bare hunks in calls as large as the budget allows. `order`: 0 packs the
    files by importance; another number, a shuffled order of files and hunks, the same for the
    same number (a review run several times, each pass seeing the hunks in another order)."""

    gitattributes: str | None = None
    lint: LintReport | None = None
    sections: Sequence[UntrustedSection] = ()
    tokens_per_call: int = DEFAULT_TOKENS_PER_CALL
    max_calls: int = DEFAULT_MAX_CALLS
    sources: Mapping[str, str] | None = None
    order: int = 0


@dataclass
class DiffChunk:
    """The data lines of one call: its files' numbered hunks, their lint findings, the extra sections."""

    lines: list[str]
    files: list[str]


@dataclass
class DiffPlan:
    """The calls of a review. `shape`, for logs and the review's footer: "whole" (one call holds every
    shown file whole), "per file" (several calls, no file split) or "per hunk" (some file's hunks
    are split across calls, or cut)."""

    chunks: list[DiffChunk] = field(default_factory=list)
    budget: BudgetPlan = field(default_factory=BudgetPlan)
    shape: str = "whole"

    @property
    def left_out(self) -> list[tuple[str, str]]:
        return self.budget.left_out

    def left_out_names(self) -> list[str]:
        """For the summary's "not reviewed" line: each file with why."""
        return [f"{path} ({why})" for path, why in self.left_out]


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


@dataclass
class _File:
    """One shown file before packing: its heading (with its note when it has no patch), its blocks
    (each a hunk, or a definition with its hunks when focused) and the linter findings on it."""

    item: PullFile
    heading: str
    blocks: list[Block]
    findings: list[LintFinding]

    def text(self) -> str:
        return "\n".join([self.heading, *(block.text for block in self.blocks)])

    def cost(self) -> int:
        return estimate_tokens(self.text()) + estimate_tokens("\n".join(_lint_lines(self.findings)))


def _shown_files(
    kept: Sequence[PullFile],
    rules: Sequence[AttrRule],
    context: ReviewContext,
    findings: Sequence[LintFinding],
) -> list[_File]:
    """The files in the order they are packed: by importance, or (`context.order`) shuffled, files
    and each file's blocks, the same way for the same order."""
    files = ordered(kept, rules)
    # Not a secret: the same order must give the same plan (tests, a retried pass).
    shuffle = random.Random(context.order).shuffle if context.order > 0 else None  # noqa: S311
    if shuffle is not None:
        shuffle(files)
    out: list[_File] = []
    for item in files:
        lint = [f for f in findings if f.path == item.filename]
        if not (item.patch or "").strip():
            out.append(_File(item, format_file(item), [], lint))
            continue
        if context.sources is not None:
            blocks = focused_hunks(item, context.sources.get(item.filename))
        else:
            blocks = hunk_blocks(item)
        if shuffle is not None:
            shuffle(blocks)
        out.append(_File(item, file_heading(item), blocks, lint))
    return out


def _parts(shown: _File, room: int) -> list[_File]:
    """A file larger than a call as parts of whole blocks that each fit in one (a block larger than
    a call is a part of its own, which the packer then cuts); a file that fits stays whole."""
    if shown.cost() <= room or len(shown.blocks) < 2:
        return [shown]
    note = estimate_tokens(_part_note(99, 99)) + 1
    groups: list[list[Block]] = [[]]
    for block in shown.blocks:
        blocks = [*groups[-1], block]
        trial = _File(shown.item, shown.heading, blocks, _findings_in(shown.findings, blocks))
        if groups[-1] and trial.cost() + note > room:
            groups.append([])
        groups[-1].append(block)
    parts = []
    for index, blocks in enumerate(groups, 1):
        heading = f"{shown.heading}\n{_part_note(index, len(groups))}"
        lint = _findings_in(shown.findings, blocks) if index > 1 else _first_part_findings(shown, blocks)
        parts.append(_File(shown.item, heading, blocks, lint))
    return parts


def _part_note(index: int, count: int) -> str:
    return f"(part {index} of {count} of this file's hunks; another call of this review shows the rest)"


def _findings_in(findings: Sequence[LintFinding], blocks: Sequence[Block]) -> list[LintFinding]:
    return [f for f in findings if any(b.first <= f.line <= b.last for b in blocks)]


def _first_part_findings(shown: _File, blocks: Sequence[Block]) -> list[LintFinding]:
    """The first part's findings: those on its lines, and those on lines no block shows."""
    return [
        f
        for f in shown.findings
        if any(b.first <= f.line <= b.last for b in blocks)
        or not any(b.first <= f.line <= b.last for b in shown.blocks)
    ]


def _pack(
    shown: Sequence[_File],
    room: int,
    max_calls: int,
    skipped: Sequence[tuple[str, str]],
    deleted: Sequence[str],
    *,
    split: bool,
) -> tuple[BudgetPlan, dict[tuple[str, int], list[LintFinding]]]:
    """The calls, by budget.py's first-fit packer. `split`: a file larger than a call goes as parts
    that other calls may take; otherwise the packer shows its first hunks only (the rest is named)."""
    sections: list[tuple[Section, list[str]]] = []
    findings: dict[tuple[str, int], list[LintFinding]] = {}
    for whole in shown:
        parts = _parts(whole, room) if split else [whole]
        for index, part in enumerate(parts, 1 if len(parts) > 1 else 0):
            section = Section(part.item, part.text(), part.cost(), part=index)
            sections.append((section, [part.heading, *(block.text for block in part.blocks)]))
            findings[(part.item.filename, index)] = part.findings
    budget = plan_budget(sections, room=room, max_calls=max_calls, skipped=skipped, deleted=deleted)
    return budget, findings


def _shape(budget: BudgetPlan) -> str:
    sections = [section for chunk in budget.chunks for section in chunk]
    if any(section.cut or section.part for section in sections):
        return "per hunk"
    return "whole" if len(budget.chunks) <= 1 else "per file"


def plan_diff(files: Sequence[PullFile], context: ReviewContext, overhead: int) -> DiffPlan:
    """Pack `files` into calls. `overhead`: tokens of the rest of one call's prompt (task, metadata).

    Focused (`context.sources` given), each file's hunks are widened to their definitions (focus.py)
    and a call holds about `FOCUS_TOKENS` of them: as many calls as `max_calls` allows before a call
    grows, and a call grows before a file is left out (up to the whole budget of a call)."""
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
    max_calls = max(1, context.max_calls)
    findings = context.lint.findings if context.lint is not None else []
    shown = _shown_files(kept, rules, context, findings)
    if context.sources is not None:
        total = sum(f.cost() for f in shown)
        full, room = room, min(room, max(FOCUS_TOKENS, math.ceil(total / max_calls)))
        split = max_calls > 1  # one call: a part has no other call to go to
        budget, by_part = _pack(shown, room, max_calls, skipped, deleted, split=split)
        # First fit wastes some room, so `total / max_calls` may not hold every file: grow the calls
        # a tenth at a time, never past the budget, until nothing is cut or left out for size.
        while room < full and (budget.cut or len(budget.left_out) > len(skipped)):
            room = min(full, math.ceil(room * 1.1))
            budget, by_part = _pack(shown, room, max_calls, skipped, deleted, split=split)
    else:
        budget, by_part = _pack(shown, room, max_calls, skipped, deleted, split=False)
    plan = DiffPlan(budget=budget, shape=_shape(budget))
    for chunk in budget.chunks or [[]]:
        names = list(dict.fromkeys(s.item.filename for s in chunk))
        lines = [s.text for s in chunk]
        if deleted:
            lines.append("deleted files (not shown): " + _names(deleted))
        lines += _lint_lines([f for s in chunk for f in by_part[(s.item.filename, s.part)]])
        lines += extra
        plan.chunks.append(DiffChunk(lines, names))
    return plan


def left_out_lines(plan: DiffPlan, index: int) -> list[str]:
    """What this call does not show: files other calls read, and files no call reads."""
    lines: list[str] = []
    # A file split across calls ("per hunk") is named once, and also where this call shows part of it.
    others = list(
        dict.fromkeys(name for i, chunk in enumerate(plan.chunks) if i != index for name in chunk.files)
    )
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


def read_sources(root: SandboxRoot, paths: Sequence[str]) -> dict[str, str]:
    """The head's text of the changed files that focus can read (a grammar knows them), read like any
    other file of the tree (a symlink out of the checkout is not followed); a file that is absent,
    over `MAX_SOURCE_BYTES` or not UTF-8 is left out, and its hunks are shown bare."""
    sources: dict[str, str] = {}
    for path in paths:
        if grammar_for(path) is None:
            continue
        try:
            real = root.resolve(path)
            if not real.is_file() or real.stat().st_size > MAX_SOURCE_BYTES:
                continue
            sources[path] = real.read_text(encoding="utf-8")
        except (BeamError, OSError, UnicodeDecodeError):
            continue
    return sources


def merge_parts(parts: Sequence[tuple[str, list[dict[str, Any]]]]) -> tuple[str, list[dict[str, Any]]]:
    """One review from the calls of a chunked review: the bodies in order (each once), then every
    call's comments; the review pass posts each finding once (reviews/votes.py `distinct`)."""
    bodies = [body.strip() for body, _ in parts if body.strip()]
    return "\n\n".join(dict.fromkeys(bodies)), [comment for _, found in parts for comment in found]


async def review_context(
    root: SandboxRoot,
    files: Sequence[PullFile],
    rules: ReviewRules,
    limits: Limits,
    sections: Sequence[UntrustedSection] = (),
    *,
    lint: bool = True,
    focus: bool | None = None,
    order: int = 0,
) -> ReviewContext:
    """A review's context from its checkout: the head's `.gitattributes`, the linters' findings on
    changed lines (unless `review.linters` is off), the budget (`review.max_calls` lowers the server's),
    and, focused (`focus`, else `review.focus`), the head's text of the changed files. `order`: the
    pass's order of files and hunks (0: by importance)."""
    changed = {f.filename: added_lines(f.patch) for f in files if f.status != "removed"}
    report = None
    if lint and rules.linters is not False:
        report = await run_linters(root, changed, enabled=rules.linter_enabled)
    sources = None
    if rules.focus if focus is None else focus:
        sources = await anyio.to_thread.run_sync(read_sources, root, list(changed))
    return ReviewContext(
        gitattributes=await anyio.to_thread.run_sync(read_gitattributes, root),
        lint=report,
        sections=sections,
        tokens_per_call=limits.review_tokens_per_call,
        max_calls=rules.calls_limit(limits.review_max_calls),
        sources=sources,
        order=order,
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
