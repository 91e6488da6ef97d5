"""Per-repository bare mirrors, updated with the git command line under a task lock and a file lock.

Each repository gets one bare mirror, `work_dir/mirrors/<owner>/<repo>.git`, updated with the git
command line (much faster than libgit2 for fetches, ARCHITECTURE.md section 9) and only for the refs a
run needs. Every change to a mirror runs in a thread holding the mirror's task lock and its file lock
(other processes); stale git locks are cleared, a broken or corrupt mirror is rebuilt once, and a 401
gets one fresh token.

The installation token reaches git only in one process's environment as an `http.extraHeader`
(`GIT_CONFIG_COUNT`/`GIT_CONFIG_KEY_0`): never argv, a URL, a config file or an error message.
"""

from __future__ import annotations

import logging
import os
import shutil
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import anyio
import anyio.to_thread
import pygit2

from bot.app.git.hygiene import clear_stale_locks, discard_mirror, looks_corrupt, opens
from bot.app.git.plumbing import (
    CheckoutError,
    auth_refused,
    check_url,
    explain,
    fetch_refspec,
    file_lock,
    origin_url,
    run_git,
    split_repo,
)

T = TypeVar("T")
log = logging.getLogger("beam.checkout")


class Mirrors:
    """The mirror cache of one worker machine (safe across tasks and processes). `Bundles` and
    `Checkouts` work on it through the methods below (`locked`, `with_fresh_token`, `create_mirror`)."""

    def __init__(
        self, work_dir: Path, runs_dir: Path | None = None, *, git: str = "git", timeout: float = 600.0
    ) -> None:
        self.work_dir = Path(work_dir)
        self.mirrors_dir = self.work_dir / "mirrors"
        self.runs_dir = Path(runs_dir) if runs_dir is not None else self.work_dir / "runs"
        self.git = git
        self.timeout = timeout
        self._locks: dict[str, anyio.Lock] = {}

    # -- paths ----------------------------------------------------------------------------------

    def mirror_path(self, repo_full_name: str) -> Path:
        owner, repo = split_repo(repo_full_name)
        return self.mirrors_dir / owner / f"{repo}.git"

    # -- mirror upkeep ----------------------------------------------------------------------------

    async def update_mirror(
        self,
        repo_full_name: str,
        clone_url: str,
        token: str,
        refs: list[str],
        *,
        refresh: Callable[[], Awaitable[str]] | None = None,
    ) -> None:
        """Create the mirror if needed and fetch exactly `refs` (`src:dst` refspecs) into it.

        A mirror git cannot open, or whose fetch reports corruption, is rebuilt once. When GitHub
        refuses the token (401/403) and `refresh` is given, one fresh token is fetched and tried.
        """
        mirror = self.mirror_path(repo_full_name)
        check_url(clone_url)
        specs = [fetch_refspec(spec) for spec in refs]
        if not specs:
            raise CheckoutError("No refs to fetch.")

        def work(token: str) -> None:
            for attempt in (1, 2):
                if mirror.exists() and not opens(mirror):
                    log.warning("the mirror of %s is broken; rebuilding it", repo_full_name)
                    discard_mirror(mirror)
                if not mirror.exists():
                    self.create_mirror(mirror)
                repo = pygit2.Repository(str(mirror))
                if origin_url(repo) != clone_url:
                    repo.config["remote.origin.url"] = clone_url
                args = ["fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--no-recurse-submodules"]
                result = run_git(
                    self.git, self.timeout, [*args, "--", clone_url, *specs], cwd=mirror, token=token
                )
                if result.returncode == 0:
                    return
                if attempt == 1 and looks_corrupt((result.stderr or "") + (result.stdout or "")):
                    log.warning("the mirror of %s is corrupt; rebuilding it", repo_full_name)
                    discard_mirror(mirror)
                    continue
                raise CheckoutError(
                    explain("fetch", repo_full_name, result, token), auth=auth_refused(result)
                )

        await self.with_fresh_token(repo_full_name, work, token, refresh)

    def create_mirror(self, mirror: Path) -> None:
        mirror.parent.mkdir(parents=True, exist_ok=True)
        staging = mirror.with_name(f"{mirror.name}.tmp-{uuid.uuid4().hex[:8]}")
        repo = pygit2.init_repository(str(staging), bare=True)
        shutil.rmtree(staging / "hooks", ignore_errors=True)
        # gc runs inside our lock rather than detached, and never while a run tree relies on it
        # (each run tree's base commit is pinned under refs/beam/runs/).
        repo.config["gc.autoDetach"] = False
        repo.config["core.logAllRefUpdates"] = False
        os.rename(staging, mirror)

    # -- plumbing ---------------------------------------------------------------------------------

    async def with_fresh_token(
        self,
        repo_full_name: str,
        work: Callable[[str], None],
        token: str,
        refresh: Callable[[], Awaitable[str]] | None,
    ) -> None:
        """Run `work(token)` under the mirror's locks; once more with a fresh token after a 401."""
        try:
            await self.locked(repo_full_name, lambda: work(token))
        except CheckoutError as error:
            if not error.auth or refresh is None:
                raise
            log.info("git on %s: GitHub refused the token; trying a fresh one", repo_full_name)
            fresh = await refresh()
            await self.locked(repo_full_name, lambda: work(fresh))

    async def locked(self, repo_full_name: str, fn: Callable[[], T]) -> T:
        """Run `fn` in a thread holding the mirror's task lock and its file lock (other processes)."""
        lock = self._locks.setdefault(repo_full_name, anyio.Lock())
        lock_file = self.mirror_path(repo_full_name).with_suffix(".lock")

        mirror = self.mirror_path(repo_full_name)

        def locked() -> T:
            with file_lock(lock_file):
                if mirror.exists():  # a git killed mid-command must not block every later one
                    removed = clear_stale_locks(mirror)
                    if removed:
                        log.warning(
                            "removed %d stale git lock(s) in the mirror of %s", len(removed), repo_full_name
                        )
                return fn()

        async with lock:
            return await anyio.to_thread.run_sync(locked)
