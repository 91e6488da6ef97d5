"""What an automatic review looks at, decided without I/O: whether a pull request is skipped, which
files count, whether the pull request's own diff changed, and which lines changed since a head.

The digest of the diff ignores hunk positions, so merging or rebasing the base (which moves hunks but
keeps the pull request's own changes) leaves it equal: no new review.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from bot.app.github.models import PullFile, PullRequest
from bot.app.repo_config import matches_any
from bot.app.repo_config.review_config import AutoReviewConfig

MAX_REVIEW_FILES = 300  # as many files as a `/beam review` reads; the rest are named in the summary
_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(?P<start>\d+)(?:,\d+)? @@")


def skip_reason(pull: PullRequest, config: AutoReviewConfig) -> str | None:
    """Why this pull request is not reviewed automatically now (None: it is)."""
    if pull.draft and not config.drafts:
        return "draft"
    author = pull.user.login.lower() if pull.user is not None else ""
    if author and author in {login.lower() for login in config.ignore_authors}:
        return f"author @{pull.user.login if pull.user else author} is ignored"
    ignored = {label.lower() for label in config.ignore_labels}
    hit = next((label.name for label in pull.labels if label.name.lower() in ignored), None)
    if hit is not None:
        return f"label `{hit}`"
    return None


def is_ignore_label(name: str | None, config: AutoReviewConfig) -> bool:
    return name is not None and name.lower() in {label.lower() for label in config.ignore_labels}


@dataclass(frozen=True)
class Scope:
    """The files an automatic review reads, and the ones it says it did not."""

    files: list[PullFile]
    ignored: list[str] = field(default_factory=list)  # ignore_paths: never read, never counted
    unread: list[str] = field(default_factory=list)  # binary, too large, or past MAX_REVIEW_FILES
    total: int = 0

    @property
    def changed_lines(self) -> int:
        return sum(f.additions + f.deletions for f in self.files)


def scope_of(files: Iterable[PullFile], total: int, config: AutoReviewConfig) -> Scope:
    kept: list[PullFile] = []
    ignored: list[str] = []
    unread: list[str] = []
    for entry in files:
        if matches_any(config.ignore_paths, entry.filename):
            ignored.append(entry.filename)
        elif entry.patch is None or len(kept) >= MAX_REVIEW_FILES:
            unread.append(entry.filename)
        else:
            kept.append(entry)
    return Scope(kept, ignored, unread, total)


def touches_paths(scope: Scope, config: AutoReviewConfig) -> bool:
    """`paths` empty means every path; else one file of the pull request must match."""
    if not config.paths:
        return True
    return any(matches_any(config.paths, f.filename) for f in [*scope.files]) or any(
        matches_any(config.paths, name) for name in scope.unread
    )


def diff_digest(files: Iterable[PullFile]) -> str:
    """The pull request's own changes, without hunk positions: equal after a base-only merge or rebase."""
    digest = hashlib.sha256()
    for entry in sorted(files, key=lambda f: f.filename):
        digest.update(f"{entry.filename}\0{entry.status}\0{entry.previous_filename or ''}\0".encode())
        for line in (entry.patch or "").splitlines():
            digest.update((line.split("@@", 2)[-1] if line.startswith("@@") else line).encode() + b"\n")
    return digest.hexdigest()


def added_lines(patch: str | None) -> set[int]:
    """New-side line numbers a patch adds."""
    lines: set[int] = set()
    current, in_hunk = 0, False
    for raw in (patch or "").splitlines():
        match = _HUNK.match(raw)
        if match:
            current, in_hunk = int(match.group("start")), True
        elif not in_hunk or raw.startswith(("\\", "-")):
            continue
        else:
            if raw.startswith("+"):
                lines.add(current)
            current += 1
    return lines


def changed_since(files: Iterable[PullFile]) -> dict[str, set[int]]:
    """Per path, the lines a comparison (last reviewed head...new head) added: where to comment."""
    return {f.filename: added_lines(f.patch) for f in files}
