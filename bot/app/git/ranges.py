"""What a push would make new in the base repository: the commits of `known..tip`, with who wrote
them, what they say, and which paths each one changes.

A held push lands more than the bot's own commit when the run built on a fork's head: every commit
of the fork that the base repository does not have lands with it, and the base repository's
push-triggered CI runs them (the `pull_request_target` class of incident). So the approval comment
lists this range, `blocked_paths` is checked on every commit of it, and the push checks again, with
the branches as GitHub has them then, that nothing outside the list would land.

The range is what `git rev-list tip --not known...` says in the mirror (real git, as the merge base and
ancestry rules are git's); each commit is then read with pygit2. Blocking: run in a worker thread.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pygit2

from bot.app.git.plumbing import CheckoutError, check_sha, explain, run_git


@dataclass(frozen=True)
class LandingCommit:
    """One commit that would become new in the base repository."""

    sha: str
    author: str
    email: str
    subject: str
    paths: tuple[str, ...]  # what it changes: against its parent, or (a merge) against every parent

    def to_json(self) -> dict[str, Any]:
        """What the push row keeps of it (the paths are checked at hold time and not kept)."""
        return {"sha": self.sha, "author": self.author, "email": self.email, "subject": self.subject}


class TooManyCommits(CheckoutError):
    """More commits would land than `limit`."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"More than {limit} commits would land.")
        self.limit = limit


def landing_shas(git: str, timeout: float, mirror: Path, tip: str, known: list[str], limit: int) -> list[str]:
    """`git rev-list --topo-order --reverse tip --not known...`: oldest first; TooManyCommits past `limit`."""
    check_sha(tip)
    for sha in known:
        check_sha(sha)
    args = ["rev-list", "--topo-order", f"--max-count={limit + 1}", tip, "--not", *known, "--"]
    result = run_git(git, timeout, args, cwd=mirror, token=None, local=True)
    if result.returncode != 0:
        raise CheckoutError(explain("rev-list", tip[:12], result, None))
    shas = result.stdout.split()
    if len(shas) > limit:
        raise TooManyCommits(limit)
    return list(reversed(shas))


def _changed(old: pygit2.Tree | None, new: pygit2.Tree) -> set[str]:
    diff = new.diff_to_tree(swap=True) if old is None else old.diff_to_tree(new)
    paths: set[str] = set()
    for delta in diff.deltas:
        paths.add(delta.old_file.path)
        paths.add(delta.new_file.path)
    return paths


def describe(mirror: Path, shas: list[str]) -> list[LandingCommit]:
    """Author, subject and changed paths of each commit (read with pygit2, never parsed from text)."""
    repo = pygit2.Repository(str(mirror))
    out: list[LandingCommit] = []
    for sha in shas:
        commit = repo.get(sha)
        if not isinstance(commit, pygit2.Commit):
            raise CheckoutError(f"Commit {sha[:12]} is not in the mirror.")
        if not commit.parents:
            paths = _changed(None, commit.tree)
        else:
            # A merge: only what differs from every parent is the merge's own change (a clean merge of
            # the base branch brings the base's own versions, which are not new).
            sets = [_changed(parent.tree, commit.tree) for parent in commit.parents]
            paths = set.intersection(*sets)
        message = commit.message or ""
        subject = message.strip().split("\n", 1)[0].strip() if message.strip() else ""
        out.append(
            LandingCommit(
                sha=sha,
                author=commit.author.name,
                email=commit.author.email,
                subject=subject,
                paths=tuple(sorted(paths)),
            )
        )
    return out


def merge_base(mirror: Path, a: str, b: str) -> str | None:
    """The best common ancestor of two commits, or None (unrelated histories)."""
    repo = pygit2.Repository(str(mirror))
    found = repo.merge_base(a, b)
    return str(found) if found is not None else None


def resolve_refs(mirror: Path, refs: list[str]) -> list[str]:
    """The commits the given refs point at in the mirror; refs it does not have are left out."""
    repo = pygit2.Repository(str(mirror))
    out: list[str] = []
    for ref in refs:
        if ref in repo.references:
            out.append(str(repo.references[ref].peel(pygit2.Commit).id))
    return out
