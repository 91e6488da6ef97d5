"""A pull request's diff as a model can cite it: every hunk's new side numbered, each removed line
shown where it was, decided without I/O.

GitHub's `patch` gives a hunk's start only (`@@ -a,b +c,d @@`): to name a line the model would have
to count, and models count badly, so a misplaced comment is the usual noise. Here each line of the new
side carries its number, and each removed line sits where it was, without one:

    @@ -10,2 +10,3 @@ def load(path):
    10   with open(path) as f:
       -     return parse(f.read())
    11 +     data = f.read()
    12 +     return parse(data)

`+` marks an added line, a space a context line; only numbered lines can carry an inline comment. A
removed line sits in place, not in a list of its own after the hunk (pr-agent's `__old hunk__`, which
this once followed): on issue 30's real bugs the 1.5B model read that list as the new code and asked
for the fix to be taken out, and a hunk that only removed lines was folded to one line, so a removed
`return` or check could not be seen at all. A deleted file is named, not shown.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from bot.app.github.models import PullFile
from bot.beam.errors import BeamError

MAX_REMOVED_SHOWN = 40  # removed lines shown in one place, at most
_HUNK = re.compile(r"^@@ -(?P<old>\d+)(?:,\d+)? \+(?P<new>\d+)(?:,\d+)? @@ ?(?P<section>.*)$")


@dataclass
class Hunk:
    """One `@@` hunk: `new` holds (number, marker, text) for the new side, `old` the removed lines."""

    old_start: int
    new_start: int
    section: str
    new: list[tuple[int, str, str]] = field(default_factory=list)
    removed: list[tuple[int, str]] = field(default_factory=list)  # (the new-side line it followed, text)

    @property
    def old(self) -> list[str]:
        """The removed lines, in order."""
        return [text for _, text in self.removed]

    @property
    def removed_after(self) -> int:
        """The new-side line the first removed line followed (0: the top, or none removed)."""
        return self.removed[0][0] if self.removed else 0

    @property
    def added(self) -> list[int]:
        return [n for n, mark, _ in self.new if mark == "+"]


def parse_hunks(patch: str) -> list[Hunk]:
    """The hunks of one file's unified-diff patch (GitHub's `patch` field: no file header)."""
    hunks: list[Hunk] = []
    current = 0
    rows = patch.split("\n")
    if rows and rows[-1] == "":  # a patch ending in a newline: not an empty context line
        rows.pop()
    for raw in rows:
        match = _HUNK.match(raw)
        if match:
            current = int(match.group("new"))
            hunks.append(Hunk(int(match.group("old")), current, match.group("section").strip()))
            continue
        if not hunks or raw.startswith("\\"):  # "\ No newline at end of file"
            continue
        hunk = hunks[-1]
        if raw.startswith("-"):
            hunk.removed.append((current - 1, raw[1:]))
        elif raw.startswith("+"):
            hunk.new.append((current, "+", raw[1:]))
            current += 1
        else:  # a context line; some tools strip the space of an empty one
            hunk.new.append((current, " ", raw[1:]))
            current += 1
    return hunks


def added_lines(patch: str | None) -> set[int]:
    """New-side numbers of the lines a patch adds: where linter findings are kept."""
    return {n for hunk in parse_hunks(patch or "") for n in hunk.added}


def format_hunk(hunk: Hunk) -> list[str]:
    header = f"@@ -{hunk.old_start} +{hunk.new_start} @@" + (f" {hunk.section}" if hunk.section else "")
    width = len(str(hunk.new[-1][0])) if hunk.new else 1
    if not hunk.new:  # no line left around it (a file emptied): nothing takes a comment
        return [header, *removed_rows(hunk.old, width)]
    return [header, *numbered_rows(hunk.new, removed_by_line([hunk]), width)]


def removed_by_line(hunks: Iterable[Hunk]) -> dict[int, list[str]]:
    """The removed lines of some hunks, by the new-side line each followed (0: the top)."""
    out: dict[int, list[str]] = {}
    for hunk in hunks:
        for after, text in hunk.removed:
            out.setdefault(after, []).append(text)
    return out


def numbered_rows(
    rows: Sequence[tuple[int, str, str]], removed: Mapping[int, Sequence[str]], width: int
) -> list[str]:
    """Consecutive new-side rows (number, mark, text), each numbered, with the removed lines that
    followed the line before the first row, or any row, in their place."""
    if not rows:
        return []
    out = removed_rows(removed.get(rows[0][0] - 1, ()), width)
    for number, mark, text in rows:
        out.append(f"{number:>{width}} {mark}{text}")
        out += removed_rows(removed.get(number, ()), width)
    return out


def removed_rows(texts: Sequence[str], width: int) -> list[str]:
    """Removed lines as rows without a number; a long run shows its first `MAX_REMOVED_SHOWN` and
    says how many more (a deleted block costs tokens for little past its start)."""
    out = [f"{'':>{width}} -{text}" for text in texts[:MAX_REMOVED_SHOWN]]
    if len(texts) > MAX_REMOVED_SHOWN:
        out.append(f"{'':>{width}}  ... ({len(texts) - MAX_REMOVED_SHOWN} more lines removed)")
    return out


def file_heading(item: PullFile) -> str:
    moved = f", from {item.previous_filename}" if item.previous_filename else ""
    return f"## {item.filename} ({item.status}{moved}, +{item.additions} -{item.deletions})"


def format_file(item: PullFile) -> str:
    """One file's section of the prompt: its heading, then its numbered hunks."""
    lines = [file_heading(item)]
    if item.patch is None and item.status == "renamed" and not (item.additions or item.deletions):
        lines.append("(no line changed)")  # a pure rename: GitHub sends no patch
    elif item.patch is None:
        lines.append("(no patch: binary or too large; read the file if you need it)")
    elif not item.patch.strip():
        lines.append("(no line changed)")
    else:
        for hunk in parse_hunks(item.patch):
            lines += format_hunk(hunk)
    return "\n".join(lines)


