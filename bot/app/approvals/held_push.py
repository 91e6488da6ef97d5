"""Checking an author run's `git_push` before it is held: the target, the commit and its summary.

At the interrupt the run's tree still exists: the commit is checked (target, blocked paths, not
empty) and summarised for the approval comment; flow.py pins and records it, and resume.py pushes it
once after approval.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio
import pygit2

from bot.app import markdown as md
from bot.beam.errors import BeamError
from bot.beam.sandbox import WorkingTree, is_protected, push_branch_name
from bot.beam.sandbox_policy import AllowedPaths

MAX_PATCH_CHARS = 200_000


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def check_target(ref: Any, branch: str, protected: list[str]) -> BeamError | None:
    """None when `ref` names the run's own branch (or the current one); else the error to report."""
    if ref is None or ref == "" or ref == "HEAD":
        return None
    if not isinstance(ref, str):
        return BeamError("BEM-335", {"detail": repr(ref)[:80]})
    if is_protected(ref, protected):
        return BeamError("BEM-328", {"detail": ref[:120]})
    if ":" in ref or ref.startswith("+") or push_branch_name(ref) != branch:
        return BeamError("BEM-335", {"detail": ref[:120]})
    return None


@dataclass(frozen=True)
class CommitSummary:
    sha: str
    message: str
    diffstat: dict[str, Any]
    patch: str


def summarize_commit(path: str, base: str, commit: str) -> CommitSummary:
    """Files, line counts and the patch between the run's base and its commit (blocking: pygit2)."""
    repo = pygit2.Repository(path)
    new = repo.get(commit)
    old = repo.get(base)
    if not isinstance(new, pygit2.Commit) or not isinstance(old, pygit2.Commit):
        raise BeamError("BEM-323", {"detail": "commit not found in the run's tree"})
    diff = repo.diff(old.tree, new.tree)
    files = []
    texts: list[str] = []
    size = 0
    for patch in diff:
        _, additions, deletions = patch.line_stats
        files.append({"path": patch.delta.new_file.path, "additions": additions, "deletions": deletions})
        text = patch.text or ""
        if size + len(text) <= MAX_PATCH_CHARS and len(texts) == len(files) - 1:
            texts.append(text)  # whole files only, in order: the comment names each one it leaves out
            size += len(text)
    stats = {
        "files": files,
        "additions": sum(f["additions"] for f in files),
        "deletions": sum(f["deletions"] for f in files),
    }
    return CommitSummary(commit, new.message, stats, "".join(texts))


def check_paths(summary: CommitSummary, blocked: Callable[[str], bool], allowed: AllowedPaths) -> None:
    """Every changed file may be changed: not blocked (BEM-334), and allowed when the run has an
    allow-list (BEM-338). The working tree already refused such writes; this checks the commit."""
    for changed in summary.diffstat["files"]:
        if blocked(changed["path"]):
            raise BeamError("BEM-334", {"detail": md.visible(changed["path"])})
        if not allowed.permits(changed["path"]):
            raise BeamError("BEM-338", {"detail": md.visible(changed["path"])})


async def head_commit(tree: WorkingTree) -> str | None:
    return await anyio.to_thread.run_sync(tree.head_oid)
