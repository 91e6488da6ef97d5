"""`CommitTree`: one commit's files read straight from a repository's objects, under the jail's rules.

A review reads; it never needs the whole tree written to disk. Writing 100,000 files for a change
of three cost seconds and the repository's size in disk per run, where `git diff` of the change
takes milliseconds. So a review's tools (`read_file`, `list_tree`, `get_page`, `search`) read the
head commit's blobs and trees here, and the rules a `SandboxRoot` enforces on a directory hold the
same way, with the same codes (ARCHITECTURE.md 4.5):

- the spelling of a path is checked by the jail's own `lexical_names` (absolute, NUL, `..`, `.git`);
- a symlink is followed inside the tree, as the kernel would in a checkout, one name at a time, so a
  `..` in its target climbs from where the link really is; a target that climbs out of the tree, or
  is absolute (it would name a host path), is BEM-302; more than 40 links is a loop (BEM-312);
- a `.git` reached through a link is BEM-337; listings never follow links and skip `.git`;
- reads and listings have the same caps and errors (BEM-307, BEM-306, BEM-319).

In a partial clone (`--filter=blob:none`) a blob may be absent: `fetch` is called with the ids to
bring, and may refuse (the host's cap on bytes one run fetches, BEM-357). libgit2 cannot fetch a
missing object by itself, so the host does it with git.

Every method is blocking: async callers run them in a worker thread.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pygit2

from bot.beam.errors import BeamError
from bot.beam.jail import (
    DEFAULT_MAX_FILE_BYTES,
    DEFAULT_MAX_LIST_ENTRIES,
    GIT_MESSAGE,
    SandboxRoot,
    decode_text,
    lexical_names,
    too_large,
    too_many_files,
)
from bot.beam.sandbox_policy import is_git_name
from bot.beam.text_search import MAX_SEARCH_FILE_BYTES, MAX_SEARCH_FILES, SearchFile, search_files
from bot.beam.worktree import log_summaries

# Brings missing blobs (hex ids) into the repository's object store, or raises a BeamError.
FetchBlobs = Callable[[Sequence[str]], None]

MAX_LINK_HOPS = 40  # the kernel's own limit (ELOOP)
SEARCH_FETCH_BATCH = 500  # blobs per fetch when a search reads a partial clone
_TREE = 0o040000
_BLOB = 0o100644
_EXECUTABLE = 0o100755
_LINK = 0o120000
_GITLINK = 0o160000


@dataclass(frozen=True)
class _Found:
    """Where a path led: a blob, a tree (a submodule is an empty one), or nothing."""

    kind: str  # "blob", "tree", "missing"
    oid: pygit2.Oid | None
    names: tuple[str, ...]


class CommitTree:
    """A read-only view of `commit` (kept as `sha`) in the repository at `repository`, a bare mirror
    included. It offers every method of `tree_view.ToolTree`; the writes are refused (BEM-342)."""

    def __init__(
        self,
        repository: str | os.PathLike[str],
        commit: str,
        *,
        fetch: FetchBlobs | None = None,
        scratch: SandboxRoot | None = None,
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
        max_list_entries: int = DEFAULT_MAX_LIST_ENTRIES,
    ) -> None:
        self.repository = os.fspath(repository)
        self.sha = commit
        self.fetch = fetch
        self.max_file_bytes = max_file_bytes
        self.max_list_entries = max_list_entries
        self._scratch = scratch
        self.refused: list[str] = []  # paths a fetch refused (the host's cap, BEM-357), for the review

    @property
    def sandbox(self) -> SandboxRoot:
        """The scratch directory holding the files `materialise` wrote: what a linter, a parser or the
        review's suggestion check reads on disk. The tools never read it; they read the objects."""
        if self._scratch is None:
            raise BeamError("BEM-307", "this view of the commit has no files on disk")
        return self._scratch

    def materialise(self, paths: Sequence[str]) -> list[str]:
        """Write these files of the commit into the scratch directory, and no other: regular files
        only (a link is not written, so nothing on disk leads out), each under the read cap and
        through the jail's rules. Returns the paths written; the rest are left out silently, as a
        linter skips a file it cannot read."""
        written: list[str] = []
        with self._open() as repo:
            entries: list[tuple[str, pygit2.Oid]] = []
            for rel in dict.fromkeys(paths):
                try:
                    oid = self._entry(repo, rel)
                except BeamError:
                    continue
                if oid is not None:
                    entries.append((rel, oid))
            missing = [str(oid) for _, oid in entries if oid not in repo.odb]
            if missing and self.fetch is not None:
                with contextlib.suppress(BeamError):  # one fetch for all; a refusal is met per file below
                    self.fetch(missing)
            for rel, oid in entries:
                try:
                    blob = self._blob(repo, oid, rel)
                    if blob.size > self.max_file_bytes:
                        continue
                    target = self.sandbox.resolve_str(rel)
                except BeamError:
                    continue
                _write_new(target, blob.data)
                written.append(rel)
        return written

    def _entry(self, repo: pygit2.Repository, rel: str) -> pygit2.Oid | None:
        """The blob id of a regular file at exactly `rel` (no link followed on the way), or None."""
        tree = self._root(repo)
        names = lexical_names(rel)
        for index, name in enumerate(names):
            if name not in tree:
                return None
            entry = tree[name]
            last = index == len(names) - 1
            if last:
                return entry.id if entry.filemode in (_BLOB, _EXECUTABLE) else None
            if entry.filemode != _TREE:
                return None
            sub = repo[entry.id]
            assert isinstance(sub, pygit2.Tree)
            tree = sub
        return None

    @contextmanager
    def _open(self) -> Iterator[pygit2.Repository]:
        try:
            repo = pygit2.Repository(self.repository)
        except (pygit2.GitError, KeyError, ValueError, OSError) as exc:
            raise BeamError("BEM-321", str(exc) or type(exc).__name__) from None
        try:
            yield repo
        finally:
            repo.free()

    def _root(self, repo: pygit2.Repository) -> pygit2.Tree:
        try:
            return repo.revparse_single(self.sha).peel(pygit2.Tree)
        except (pygit2.GitError, KeyError, ValueError) as exc:
            raise BeamError("BEM-321", f"{self.sha}: {exc}") from None

    # -- paths -------------------------------------------------------------------------------

    def _resolve(self, repo: pygit2.Repository, rel: str) -> _Found:
        """Where `rel` leads in the commit, with the jail's refusals; links are followed in the tree."""
        root = self._root(repo)
        if rel == "":
            return _Found("tree", root.id, ())
        todo = lexical_names(rel)
        trees: list[pygit2.Tree] = [root]
        names: list[str] = []
        hops = 0
        followed = False
        found = _Found("tree", root.id, ())
        while todo:
            name = todo.pop(0)
            if found.kind != "tree":  # a name below a file or a missing entry: nothing is there
                found = _Found("missing", None, (*found.names, name, *todo))
                break
            if name in ("", "."):
                continue
            if name == "..":  # only from a link's target: climb from where the link really is
                if not names:
                    raise BeamError("BEM-302", rel)
                names.pop()
                trees.pop()
                found = _Found("tree", trees[-1].id, tuple(names))
                continue
            tree = trees[-1]
            entry = tree[name] if name in tree else None  # noqa: SIM401 (a Tree has no get)
            if entry is None:
                found = _Found("missing", None, (*names, name))
                continue
            mode = entry.filemode
            if mode == _LINK:
                hops += 1
                if hops > MAX_LINK_HOPS:
                    raise BeamError("BEM-312", f"{rel}: Too many levels of symbolic links")
                target = os.fsdecode(self._blob_data(repo, entry.id, rel))
                if target.startswith("/") or "\0" in target:
                    raise BeamError("BEM-302", rel)  # a host path: never inside the tree
                followed = True
                todo[:0] = target.split("/")
                continue
            names.append(name)
            if mode == _TREE:
                sub = repo[entry.id]
                assert isinstance(sub, pygit2.Tree)
                trees.append(sub)
                found = _Found("tree", sub.id, tuple(names))
            elif mode == _GITLINK:  # a submodule: an empty directory in a checkout
                found = _Found("gitlink", None, tuple(names))
            else:
                found = _Found("blob", entry.id, tuple(names))
        if found.kind == "gitlink":
            found = _Found("tree", None, found.names)
        if followed and any(is_git_name(part) for part in found.names):
            raise BeamError("BEM-337", rel, message=GIT_MESSAGE)
        return found

    # -- blobs -------------------------------------------------------------------------------

    def _blob(self, repo: pygit2.Repository, oid: pygit2.Oid, rel: str) -> pygit2.Blob:
        """The blob, fetched first when a partial clone does not hold it yet."""
        if oid not in repo.odb and self.fetch is not None:
            try:
                self.fetch([str(oid)])
            except BeamError as error:
                if error.code == "BEM-357":
                    self.refused.append(rel)
                    raise BeamError("BEM-357", f"{rel}: {error.detail}") from None
                raise
        try:
            blob = repo[oid]
        except (KeyError, pygit2.GitError, ValueError):
            raise BeamError("BEM-307", f"{oid}: the object is not in the repository") from None
        assert isinstance(blob, pygit2.Blob)
        return blob

    def _blob_data(self, repo: pygit2.Repository, oid: pygit2.Oid, rel: str) -> bytes:
        return self._blob(repo, oid, rel).data

    # -- the read interface (tree_view.FileView) -------------------------------------------------

    def list_files(self, rel: str = "") -> list[str]:
        """Every file under `rel`, sorted, as `SandboxRoot.list_files` lists a checkout of this commit:
        links to directories (and links out of the tree) are skipped, `.git` never listed."""
        with self._open() as repo:
            found = self._resolve(repo, rel)
            if found.kind != "tree":
                raise BeamError("BEM-306", rel)
            out: list[str] = []
            if found.oid is None:
                return out
            start = repo[found.oid]
            assert isinstance(start, pygit2.Tree)
            prefix = "/".join(found.names)
            stack: list[tuple[pygit2.Tree, str]] = [(start, prefix)]
            while stack:
                tree, base = stack.pop()
                for entry in tree:
                    name = entry.name or ""
                    if is_git_name(name):
                        continue
                    path = f"{base}/{name}" if base else name
                    mode = entry.filemode
                    if mode == _TREE:
                        sub = repo[entry.id]
                        assert isinstance(sub, pygit2.Tree)
                        stack.append((sub, path))
                        continue
                    if mode == _GITLINK or (mode == _LINK and self._link_is_dir(repo, path)):
                        continue
                    out.append(path)
                    if len(out) > self.max_list_entries:
                        raise too_many_files(rel, self.max_list_entries)
            out.sort()
            return out

    def _link_is_dir(self, repo: pygit2.Repository, path: str) -> bool:
        """Whether a listed link leads to a directory, or out of the tree (skipped, as a checkout's
        listing skips a link to a host directory); a dangling or looping link is listed."""
        try:
            return self._resolve(repo, path).kind == "tree"
        except BeamError as error:
            return error.code == "BEM-302"

    def read_bytes(self, rel: str, max_bytes: int | None) -> bytes:
        """A file's bytes: BEM-307 when it is missing or a directory, BEM-319 over `max_bytes`."""
        with self._open() as repo:
            found = self._resolve(repo, rel)
            if found.kind == "missing" or (found.oid is None and found.kind != "tree"):
                raise BeamError("BEM-307", f"{rel}: No such file or directory")
            if found.kind == "tree" or found.oid is None:
                raise BeamError("BEM-307", f"{rel}: is a directory")
            blob = self._blob(repo, found.oid, rel)
            if max_bytes is not None and blob.size > max_bytes:
                raise too_large(rel, blob.size, max_bytes)
            return blob.data

    def read_file(self, rel: str) -> str:
        return decode_text(rel, self.read_bytes(rel, self.max_file_bytes))

    def search(self, rel: str, needle: str) -> dict[str, Any]:
        """The `search` tool over the files under `rel`, in the order a walk of a checkout visits them
        (text_search.py); links are skipped, a missing or non-directory base finds nothing. In a
        partial clone, the blobs searched are fetched together, once (and counted by the host)."""
        with self._open() as repo:
            found = self._resolve(repo, rel)
            if found.kind != "tree" or found.oid is None:
                return search_files((), needle)
            start = repo[found.oid]
            assert isinstance(start, pygit2.Tree)
            # The search reads at most MAX_SEARCH_FILES files: only those are fetched, in batches,
            # so the host's cap stops a search of a big tree after the batch that reached it.
            files = list(
                itertools.islice(_walk_blobs(repo, start, "/".join(found.names)), MAX_SEARCH_FILES + 1)
            )
            if self.fetch is not None:
                missing = [str(oid) for _, oid in files if oid not in repo.odb]
                for first in range(0, len(missing), SEARCH_FETCH_BATCH):
                    try:
                        self.fetch(missing[first : first + SEARCH_FETCH_BATCH])
                    except BeamError as error:
                        if error.code != "BEM-357":
                            raise
                        self.refused.append(f"{rel or '.'} (search)")
                        break  # the files not fetched are not searched
            loaded: list[SearchFile] = [
                (path, functools.partial(_small_blob, repo, oid)) for path, oid in files
            ]
            return search_files(loaded, needle)

    # -- the git tools a review may call -----------------------------------------------------------

    def status(self) -> list[str]:
        return []  # nothing is changed: there is no checkout to change

    def diff(self) -> str:
        return ""

    def log(self, limit: int = 20) -> list[str]:
        """Summaries of the last `limit` commits from the commit, as `WorkingTree.log` reads HEAD."""
        if limit <= 0:
            return []
        with self._open() as repo:
            try:
                start = repo.revparse_single(self.sha).peel(pygit2.Commit)
                return log_summaries(repo.walk(start.id), limit)
            except (pygit2.GitError, KeyError, ValueError) as exc:
                raise BeamError("BEM-324", str(exc)) from None

    def write_file(self, rel: str, body: str) -> None:
        raise _read_only()

    def add(self, path: str) -> str:
        raise _read_only()

    def commit(self, message: str) -> str:
        raise _read_only()

    def push(self, ref: str | None = None) -> str:
        raise _read_only()


