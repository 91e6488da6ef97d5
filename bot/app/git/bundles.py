"""Held commits as git bundles: what a run's commit adds over the commits GitHub already has, packed to
be kept in the database with its push (issue 23), and unpacked into any worker's mirror.

A held push must not live on one disk: the worker that pushes after the approval may run on another
host, or the holding host's disk may be gone. So at hold time the pinned commit is bundled (`git
bundle`, whose prerequisites are the commits it builds on, all on GitHub), and a worker whose mirror
lacks the commit fetches those prerequisites, unbundles, and pins the commit again. git computes every
object's id from its bytes while it indexes the bundle's pack and refuses a bundle whose
prerequisites the mirror lacks; `unbundle` then checks that the commit is complete before pinning it.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import anyio.to_thread
import pygit2

from bot.app.git.mirrors import ORIGIN, PARTIAL_FILTER, Mirrors
from bot.app.git.plumbing import (
    CheckoutError,
    auth_refused,
    check_sha,
    check_url,
    explain,
    origin_url,
    run_git,
)

_HEADERS = (b"# v2 git bundle\n", b"# v3 git bundle\n")
_SHA = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")


class BundleTooLarge(CheckoutError):
    """The bundle of a held commit is bigger than the cap; `size` is its size in bytes."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"The held commit's bundle is {size} bytes, over the cap of {limit}.")
        self.size = size
        self.limit = limit


def bundle_header(data: bytes) -> tuple[list[str], dict[str, str]]:
    """The prerequisites (commits the bundle builds on) and the heads (ref -> sha) of a git bundle.

    Read in Python before git sees the bytes, so a caller can compare the heads with the commit it
    expects; raises CheckoutError for anything that is not a v2 or v3 bundle.
    """
    end = data.find(b"\n\n")
    if end < 0 or not data.startswith(_HEADERS):
        raise CheckoutError("The stored held commit is not a git bundle.")
    prerequisites: list[str] = []
    heads: dict[str, str] = {}
    for line in data[:end].decode("ascii", "replace").splitlines()[1:]:
        if line.startswith("@"):  # a v3 capability (object format, filter)
            continue
        sha, _, name = line.removeprefix("-").partition(" ")
        if not _SHA.fullmatch(sha):
            raise CheckoutError("The stored held commit's bundle has a malformed header.")
        if line.startswith("-"):
            prerequisites.append(sha)
        else:
            heads[name.strip()] = sha
    return prerequisites, heads


def commit_bases(source: Path, mirror: Path, tip: str) -> list[str]:
    """The commits `tip` (in the run tree at `source`) builds on that the mirror already has.

    Called before the commit is pinned into the mirror: the walk stops at the first commit on each
    line of history that the mirror holds, so the result is exactly what a bundle of the run's new
    commits needs (a merge made by `/beam update` has two). Blocking: pygit2.
    """
    src = pygit2.Repository(str(source))
    dst = pygit2.Repository(str(mirror))
    bases: set[str] = set()
    todo, seen = [pygit2.Oid(hex=tip)], set()
    while todo:
        oid = todo.pop()
        if oid in seen:
            continue
        seen.add(oid)
        if oid in dst:
            bases.add(str(oid))
            continue
        todo.extend(src[oid].peel(pygit2.Commit).parent_ids)
    return sorted(bases)


