"""Per-run working trees over the mirror cache (`mirrors.py`), pinned commits and pushes; credentials
only in memory.

Each run gets its own repository under `runs_dir/<owner>/<repo>/<run_id>` whose
`objects/info/alternates` borrows the mirror's objects, so a checkout costs only the files it writes and
the run's commits land in its own object store. `runs_dir` should sit on a fast filesystem when there
is one (e.g. `/dev/shm`): creating files dominates a big checkout.

The installation token reaches git only in one process's environment as an `http.extraHeader`
(`GIT_CONFIG_COUNT`/`GIT_CONFIG_KEY_0`): never argv, a URL, a config file or an error message.
"""

from __future__ import annotations

import functools
import re
import shutil
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import anyio
import anyio.to_thread
import pygit2

from bot.app.git.bundles import Bundles
from bot.app.git.mirrors import DEFAULT_MAX_REPO_BYTES, Mirrors
from bot.app.git.plumbing import RUNS_PREFIX as RUNS_PREFIX
from bot.app.git.plumbing import (
    CheckoutError,
    auth_refused,
    check_branch,
    check_sha,
    check_url,
    children,
    copy_missing,
    delete_ref,
    explain,
    hold_commit,
    make_run_dir,
    mirror_dirs,
    remote_ref,
    remove_dir,
    rmdir_if_empty,
    run_git,
    split_repo,
)
from bot.app.git.ranges import LandingCommit, describe, landing_shas, merge_base, resolve_refs

__all__ = ["PENDING_PREFIX", "RUNS_PREFIX", "CheckoutError", "Checkouts", "RunTree"]


PENDING_PREFIX = "refs/beam/pending/"
_RUN_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}")


@dataclass(eq=False)
class RunTree:
    """One run's working tree: its own repository, borrowing the mirror's objects."""

    path: Path
    repo_full_name: str
    branch: str
    base_commit: str
    run_id: str
    _owner: Checkouts = field(repr=False)

    async def remove(self) -> None:
        """Delete the tree and release the mirror ref that kept its objects alive; safe to repeat."""
        await self._owner.remove_run_tree(self)


def _descends(repo: pygit2.Repository, sha: str, ancestor: str) -> bool:
    try:
        return bool(repo.descendant_of(sha, ancestor))
    except (KeyError, ValueError, pygit2.GitError):  # the ancestor is not even in the mirror
        return False


def moved(branch: str, expected: str) -> str:
    return (
        f"`{branch}` moved since the run started from {expected[:12]}: someone pushed to it, so "
        "the commit no longer builds on its tip. Nothing was pushed; ask again to build on the new tip."
    )