def _write_new(target: str, data: bytes) -> None:
    """Create one file in a scratch directory the run owns (no link is ever written into it)."""
    os.makedirs(os.path.dirname(target), exist_ok=True)
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


def _read_only() -> BeamError:
    return BeamError("BEM-342", "this run reads the pull request's commit; it writes nothing")


def _walk_blobs(repo: pygit2.Repository, tree: pygit2.Tree, base: str) -> Iterator[tuple[str, pygit2.Oid]]:
    """The regular files under `tree` in `os.walk`'s order over a checkout (a directory's files by
    name, then each subdirectory by name); links, submodules and `.git` are not entered."""
    files: list[tuple[str, pygit2.Oid]] = []
    dirs: list[tuple[str, pygit2.Tree]] = []
    for entry in tree:
        name = entry.name or ""
        path = f"{base}/{name}" if base else name
        if entry.filemode == _TREE:
            if name.lower() != ".git":
                sub = repo[entry.id]
                assert isinstance(sub, pygit2.Tree)
                dirs.append((name, sub))
        elif entry.filemode not in (_LINK, _GITLINK):
            files.append((path, entry.id))
    yield from sorted(files, key=lambda item: item[0].rsplit("/", 1)[-1])
    for name, sub in sorted(dirs, key=lambda item: item[0]):
        yield from _walk_blobs(repo, sub, f"{base}/{name}" if base else name)


def _small_blob(repo: pygit2.Repository, oid: pygit2.Oid) -> bytes | None:
    try:
        blob = repo[oid]
    except (KeyError, pygit2.GitError, ValueError):
        return None  # not fetched (the host's cap): not searched
    assert isinstance(blob, pygit2.Blob)
    return None if blob.size > MAX_SEARCH_FILE_BYTES else blob.data
