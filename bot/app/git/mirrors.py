"""Per-repository bare mirrors, updated with the git command line under a task lock and a file lock.

Each repository gets one bare mirror, `work_dir/mirrors/<owner>/<repo>.git`, updated with the git
command line (much faster than libgit2 for fetches, ARCHITECTURE.md section 9) and only for the refs a
run needs. A mirror is a partial clone (`--filter=blob:none`, issue 43): commits and trees come with
the refs, a file's content (its blob) only when a run reads it (`fetch_blobs`) or checks the commit
out (`hydrate`), so a review of a monorepo costs what the review reads, not the repository. A fetch
that would grow a mirror past `max_repo_bytes` is stopped, the mirror removed (BEM-358).

Every change to a mirror runs in a thread holding the mirror's task lock and its file lock
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
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TypeVar

import anyio
import anyio.to_thread
import pygit2

from bot.app.git.hygiene import clear_stale_locks, discard_mirror, looks_corrupt, opens
from bot.app.git.plumbing import (
    CheckoutError,
    TooBig,
    auth_refused,
    check_sha,
    check_url,
    explain,
    fetch_refspec,
    file_lock,
    origin_url,
    run_git,
    run_git_within,
    split_repo,
)

T = TypeVar("T")
ORIGIN = "origin"
PARTIAL_FILTER = "blob:none"
HYDRATE_BATCH = 20_000  # blob ids per fetch: one command line stays well under the OS's limit
DEFAULT_MAX_REPO_BYTES = 20 * 1024 * 1024 * 1024


def too_big(repo_full_name: str, limit: int) -> str:
    """BEM-358's words for a pull-request comment."""
    return (
        f"{repo_full_name} is larger than this server's disk budget ({limit // (1024 * 1024)} MiB of git "
        "history without file contents), so it was not fetched (BEM-358); the operator can raise "
        "BEAM_MAX_REPO_BYTES."
    )


log = logging.getLogger("beam.checkout")