HOW_TO_READ = (
    "Each file's hunks are numbered on the new side: each line of the new version follows its line "
    "number, `+` for an added line and a space for an unchanged one; a `-` line, without a number, "
    "is one the change removed, shown where it was. Cite the numbers shown (the `line` and "
    "`start_line` of a comment); a line without a number cannot take an inline comment."
)


_WORDS = re.compile(r"[^\w]+")


def normalised_claim(text: str) -> str:
    """Case, punctuation and whitespace do not make two calls' findings different."""
    return _WORDS.sub(" ", text.lower()).strip()


@dataclass
class DiffCut:
    """The files of a diff cut to a size by whole hunks (`cut_diff`), and what the cut left out."""

    files: list[PullFile]
    sent: int  # characters of the diff before the cut
    kept: int  # characters of the diff after it
    dropped: list[str] = field(default_factory=list)  # files with no hunk left
    shortened: list[str] = field(default_factory=list)  # files that lost some of their hunks
    unshown: list[str] = field(default_factory=list)  # files the overflowing call did not show either

    def named(self) -> str:
        """The cut in plain words, for the prompt and the review."""
        parts = []
        if self.shortened:
            parts.append("some hunks of " + ", ".join(self.shortened[:20]))
        if self.dropped:
            parts.append("all of " + ", ".join(self.dropped[:20]))
        if self.unshown:
            parts.append(f"{len(self.unshown)} file{'s' if len(self.unshown) != 1 else ''} it had not shown")
        left = "; ".join(parts) or "nothing"
        return (
            f"The model's context overflowed, so the diff was cut by whole hunks to {self.kept} of "
            f"{self.sent} characters; left out: {left}."
        )


def _hunk_blocks(patch: str) -> list[str]:
    """The patch split at its `@@` headers, each block a whole hunk with its header."""
    blocks: list[list[str]] = []
    for raw in patch.split("\n"):
        if _HUNK.match(raw) or not blocks:
            blocks.append([])
        blocks[-1].append(raw)
    return ["\n".join(block) for block in blocks]


def cut_diff(files: list[PullFile], sent: list[str], share: float = 0.5) -> DiffCut:
    """The files as one call can still take after the model's context overflowed: the diff of the
    files the overflowing call read (`sent`) cut to at most `share` of its size, by whole hunks, in
    the order the prompt showed them. Halving only the token budget per call did not shorten a diff
    already under half of it (issue 29), so the retry was the same size and overflowed again."""
    by_name = {f.filename: f for f in files}
    chosen = [by_name[name] for name in dict.fromkeys(sent) if name in by_name] or list(files)
    total = sum(len(format_file(f)) for f in chosen)
    room = int(total * share)
    out: list[PullFile] = []
    cut = DiffCut(out, total, 0)
    read = {f.filename for f in chosen}
    cut.unshown = [f.filename for f in files if f.filename not in read]
    for item in chosen:
        heading = len(file_heading(item)) + 1
        if item.patch is None or not item.patch.strip():
            if cut.kept + len(format_file(item)) <= room:
                out.append(item)
                cut.kept += len(format_file(item))
            else:
                cut.dropped.append(item.filename)
            continue
        kept: list[str] = []
        size = heading
        blocks = _hunk_blocks(item.patch)
        for block in blocks:
            hunks = parse_hunks(block)
            shown = sum(len(line) + 1 for hunk in hunks for line in format_hunk(hunk))
            if cut.kept + size + shown > room:
                break
            kept.append(block)
            size += shown
        if not kept:
            cut.dropped.append(item.filename)
            continue
        if len(kept) < len(blocks):
            cut.shortened.append(item.filename)
        out.append(item.model_copy(update={"patch": "\n".join(kept)}))
        cut.kept += size
    return cut


OVERFLOW_CODE = "BEM-092"  # the model's context overflowed


class CallPrompts(Protocol):
    """What a skill built for its calls (context/prompt.py `Coverage`, a review's `PassPrompts`)."""

    calls: list[str]  # the prompt of every call
    call_files: list[list[str]]  # the files each call reads


P = TypeVar("P", bound=CallPrompts)
T = TypeVar("T")


async def overflow_retry(
    files: list[PullFile],
    build: Callable[[list[PullFile], bool], Awaitable[P]],
    call: Callable[[P, DiffCut | None], Awaitable[T]],
    *,
    ran: Callable[[], bool],
    on_overflow: Callable[[DiffCut], object] | None = None,
    cut: DiffCut | None = None,
) -> T:
    """The calls of every skill (`SkillRun`, the review pass, `beam-bot run`), retried once when the
    model's context overflowed (BEM-092) before anything ran (`ran`): the diff of the files the first
    call showed is cut to half by whole hunks (`cut_diff`), built again as one call (`build(files,
    True)`), and the cut named at the head of every prompt and handed to `call`, which says it in its
    answer. A second overflow, or one after a tool ran, is the caller's to end with. `cut`: an
    earlier overflow in the same run (another vote of a review): straight to the cut diff."""
    if cut is None:
        first = await build(files, False)
        try:
            return await call(first, None)
        except BeamError as error:
            if error.code != OVERFLOW_CODE or ran():
                raise
        cut = cut_diff(files, first.call_files[0] if first.call_files else [f.filename for f in files])
        if on_overflow is not None:
            on_overflow(cut)
    retry = await build(cut.files, True)
    retry.calls = [f"{cut.named()}\n\n{text}" for text in retry.calls]
    return await call(retry, cut)