class Checkouts:
    """Run trees, pinned commits and pushes over the mirror cache (safe across tasks and processes).
    It holds its collaborators: `mirrors` (the cache, mirrors.py) and `bundles` (a pinned commit
    carried to another host's mirror through the database, bundles.py); their calls a caller needs are
    passed on below, so a caller holds one object for the checkouts of a machine."""

    def __init__(
        self,
        work_dir: Path,
        runs_dir: Path | None = None,
        *,
        git: str = "git",
        timeout: float = 600.0,
        mirrors: Mirrors | None = None,
        max_repo_bytes: int = DEFAULT_MAX_REPO_BYTES,
    ) -> None:
        self.mirrors = mirrors or Mirrors(
            work_dir, runs_dir, git=git, timeout=timeout, max_repo_bytes=max_repo_bytes
        )
        self.bundles = Bundles(self.mirrors)
        self.work_dir = self.mirrors.work_dir
        self.mirrors_dir = self.mirrors.mirrors_dir
        self.runs_dir = self.mirrors.runs_dir

    # -- the mirror cache and bundles (mirrors.py, bundles.py) ------------------------------------

    def mirror_path(self, repo_full_name: str) -> Path:
        return self.mirrors.mirror_path(repo_full_name)

    async def update_mirror(
        self,
        repo_full_name: str,
        clone_url: str,
        token: str,
        refs: list[str],
        *,
        refresh: Callable[[], Awaitable[str]] | None = None,
    ) -> None:
        await self.mirrors.update_mirror(repo_full_name, clone_url, token, refs, refresh=refresh)

    async def commit_bases(self, repo_full_name: str, run_tree_path: Path, commit_sha: str) -> list[str]:
        return await self.bundles.commit_bases(repo_full_name, run_tree_path, commit_sha)

    async def bundle(self, repo_full_name: str, ref: str, bases: list[str], max_bytes: int) -> bytes:
        return await self.bundles.bundle(repo_full_name, ref, bases, max_bytes)

    async def holds(self, repo_full_name: str, ref: str, sha: str) -> bool:
        return await self.bundles.holds(repo_full_name, ref, sha)

    async def missing_commits(self, repo_full_name: str, shas: list[str]) -> list[str]:
        return await self.bundles.missing_commits(repo_full_name, shas)

    async def unbundle(self, repo_full_name: str, data: bytes, ref: str, sha: str) -> None:
        await self.bundles.unbundle(repo_full_name, data, ref, sha)

    async def fetch_commits(
        self,
        repo_full_name: str,
        clone_url: str,
        token: str,
        shas: list[str],
        *,
        refresh: Callable[[], Awaitable[str]] | None = None,
    ) -> None:
        await self.bundles.fetch_commits(repo_full_name, clone_url, token, shas, refresh=refresh)

    # -- paths ----------------------------------------------------------------------------------

    def run_path(self, repo_full_name: str, run_id: str) -> Path:
        owner, repo = split_repo(repo_full_name)
        if not _RUN_ID.fullmatch(run_id):
            raise CheckoutError(f"Invalid run id {run_id!r}.")
        return self.runs_dir / owner / repo / run_id

    # -- run trees --------------------------------------------------------------------------------

    async def create_run_tree(
        self, repo_full_name: str, run_id: str, commit_sha: str, branch: str, *, checkout: bool = True
    ) -> RunTree:
        """A fresh working tree at `commit_sha` on the new local branch `branch`, origin set.

        `checkout=False`: a run that only reads (a review, `summarize`, `ask`, `commit-notes`) gets the
        repository and its branch but no file written: its tools read the commit's objects
        (bot/beam/commit_tree.py), and the few files a linter needs are written by the caller."""
        path = self.run_path(repo_full_name, run_id)
        mirror = self.mirror_path(repo_full_name)
        check_sha(commit_sha)
        check_branch(branch)
        if not mirror.exists():
            raise CheckoutError(f"There is no mirror of {repo_full_name} yet; fetch it first.")
        try:
            await anyio.to_thread.run_sync(make_run_dir, path)
        except FileExistsError:
            raise CheckoutError(f"Run {run_id} already has a working tree.") from None
        tree = RunTree(path, repo_full_name, branch, commit_sha, run_id, self)
        try:
            origin = await self.mirrors.locked(
                repo_full_name, lambda: hold_commit(mirror, run_id, commit_sha)
            )
            if checkout:  # a whole checkout: every blob of the commit first (the mirror is partial)
                await self.mirrors.hydrate(repo_full_name, commit_sha)
            fill = functools.partial(self._fill_run_tree, path, mirror, commit_sha, branch, origin, checkout)
            await anyio.to_thread.run_sync(fill)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await tree.remove()
            raise
        return tree

    def _fill_run_tree(
        self, path: Path, mirror: Path, sha: str, branch: str, origin: str | None, checkout: bool
    ) -> None:
        repo = pygit2.init_repository(str(path))
        shutil.rmtree(path / ".git" / "hooks", ignore_errors=True)
        info = path / ".git" / "objects" / "info"
        info.mkdir(parents=True, exist_ok=True)
        (info / "alternates").write_text(f"{(mirror / 'objects').resolve()}\n")
        if origin is not None:
            repo.config["remote.origin.url"] = origin
            repo.config["remote.origin.fetch"] = "+refs/heads/*:refs/remotes/origin/*"
        if not checkout:  # the branch at the commit, and nothing written
            repo.references.create(f"refs/heads/{branch}", pygit2.Oid(hex=sha))
            repo.set_head(f"refs/heads/{branch}")
            return
        # git's checkout writes files faster than libgit2's checkout_tree (section 9).
        result = run_git(
            self.mirrors.git,
            self.mirrors.timeout,
            ["checkout", "--quiet", "-b", branch, sha, "--"],
            cwd=path,
            token=None,
            local=True,
        )
        if result.returncode != 0:
            raise CheckoutError(explain("checkout", branch, result, None))

    async def discard_leftover(self, repo_full_name: str, run_id: str) -> bool:
        """Remove what an earlier attempt of this run left behind (a crash mid-run); True if any."""
        path = self.run_path(repo_full_name, run_id)
        if not path.exists():
            return False
        await self.remove_run_tree(RunTree(path, repo_full_name, "", "", run_id, self))
        return True

    async def remove_run_tree(self, tree: RunTree) -> None:
        await anyio.to_thread.run_sync(remove_dir, tree.path)
        mirror = self.mirror_path(tree.repo_full_name)
        if mirror.exists():
            await self.mirrors.locked(
                tree.repo_full_name, lambda: delete_ref(mirror, RUNS_PREFIX + tree.run_id)
            )

    # -- held pushes ------------------------------------------------------------------------------

    async def pin(self, repo_full_name: str, run_tree: RunTree, commit_sha: str, ref_name: str) -> str:
        """Copy `commit_sha` and its new objects from the run tree into the mirror under a pending ref.

        `ref_name` is a pending-push id or a full `refs/beam/pending/<id>` name; returns the full name.
        Objects are copied in-process (no git command runs in the run tree, whose files the model wrote).
        """
        check_sha(commit_sha)
        full = ref_name if ref_name.startswith("refs/") else PENDING_PREFIX + ref_name
        if not full.startswith(PENDING_PREFIX) or not _RUN_ID.fullmatch(full[len(PENDING_PREFIX) :]):
            raise CheckoutError(f"Invalid pending ref {ref_name!r}.")
        if run_tree.repo_full_name != repo_full_name:
            raise CheckoutError(f"The run tree belongs to {run_tree.repo_full_name}, not {repo_full_name}.")
        mirror = self.mirror_path(repo_full_name)

        def work() -> None:
            source = pygit2.Repository(str(run_tree.path))
            obj = source.get(commit_sha)
            if not isinstance(obj, pygit2.Commit):
                raise CheckoutError(f"Commit {commit_sha[:12]} is not in the run's working tree.")
            target = pygit2.Repository(str(mirror))
            copy_missing(source, target, obj.id)
            if full in target.references:
                if str(target.references[full].target) != commit_sha:
                    raise CheckoutError(f"{full} already holds another commit.")
                return
            target.references.create(full, commit_sha)

        await self.mirrors.locked(repo_full_name, work)
        return full

    async def push_from_mirror(
        self,
        repo_full_name: str,
        clone_url: str,
        token: str,
        source_ref: str,
        target_branch: str,
        *,
        expected_sha: str | None = None,
        expected_remote: str | None = None,
        refresh: Callable[[], Awaitable[str]] | None = None,
    ) -> None:
        """Push the commit at `source_ref` in the mirror to `refs/heads/<target_branch>`, never forced.

        With `expected_sha`, refuse unless the ref still holds that commit (the one that was shown).
        With `expected_remote` (a follow-up on an existing branch), the commit must descend from it and
        the push goes through only while the remote branch is still there (git's lease): fast-forward
        only, and nothing moves if someone pushed to the branch in between.
        When GitHub refuses the token and `refresh` is given, one fresh token is fetched and tried.
        """
        check_url(clone_url)
        check_branch(target_branch)
        if not target_branch.startswith("beam/"):
            raise CheckoutError(f"The bot pushes only to its own beam/... branches, not {target_branch!r}.")
        mirror = self.mirror_path(repo_full_name)

        def work(token: str) -> None:
            repo = pygit2.Repository(str(mirror))
            try:
                sha = str(repo.revparse_single(source_ref).peel(pygit2.Commit).id)
            except (KeyError, ValueError, pygit2.GitError):
                raise CheckoutError(f"{source_ref} is not in the mirror of {repo_full_name}.") from None
            if expected_sha is not None and sha != expected_sha:
                raise CheckoutError(f"{source_ref} holds {sha[:12]}, not the approved {expected_sha[:12]}.")
            options = ["--quiet", "--no-verify"]
            if expected_remote is not None:
                check_sha(expected_remote)
                if sha != expected_remote and not _descends(repo, sha, expected_remote):
                    raise CheckoutError(f"{sha[:12]} does not build on {expected_remote[:12]}.")
                ref = f"refs/heads/{target_branch}"
                remote = remote_ref(self.mirrors.git, self.mirrors.timeout, mirror, clone_url, token, ref)
                if remote == sha:
                    return  # an earlier attempt of this push landed
                if remote != expected_remote:
                    raise CheckoutError(moved(target_branch, expected_remote))
                options.append(f"--force-with-lease=refs/heads/{target_branch}:{expected_remote}")
            spec = f"{sha}:refs/heads/{target_branch}"
            result = run_git(
                self.mirrors.git,
                self.mirrors.timeout,
                ["push", *options, "--", clone_url, spec],
                cwd=mirror,
                token=token,
            )
            if result.returncode != 0:
                if expected_remote is not None and "stale info" in (result.stderr or "").lower():
                    raise CheckoutError(moved(target_branch, expected_remote))
                what = f"{sha[:12]} to {target_branch}"
                raise CheckoutError(explain("push", what, result, token), auth=auth_refused(result))

        if not mirror.exists():
            raise CheckoutError(f"There is no mirror of {repo_full_name}.")
        await self.mirrors.with_fresh_token(repo_full_name, work, token, refresh)

    async def remote_tip(self, repo_full_name: str, clone_url: str, token: str, branch: str) -> str | None:
        """The commit `refs/heads/<branch>` holds on the remote now, or None (how a retried push
        finds out whether an earlier attempt's push landed)."""
        check_url(clone_url)
        check_branch(branch)
        mirror = self.mirror_path(repo_full_name)
        return await anyio.to_thread.run_sync(
            lambda: remote_ref(
                self.mirrors.git, self.mirrors.timeout, mirror, clone_url, token, f"refs/heads/{branch}"
            )
        )

    async def drop_pin(self, repo_full_name: str, ref_name: str) -> None:
        """Forget a pending ref once its push is done, rejected or expired."""
        full = ref_name if ref_name.startswith("refs/") else PENDING_PREFIX + ref_name
        if not full.startswith(PENDING_PREFIX):
            raise CheckoutError(f"Invalid pending ref {ref_name!r}.")
        mirror = self.mirror_path(repo_full_name)
        if mirror.exists():
            await self.mirrors.locked(repo_full_name, lambda: delete_ref(mirror, full))

    # -- what a push would land (ranges.py) --------------------------------------------------------

    async def landing_commits(
        self, repo_full_name: str, tip: str, known: list[str], limit: int
    ) -> list[LandingCommit]:
        """The commits `tip` would make new where `known` are what the base repository has, oldest
        first; TooManyCommits past `limit`. `tip` must be in the mirror (pinned)."""
        mirror = self.mirror_path(repo_full_name)

        def work() -> list[LandingCommit]:
            return describe(
                mirror, landing_shas(self.mirrors.git, self.mirrors.timeout, mirror, tip, known, limit)
            )

        return await self.mirrors.locked(repo_full_name, work)

    async def branch_tips(self, repo_full_name: str, branches: list[str]) -> list[str]:
        """Where the mirror's `refs/heads/<branch>` point (as last fetched); missing ones left out."""
        for branch in branches:
            check_branch(branch)
        mirror = self.mirror_path(repo_full_name)
        refs = [f"refs/heads/{branch}" for branch in dict.fromkeys(branches)]
        return await self.mirrors.locked(repo_full_name, lambda: resolve_refs(mirror, refs))

    async def merge_base(self, repo_full_name: str, a: str, b: str) -> str | None:
        check_sha(a)
        check_sha(b)
        mirror = self.mirror_path(repo_full_name)
        return await anyio.to_thread.run_sync(merge_base, mirror, a, b)

    # -- crash recovery ---------------------------------------------------------------------------

    async def cleanup_stale(self, max_age: timedelta | float) -> list[Path]:
        """Remove run trees (and half-made mirrors) older than `max_age`, left behind by a crash.

        Pick `max_age` above the longest run: a tree's age is its directory's modification time.
        Also releases `refs/beam/runs/` refs whose tree is gone. Returns the removed paths.
        """
        seconds = max_age.total_seconds() if isinstance(max_age, timedelta) else float(max_age)
        removed = await anyio.to_thread.run_sync(self._sweep, time.time() - seconds)
        for mirror_dir in await anyio.to_thread.run_sync(mirror_dirs, self.mirrors_dir):
            name = f"{mirror_dir.parent.name}/{mirror_dir.name.removesuffix('.git')}"
            await self.mirrors.locked(name, functools.partial(self._release_orphans, mirror_dir, name))
        return removed

    def _sweep(self, cutoff: float) -> list[Path]:
        removed: list[Path] = []
        for path in [*children(self.runs_dir, 3), *children(self.mirrors_dir, 2)]:
            is_run = path.is_relative_to(self.runs_dir)
            if (is_run or ".git.tmp-" in path.name) and path.lstat().st_mtime < cutoff:
                remove_dir(path)
                removed.append(path)
        for owner in children(self.runs_dir, 1):
            for repo in children(owner, 1):
                rmdir_if_empty(repo)
            rmdir_if_empty(owner)
        return removed

    def _release_orphans(self, mirror: Path, name: str) -> None:
        repo = pygit2.Repository(str(mirror))
        for ref in [r for r in repo.references if r.startswith(RUNS_PREFIX)]:
            if not self.run_path(name, ref[len(RUNS_PREFIX) :]).exists():
                repo.references.delete(ref)
