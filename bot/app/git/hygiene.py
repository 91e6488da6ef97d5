"""Mirror hygiene: stale git locks, corrupt mirrors, and server paths kept out of messages.

A git killed mid-command (the worker died, a timeout) leaves `*.lock` files behind, and every later
git command on that mirror fails until they are gone. A lock is removed only when no live git process
works in the mirror (Linux `/proc`: a git-named process whose working directory or open files are in
it); elsewhere, only once it is older than `STALE_AFTER`. A mirror git cannot open, or whose fetch
reports corruption, is moved aside and rebuilt (it is only a cache).
"""

from __future__ import annotations

import os
import re
import shutil
import time
import uuid
from pathlib import Path

import pygit2

STALE_AFTER = 600.0  # seconds; only used where /proc cannot say who holds a lock
_PROC = Path("/proc")
_CORRUPT = re.compile(
    r"not a git repository|corrupt|bad object|missing object|did not send all necessary objects"
    r"|unable to read|index-pack failed|fatal: bad (?:tree|commit)|invalid object",
    re.IGNORECASE,
)
# Where git keeps lock files in a bare repository (objects/ holds none we would touch).
_LOCK_HOMES = ("", "refs", "logs")


def live_git_pids(path: Path) -> list[int] | None:
    """Pids of live git processes working in `path`; None when this system cannot tell (no /proc)."""
    if not (_PROC / "self").exists():
        return None
    root = os.path.realpath(path)
    found: list[int] = []
    for entry in _PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if not (entry / "comm").read_text().startswith("git"):
                continue
            places = [os.readlink(entry / "cwd")]
            fds = entry / "fd"
            places += [os.readlink(fd) for fd in fds.iterdir()]
        except OSError:  # gone meanwhile, or not ours to look at
            continue
        if any(p == root or p.startswith(root + os.sep) for p in places):
            found.append(int(entry.name))
    return found


def stale_locks(mirror: Path) -> list[Path]:
    locks: list[Path] = []
    for home in _LOCK_HOMES:
        base = mirror / home if home else mirror
        if not base.is_dir():
            continue
        if home:
            locks += [p for p in base.rglob("*.lock") if p.is_file()]
        else:
            locks += [p for p in base.glob("*.lock") if p.is_file()]
    return locks


def clear_stale_locks(mirror: Path, *, now: float | None = None) -> list[Path]:
    """Remove the mirror's lock files when no live git process can hold them; returns those removed."""
    locks = stale_locks(mirror)
    if not locks:
        return []
    pids = live_git_pids(mirror)
    if pids:
        return []
    if pids is None:  # cannot see processes: only locks far older than any git command
        moment = time.time() if now is None else now
        locks = [p for p in locks if moment - p.stat().st_mtime > STALE_AFTER]
    removed = []
    for lock in locks:
        try:
            lock.unlink()
            removed.append(lock)
        except FileNotFoundError:
            continue
    return removed


def opens(mirror: Path) -> bool:
    """Whether git can open the mirror at all."""
    try:
        pygit2.Repository(str(mirror))
    except (pygit2.GitError, KeyError):
        return False
    return True


def looks_corrupt(git_output: str) -> bool:
    return bool(_CORRUPT.search(git_output))


def discard_mirror(mirror: Path) -> None:
    """Move a broken mirror aside and delete it (a new one is made by the next fetch)."""
    if not mirror.exists():
        return
    aside = mirror.with_name(f"{mirror.name}.broken-{uuid.uuid4().hex[:8]}")
    os.rename(mirror, aside)
    shutil.rmtree(aside, ignore_errors=True)


_ABSOLUTE = re.compile(r"(?<![\w:/.~-])/(?:[^\s'\"`/]+/)*[^\s'\"`/]+")


def hide_paths(text: str) -> str:
    """Text without the server's absolute paths: inside a repository they become relative to its
    git directory (`refs/heads/x.lock`), anything else becomes `<path>`."""

    def relative(match: re.Match[str]) -> str:
        path = match.group(0)
        _, sep, tail = path.rpartition(".git/")
        if sep and tail:
            return tail
        return "<path>"

    return _ABSOLUTE.sub(relative, text)
