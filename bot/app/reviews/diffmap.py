"""Which lines of a pull request GitHub accepts inline review comments on.

GitHub rejects a whole review when one inline comment points outside the diff, so the bot decides
per comment before posting: lines in the diff go inline, the rest are folded into the review body.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(?P<start>\d+)(?:,\d+)? @@")


def commentable_lines(patch: str) -> set[int]:
    """Line numbers on the new side (RIGHT) that appear in a unified-diff patch: added or context."""
    lines: set[int] = set()
    current = 0
    in_hunk = False
    for raw in patch.splitlines():
        match = _HUNK.match(raw)
        if match:
            current = int(match.group("start"))
            in_hunk = True
            continue
        if not in_hunk or raw.startswith("\\"):
            continue
        if raw.startswith("-"):
            continue
        lines.add(current)
        current += 1
    return lines


@dataclass
class DiffMap:
    """Commentable lines per path, built from the pull request's files."""

    lines: dict[str, set[int]] = field(default_factory=dict)

    @classmethod
    def from_files(cls, files: Iterable[tuple[str, str | None]]) -> DiffMap:
        return cls({path: commentable_lines(patch or "") for path, patch in files})

    def accepts(self, path: str, line: int) -> bool:
        return line in self.lines.get(path, set())
