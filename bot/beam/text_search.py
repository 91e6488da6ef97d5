"""`search_files`: the `search` tool's matching, written once for every view of a tree.

A checkout on disk (`WorkingTree`) and a commit read from the object store (`CommitTree`) walk their
files differently, but what counts as a match, which files are skipped (large, binary) and where the
search stops (50 matches, 20,000 files) must not differ between them: a review reads the objects,
an author run its checkout, and the model is told the same thing either way.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

MAX_SEARCH_MATCHES = 50
MAX_SEARCH_FILES = 20_000
MAX_SEARCH_FILE_BYTES = 512 * 1024
MAX_LINE_CHARS = 500

# One file of a search, in walk order: its root-relative path and a loader that returns its bytes,
# or None when it is not searched (over MAX_SEARCH_FILE_BYTES, unreadable).
SearchFile = tuple[str, Callable[[], bytes | None]]


def search_files(files: Iterable[SearchFile], needle: str) -> dict[str, Any]:
    """Case-insensitive matches of `needle` (already lowered) line by line, capped; binary files
    (a NUL in the first 8 KiB) are skipped."""
    matches: list[dict[str, Any]] = []
    scanned = 0
    truncated = False
    for rel, load in files:
        scanned += 1
        if scanned > MAX_SEARCH_FILES or len(matches) >= MAX_SEARCH_MATCHES:
            truncated = True
            break
        data = load()
        if data is None or b"\0" in data[:8192]:
            continue
        for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), start=1):
            if needle in line.lower():
                matches.append({"path": rel, "line": number, "text": line[:MAX_LINE_CHARS]})
                if len(matches) >= MAX_SEARCH_MATCHES:
                    break
    return {"matches": matches, "truncated": truncated}