class Mirrors:
    """The mirror cache of one worker machine (safe across tasks and processes). `Bundles` and
    `Checkouts` work on it through the methods below (`locked`, `with_fresh_token`, `create_mirror`)."""

    def __init__(
        self,
        work_dir: Path,
        runs_dir: Path | None = None,
        *,
        git: str = "git",
        timeout: float = 600.0,
        max_repo_bytes: int = DEFAULT_MAX_REPO_BYTES,
    ) -> None:
        self.max_repo_bytes = max_repo_bytes
        self.work_dir = Path(work_dir)
        self.mirrors_dir = self.work_dir / "mirrors"
        self.runs_dir = Path(runs_dir) if runs_dir is not None else self.work_dir / "runs"
        self.git = git
        self.timeout = timeout
        self._locks: dict[str, anyio.Lock] = {}
        # Where each mirror was last fetched from, and with which token, in this process's memory only
        # (never on disk): a checkout or a tool that needs a blob the partial mirror lacks fetches it
        # from there (`fetch_known`), right after the run's own `update_mirror`.
        self._sources: dict[str, tuple[str, str]] = {}

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
                args.append(f"--filter={PARTIAL_FILTER}")
                try:
                    result = run_git_within(
                        self.git,
                        self.timeout,
                        [*args, ORIGIN, *specs],
                        cwd=mirror,
                        token=token,
                        watch=mirror / "objects",
                        max_bytes=self.max_repo_bytes,
                    )
                except TooBig:
                    discard_mirror(mirror)  # nothing of it stays on the disk
                    raise CheckoutError(too_big(repo_full_name, self.max_repo_bytes)) from None
                if result.returncode == 0:
                    self._sources[repo_full_name] = (clone_url, token)
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
        # A partial clone of `origin` (its URL is set before each fetch): git fetches a missing blob
        # from it, and `git fetch --filter` keeps later fetches partial.
        repo.config["core.repositoryFormatVersion"] = 1
        repo.config[f"remote.{ORIGIN}.promisor"] = True
        repo.config[f"remote.{ORIGIN}.partialCloneFilter"] = PARTIAL_FILTER
        os.rename(staging, mirror)

    # -- blobs on demand --------------------------------------------------------------------------

    async def fetch_blobs(
        self,
        repo_full_name: str,
        clone_url: str,
        token: str,
        oids: Sequence[str],
        *,
        refresh: Callable[[], Awaitable[str]] | None = None,
    ) -> None:
        """Bring these blobs (hex ids) into the mirror in one fetch; ids it holds already are skipped."""
        mirror = self.mirror_path(repo_full_name)
        check_url(clone_url)
        for oid in oids:
            check_sha(oid)

        def work(token: str) -> None:
            repo = pygit2.Repository(str(mirror))
            wanted = [oid for oid in oids if oid not in repo.odb]
            if not wanted:
                return
            if origin_url(repo) != clone_url:
                repo.config[f"remote.{ORIGIN}.url"] = clone_url
            result = run_git(
                self.git,
                self.timeout,
                ["-c", "fetch.negotiationAlgorithm=noop", "fetch", "--quiet", "--no-tags",
                 "--no-write-fetch-head", "--no-recurse-submodules", f"--filter={PARTIAL_FILTER}", ORIGIN,
                 *wanted],
                cwd=mirror,
                token=token,
            )  # fmt: skip
            if result.returncode != 0:
                raise CheckoutError(
                    explain("fetch", repo_full_name, result, token), auth=auth_refused(result)
                )

        await self.with_fresh_token(repo_full_name, work, token, refresh)

    async def fetch_known(self, repo_full_name: str, oids: Sequence[str]) -> None:
        """`fetch_blobs` from where the mirror was last fetched in this process; without one, a clear
        error (the blobs cannot come from anywhere)."""
        source = self._sources.get(repo_full_name)
        if source is None:
            raise CheckoutError(f"The copy of {repo_full_name} lacks file contents; fetch it first.")
        await self.fetch_blobs(repo_full_name, source[0], source[1], oids)

    async def fetch_diff_blobs(self, repo_full_name: str, old: str, new: str) -> int:
        """Fetch the blobs that differ between two commits and that the mirror lacks: what a line
        map from a finding's old head to the new one reads (reviews/matching.py). Finding them reads
        only trees, which a partial mirror holds; returns how many were fetched."""
        mirror = self.mirror_path(repo_full_name)
        check_sha(old)
        check_sha(new)

        def missing() -> list[str]:
            repo = pygit2.Repository(str(mirror))
            try:
                diff = repo.diff(repo[old].peel(pygit2.Commit), repo[new].peel(pygit2.Commit))
            except (KeyError, ValueError, pygit2.GitError):
                return []
            wanted = {
                str(side.id)
                for delta in diff.deltas
                for side in (delta.old_file, delta.new_file)
                if str(side.id).strip("0")
            }
            return sorted(oid for oid in wanted if oid not in repo)

        wanted = await anyio.to_thread.run_sync(missing)
        for start in range(0, len(wanted), HYDRATE_BATCH):
            await self.fetch_known(repo_full_name, wanted[start : start + HYDRATE_BATCH])
        return len(wanted)

    async def hydrate(self, repo_full_name: str, sha: str) -> int:
        """Fetch every blob of `sha`'s tree the mirror lacks, before a whole checkout of it (a run
        that writes: `author`, `docs`, `update`, a check); returns how many it fetched."""
        mirror = self.mirror_path(repo_full_name)
        check_sha(sha)

        def missing() -> list[str]:
            # `--no-walk`: this commit's tree only, not the history's; `--missing=print` never fetches.
            result = run_git(
                self.git,
                self.timeout,
                ["rev-list", "--objects", "--no-walk", "--missing=print", sha, "--"],
                cwd=mirror,
                token=None,
                local=True,
            )
            if result.returncode != 0:
                raise CheckoutError(explain("fetch", repo_full_name, result, None))
            return [line[1:].split()[0] for line in result.stdout.splitlines() if line.startswith("?")]

        wanted = await self.locked(repo_full_name, missing)
        for start in range(0, len(wanted), HYDRATE_BATCH):
            await self.fetch_known(repo_full_name, wanted[start : start + HYDRATE_BATCH])
        return len(wanted)

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
