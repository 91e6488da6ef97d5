"""When is a new finding one the ledger already has? Same file, a line that maps (through the diff
between the two heads) to within `NEAR` lines of the old anchor, and the same claim once normalised.

The usual case is the author editing the anchored line and the model repeating itself with the new
value ("`timeout=30` is too short" after "`timeout=10` is too short"), so the claim ignores case,
punctuation, numbers and quoted code, and an edited line maps to where its hunk now starts. The map
comes from git between the two heads in the run's tree: a diff of two trees, so it holds after a
force-push too (the old head need not be an ancestor, only still in the mirror's objects). When the
old head is gone, the anchor's code is looked for in the new file instead.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pygit2

NEAR = 5  # lines
_QUOTED = re.compile(r"`+[^`]*`+|\"[^\"\n]*\"|'[^'\n]*'")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_SUGGESTION = re.compile(r"(`{3,})suggestion\n.*?\n\1", re.DOTALL)
_MARKER = re.compile(r"<!--.*?-->", re.DOTALL)
_NOT_WORD = re.compile(r"[\W_]+")


def claim_key(text: str) -> str:
    """The claim with case, punctuation, numbers, quoted code and markup removed."""
    text = _MARKER.sub(" ", _SUGGESTION.sub(" ", text))
    text = _NUMBER.sub(" ", _QUOTED.sub(" ", text))
    return " ".join(_NOT_WORD.sub(" ", text.lower()).split())


@dataclass(frozen=True, slots=True)
class Hunk:
    old_start: int
    old_lines: int
    new_start: int
    new_lines: int


@dataclass
class FileMap:
    """How one file's old lines land in the new version (zero-context hunks, oldest first)."""

    new_path: str | None  # None: the file is gone
    hunks: list[Hunk] = field(default_factory=list)

    def map(self, line: int) -> tuple[int, bool]:
        """(the line's number in the new version, whether the line itself changed)."""
        shift = 0
        for hunk in self.hunks:
            last = hunk.old_start + hunk.old_lines - 1
            if hunk.old_lines and hunk.old_start <= line <= last:  # changed: where its hunk now is
                offset = min(line - hunk.old_start, max(hunk.new_lines - 1, 0))
                return max(hunk.new_start + offset, 1), True
            # A pure insertion (no old lines) comes after old line `old_start`.
            before = last < line if hunk.old_lines else hunk.old_start < line
            if not before:
                break
            shift += hunk.new_lines - hunk.old_lines
        return line + shift, False


class LineMaps:
    """The maps of the files that changed between two heads; files not listed did not change."""

    def __init__(self, files: dict[str, FileMap] | None) -> None:
        self.files = files  # None: the old head is not in the tree's objects

    @property
    def known(self) -> bool:
        return self.files is not None

    def map(self, path: str, line: int) -> tuple[str | None, int, bool]:
        """(new path or None when deleted, new line, whether the line changed)."""
        if self.files is None or path not in self.files:
            return path, line, False
        mapped = self.files[path]
        if mapped.new_path is None:
            return None, line, True
        new_line, changed = mapped.map(line)
        return mapped.new_path, new_line, changed


def line_maps(tree: Path, old: str, new: str) -> LineMaps:
    """The line maps from `old` to `new`, read with git in the run's tree (blocking: call in a thread)."""
    if old == new:
        return LineMaps({})
    repo = pygit2.Repository(str(tree))
    try:
        old_commit = repo[old].peel(pygit2.Commit)
        new_commit = repo[new].peel(pygit2.Commit)
    except (KeyError, ValueError, pygit2.GitError):
        return LineMaps(None)
    files: dict[str, FileMap] = {}
    try:
        diff = repo.diff(old_commit, new_commit, context_lines=0)
        diff.find_similar()
        for patch in diff:
            if patch is None:
                continue
            delta = patch.delta
            gone = delta.status_char() == "D"
            hunks = [Hunk(h.old_start, h.old_lines, h.new_start, h.new_lines) for h in patch.hunks]
            files[delta.old_file.path] = FileMap(None if gone else delta.new_file.path, hunks)
    except (KeyError, pygit2.GitError):  # a file's content is not here (a partial copy): no map
        return LineMaps(None)
    return LineMaps(files)


def find_line(lines: list[str], text: str, near: int) -> int | None:
    """The number of the line holding `text` closest to `near`, for an anchor whose head is gone."""
    wanted = text.strip()
    if not wanted:
        return None
    found = [n for n, line in enumerate(lines, start=1) if line.strip() == wanted]
    return min(found, key=lambda n: abs(n - near)) if found else None


@dataclass(frozen=True, slots=True)
class Anchor:
    """Where a finding of the ledger sits, and what it claims (the part `matches` compares)."""

    path: str
    line: int
    line_text: str
    claim: str
    head_sha: str


def same_finding(
    anchor: Anchor, path: str, line: int, claim: str, maps: LineMaps, lines: list[str] | None = None
) -> bool:
    """Whether a finding at `path:line` (new head) saying `claim` is the finding `anchor`."""
    if claim_key(claim) != claim_key(anchor.claim):
        return False
    new_path, new_line, _ = maps.map(anchor.path, anchor.line)
    if new_path != path:
        return False
    if not maps.known and lines is not None:
        new_line = find_line(lines, anchor.line_text, anchor.line) or anchor.line
    return abs(new_line - line) <= NEAR


def first_match(
    anchors: Iterable[tuple[Anchor, LineMaps]], path: str, line: int, claim: str, lines: list[str] | None
) -> Anchor | None:
    for anchor, maps in anchors:
        if same_finding(anchor, path, line, claim, maps, lines):
            return anchor
    return None