class Bundles:
    """Bundling a pinned commit out of a mirror and back into any mirror (`Checkouts` holds one)."""

    def __init__(self, mirrors: Mirrors) -> None:
        self.mirrors = mirrors

    async def commit_bases(self, repo_full_name: str, run_tree_path: Path, commit_sha: str) -> list[str]:
        """See `commit_bases`; run before `pin`, which copies the run's commits into the mirror."""
        check_sha(commit_sha)
        mirror = self.mirrors.mirror_path(repo_full_name)
        return await anyio.to_thread.run_sync(commit_bases, run_tree_path, mirror, commit_sha)

    async def bundle(self, repo_full_name: str, ref: str, bases: list[str], max_bytes: int) -> bytes:
        """A bundle of `ref` (a pinned commit) without what `bases` reach; BundleTooLarge over the cap."""
        for sha in bases:
            check_sha(sha)
        mirror = self.mirrors.mirror_path(repo_full_name)

        def work() -> bytes:
            with tempfile.TemporaryDirectory(prefix="beam-bundle-") as tmp:
                path = Path(tmp) / "held.bundle"
                args = ["bundle", "create", "--quiet", str(path), ref, *(f"^{sha}" for sha in bases)]
                result = run_git(
                    self.mirrors.git, self.mirrors.timeout, args, cwd=mirror, token=None, local=True
                )
                if result.returncode != 0:
                    raise CheckoutError(explain("bundle", ref, result, None))
                size = path.stat().st_size
                if size > max_bytes:
                    raise BundleTooLarge(size, max_bytes)
                return path.read_bytes()

        return await self.mirrors.locked(repo_full_name, work)

    async def holds(self, repo_full_name: str, ref: str, sha: str) -> bool:
        """Whether this host's mirror has `ref` at commit `sha` (the local pin, a cache)."""
        mirror = self.mirrors.mirror_path(repo_full_name)

        def look() -> bool:
            if not mirror.exists():
                return False
            repo = pygit2.Repository(str(mirror))
            return ref in repo.references and str(repo.references[ref].target) == sha

        return await anyio.to_thread.run_sync(look)

    async def missing_commits(self, repo_full_name: str, shas: list[str]) -> list[str]:
        """Those of `shas` that are not commits in this host's mirror (all of them without a mirror)."""
        mirror = self.mirrors.mirror_path(repo_full_name)

        def look() -> list[str]:
            if not mirror.exists():
                return list(shas)
            repo = pygit2.Repository(str(mirror))
            return [sha for sha in shas if not isinstance(repo.get(sha), pygit2.Commit)]

        return await anyio.to_thread.run_sync(look)

    async def fetch_commits(
        self,
        repo_full_name: str,
        clone_url: str,
        token: str,
        shas: list[str],
        *,
        refresh: Callable[[], Awaitable[str]] | None = None,
    ) -> None:
        """Create the mirror if there is none and fetch `shas` by id (GitHub serves any commit of the
        repository by its sha); a 401 gets one fresh token.

        Partial, as every fetch into a mirror is (`--filter=blob:none`): these are a held commit's
        prerequisites, and a push of it needs none of their blobs but those GitHub already has (the
        bundle carries every blob the commit adds). A push whose remote advertises no ref the mirror
        holds has git fetch what its pack walks through and the mirror lacks, from `origin`."""
        check_url(clone_url)
        for sha in shas:
            check_sha(sha)
        mirror = self.mirrors.mirror_path(repo_full_name)

        def work(token: str) -> None:
            if not mirror.exists():
                self.mirrors.create_mirror(mirror)
            repo = pygit2.Repository(str(mirror))
            if origin_url(repo) != clone_url:
                repo.config["remote.origin.url"] = clone_url
            if not shas:
                return
            args = ["fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--no-recurse-submodules"]
            args.append(f"--filter={PARTIAL_FILTER}")
            result = run_git(
                self.mirrors.git,
                self.mirrors.timeout,
                [*args, "--", ORIGIN, *shas],
                cwd=mirror,
                token=token,
            )
            if result.returncode != 0:
                what = f"commit {shas[0][:12]}"
                raise CheckoutError(explain("fetch", what, result, token), auth=auth_refused(result))

        await self.mirrors.with_fresh_token(repo_full_name, work, token, refresh)

    async def unbundle(self, repo_full_name: str, data: bytes, ref: str, sha: str) -> None:
        """Unpack a bundle into the mirror and pin commit `sha` (its head) under `ref`.

        The caller has checked the bundle's digest and that its head is `sha`; git refuses a bundle
        whose prerequisites the mirror lacks, and the commit must be complete (every tree and blob it
        reaches present) before the ref is written.
        """
        check_sha(sha)
        mirror = self.mirrors.mirror_path(repo_full_name)

        def work() -> None:
            with tempfile.TemporaryDirectory(prefix="beam-bundle-") as tmp:
                path = Path(tmp) / "held.bundle"
                path.write_bytes(data)
                result = run_git(
                    self.mirrors.git,
                    self.mirrors.timeout,
                    ["bundle", "unbundle", str(path)],
                    cwd=mirror,
                    token=None,
                    local=True,
                )
            if result.returncode != 0:
                raise CheckoutError(explain("bundle unbundle", ref, result, None))
            # What the bundle brought: its prerequisites' blobs may be absent (a partial mirror), and
            # are on GitHub, which a push needs them from.
            prerequisites, _ = bundle_header(data)
            walk = ["rev-list", "--objects", "--missing=error", "--quiet", sha, "--not", *prerequisites]
            walk.append("--all")
            complete = run_git(
                self.mirrors.git, self.mirrors.timeout, walk, cwd=mirror, token=None, local=True
            )
            if complete.returncode != 0:
                raise CheckoutError(f"The held commit {sha[:12]} is not complete after unpacking its bundle.")
            pygit2.Repository(str(mirror)).references.create(ref, sha, force=True)

        await self.mirrors.locked(repo_full_name, work)
