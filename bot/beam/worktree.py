"""`WorkingTree`: git on a jailed directory through pygit2, with the host's rules built in.

Codes are Riverbeam's (riverbeam-reference.md sections 6.2 and 6.3). Where the original trusted
the caller we do better (ARCHITECTURE.md 4.3, 4.5): checkout and push refuse protected refs in
any spelling, pushes go to one plain branch on `origin` with credentials held only in memory,
per-ref rejections are reported, and repository-blocked paths can be neither written nor committed.
Every method is blocking: async callers run them in a worker thread.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import pygit2
from pygit2.enums import CheckoutStrategy, RepositoryOpenFlag

from bot.beam.errors import BeamError
from bot.beam.jail import DEFAULT_MAX_FILE_BYTES, DEFAULT_MAX_LIST_ENTRIES, SandboxRoot
from bot.beam.push_callbacks import Credentials, PushCallbacks, has_userinfo
from bot.beam.sandbox_policy import AllowedPaths, BlockedPaths, is_protected, push_branch_name, strip_heads
from bot.beam.unsafe_text import escape_char, first_unsafe

DEFAULT_IDENTITY = ("beam-agent", "beam@localhost")
ORIGIN = "origin"


_GIT_ERRORS = (pygit2.GitError, KeyError, ValueError, OSError)


class WorkingTree:
    """A git working tree rooted exactly at a sandbox root (never a repository found further up)."""

    def __init__(
        self,
        sandbox: SandboxRoot,
        protected_refs: Iterable[str],
        *,
        credentials: Credentials | None = None,
        blocked_paths: Iterable[str] = (),
        allowed_paths: Iterable[str] | None = None,
        allowed_push_branches: Collection[str] | None = None,
        author: tuple[str, str] = DEFAULT_IDENTITY,
        committer: tuple[str, str] = DEFAULT_IDENTITY,
        commit_trailer: str | None = None,
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
        max_list_entries: int = DEFAULT_MAX_LIST_ENTRIES,
    ) -> None:
        self.sandbox = sandbox
        self.protected_refs = tuple(protected_refs)
        self.blocked = BlockedPaths(blocked_paths)
        self.allowed = AllowedPaths(allowed_paths)
        self.allowed_push_branches = None if allowed_push_branches is None else set(allowed_push_branches)
        self.author = author
        self.committer = committer
        self.commit_trailer = commit_trailer
        self.max_file_bytes = max_file_bytes
        self.max_list_entries = max_list_entries
        self._credentials = credentials
        self._root = str(sandbox.path)

    # -- files -------------------------------------------------------------------------------

    def list_files(self, rel: str = "") -> list[str]:
        return self.sandbox.list_files(rel, max_entries=self.max_list_entries)

    def read_file(self, rel: str) -> str:
        return self.sandbox.read_text(rel, max_bytes=self.max_file_bytes)

    def read_bytes(self, rel: str, max_bytes: int | None) -> bytes:
        return self.sandbox.read_bytes(rel, max_bytes=max_bytes)

    def search(self, rel: str, needle: str) -> dict[str, Any]:
        return self.sandbox.search(rel, needle)

    def write_file(self, rel: str, body: str) -> None:
        """Write inside the jail, unless the path, or where a symlink leads, is blocked (BEM-334) or
        outside the allowed paths (BEM-338), or its name holds a control or bidi character (BEM-346)."""
        _refuse_unsafe(rel)
        self._refuse_blocked(rel)
        self.sandbox.write_text(rel, body, max_bytes=self.max_file_bytes, guard=self._refuse_blocked)

    def _refuse_blocked(self, rel: str) -> None:
        if self.blocked.matches(rel):
            raise _blocked(rel)
        if not self.allowed.permits(rel):
            raise _not_allowed(rel, self.allowed.patterns)

    def _refuse_any(self, rel_paths: Iterable[str]) -> None:
        paths = list(rel_paths)
        hit = self.blocked.first_match(paths)
        if hit is not None:
            raise _blocked(hit)
        outside = self.allowed.first_refused(paths)
        if outside is not None:
            raise _not_allowed(outside, self.allowed.patterns)

    # -- repository --------------------------------------------------------------------------

    def init(self, initial_head: str | None = None) -> None:
        """`git init` at the root (BEM-320)."""
        try:
            pygit2.init_repository(self._root, initial_head=initial_head).free()
        except _GIT_ERRORS as exc:
            raise BeamError("BEM-320", _text(exc)) from None

    @contextmanager
    def _open(self) -> Iterator[pygit2.Repository]:
        """The repository at the root exactly; BEM-321 if there is none or it is bare or elsewhere."""
        try:
            repo = pygit2.Repository(self._root, RepositoryOpenFlag.NO_SEARCH)
        except _GIT_ERRORS as exc:
            raise BeamError("BEM-321", _text(exc)) from None
        try:
            workdir = repo.workdir
            if repo.is_bare or not workdir or os.path.realpath(workdir) != self._root:
                raise BeamError("BEM-321", "the sandbox root is not the repository's working tree")
            yield repo
        finally:
            repo.free()

    def head_oid(self) -> str | None:
        """The commit HEAD points at, or None on an unborn branch."""
        with self._open() as repo:
            if repo.head_is_unborn:
                return None
            return str(repo.head.target)

    def current_branch(self) -> str:
        """HEAD's branch name, `"HEAD"` when detached; BEM-327 on an unborn HEAD."""
        with self._open() as repo:
            return _current_branch(repo)

    def checkout_branch(self, name: str, create: bool = False) -> None:
        """Check out (and maybe create at HEAD) a branch; protected refs are refused (BEM-333)."""
        self._refuse_protected_checkout(name, name)
        with self._open() as repo:
            if create:
                short = strip_heads(name)
                try:
                    head = repo.head.peel(pygit2.Commit)
                except _GIT_ERRORS:
                    raise BeamError("BEM-332", "HEAD has no commit to branch from") from None
                try:
                    if repo.branches.local.get(short) is None:
                        repo.branches.local.create(short, head)
                except _GIT_ERRORS as exc:
                    raise BeamError("BEM-332", f"{name}: {_text(exc)}") from None
            try:
                target, ref = repo.revparse_ext(name)
            except _GIT_ERRORS:
                raise BeamError("BEM-332", f"{name}: no such branch or revision") from None
            if ref is not None:
                self._refuse_protected_checkout(ref.name, name)
            try:
                commit = target.peel(pygit2.Commit)
                repo.checkout_tree(commit.tree, strategy=CheckoutStrategy.SAFE)  # type: ignore[no-untyped-call]
                if ref is not None:
                    repo.set_head(ref.name)
                else:
                    repo.set_head(commit.id)
            except _GIT_ERRORS as exc:
                raise BeamError("BEM-332", f"{name}: {_text(exc)}") from None

    def _refuse_protected_checkout(self, ref: str, shown: str) -> None:
        if is_protected(ref, self.protected_refs):
            raise BeamError("BEM-333", push_branch_name(shown))

    def add_origin(self, url: str) -> None:
        """Point `origin` at `url`. A URL carrying credentials is refused: tokens never go on disk."""
        if has_userinfo(url):
            raise BeamError("BEM-331", "the origin URL must not contain credentials")
        with self._open() as repo:
            try:
                if ORIGIN in repo.remotes.names():
                    repo.remotes.set_url(ORIGIN, url)
                else:
                    repo.remotes.create(ORIGIN, url)
            except _GIT_ERRORS:
                raise BeamError("BEM-331", "could not set the origin remote") from None

    def status(self) -> list[str]:
        """Every path with index, worktree or untracked changes; an untracked directory shows as `dir/`."""
        with self._open() as repo:
            try:
                return sorted(repo.status(untracked_files="normal", ignored=False))
            except _GIT_ERRORS as exc:
                raise BeamError("BEM-322", _text(exc)) from None

    def diff(self) -> str:
        """A unified diff of HEAD (or the empty tree) against the index and working directory together."""
        with self._open() as repo:
            try:
                index = repo.index
                index.read(False)
                tree = _head_tree(repo)
                staged = tree.diff_to_index(index)
                staged.merge(index.diff_to_workdir())
                return staged.patch or ""
            except _GIT_ERRORS as exc:
                raise BeamError("BEM-323", _text(exc)) from None

    def log(self, limit: int = 20) -> list[str]:
        """Summaries of the last `limit` commits from HEAD (`[]` on an unborn HEAD)."""
        if limit <= 0:
            return []
        with self._open() as repo:
            try:
                if repo.head_is_unborn:
                    return []
                return log_summaries(repo.walk(repo.head.target), limit)
            except _GIT_ERRORS as exc:
                raise BeamError("BEM-324", _text(exc)) from None

    def add(self, path: str) -> str:
        """Stage one file, or everything for `""`/`"."`; returns the path staged."""
        everything = path in ("", ".")
        if not everything:
            _refuse_unsafe(path)
            self.sandbox.resolve_str(path)  # jail codes and BEM-337 before git sees the path
            rel = "/".join(p for p in path.split("/") if p not in ("", "."))
            self._refuse_blocked(rel)
        with self._open() as repo:
            try:
                index = repo.index
                index.read(False)
            except _GIT_ERRORS as exc:
                raise BeamError("BEM-325", _text(exc)) from None
            if everything:
                status = repo.status(untracked_files="all", ignored=False)
                for changed in status:
                    _refuse_unsafe(changed)
                if self.blocked or self.allowed:
                    self._refuse_any(status)
                try:
                    index.add_all(["*"])
                    index.write()
                except _GIT_ERRORS as exc:
                    raise BeamError("BEM-325", _text(exc)) from None
                return path
            try:
                index.add(rel)
                index.write()
            except _GIT_ERRORS as exc:
                raise BeamError("BEM-325", f"{path}: {_text(exc)}") from None
            return path

    def commit(self, message: str) -> str:
        """Commit the index on HEAD's branch; returns the new commit id. Blocked changes are refused."""
        text = message
        if self.commit_trailer and self.commit_trailer not in message:
            text = f"{message.rstrip()}\n\n{self.commit_trailer}\n"
        with self._open() as repo:
            try:
                index = repo.index
                index.read(False)
                changes = _index_changes(repo, index)
                for changed in changes:
                    _refuse_unsafe(changed)
                if self.blocked or self.allowed:
                    self._refuse_any(changes)
                tree_id = index.write_tree()
                parents = [] if repo.head_is_unborn else [repo.head.target]
                author = pygit2.Signature(*self.author)
                committer = pygit2.Signature(*self.committer)
                oid = repo.create_commit("HEAD", author, committer, text, tree_id, parents)
            except _GIT_ERRORS as exc:
                raise BeamError("BEM-326", _text(exc)) from None
            return str(oid)

    # -- push --------------------------------------------------------------------------------

    def push(self, ref: str | None = None) -> str:
        """Push one branch to the same branch on `origin`; returns the branch pushed.

        Refused: protected refs in any spelling (BEM-328), refspec tricks such as `src:dst` or
        `+force` and branches other than the allowed ones (BEM-335), a remote other than origin
        (BEM-329). Rejections the server reports per ref are failures (BEM-330).
        """
        if ref is None or ref.strip() == "HEAD":
            branch = self.current_branch()
            if branch == "HEAD":
                raise BeamError("BEM-327", "HEAD is detached")
        else:
            if is_protected(ref, self.protected_refs):
                raise BeamError("BEM-328", push_branch_name(ref))
            if ":" in ref or ref.lstrip().startswith("+"):
                raise BeamError("BEM-335", ref)
            branch = strip_heads(ref.strip())
        if is_protected(branch, self.protected_refs):
            raise BeamError("BEM-328", branch)
        full = "refs/heads/" + branch
        if not pygit2.reference_is_valid_name(full):
            raise BeamError("BEM-335", branch)
        if self.allowed_push_branches is not None and branch not in self.allowed_push_branches:
            raise BeamError("BEM-335", branch)
        with self._open() as repo:
            try:
                remote = repo.remotes[ORIGIN]
            except _GIT_ERRORS:
                raise BeamError("BEM-329") from None
            if repo.references.get(full) is None:
                raise BeamError("BEM-330", f"{branch}: no such local branch")
            callbacks = PushCallbacks(self._credentials)
            try:
                remote.push([f"{full}:{full}"], callbacks=callbacks)
            except Exception as exc:
                raise BeamError("BEM-330", callbacks.scrub(_text(exc))) from None
            if callbacks.rejected:
                refname, reason = callbacks.rejected[0]
                raise BeamError("BEM-330", callbacks.scrub(f"{refname}: {reason}"))
        return branch


def _current_branch(repo: pygit2.Repository) -> str:
    if repo.head_is_unborn:
        raise BeamError("BEM-327", "HEAD is unborn")
    if repo.head_is_detached:
        return "HEAD"
    return repo.head.shorthand


def _head_tree(repo: pygit2.Repository) -> pygit2.Tree:
    if repo.head_is_unborn:
        empty = repo.TreeBuilder().write()
        tree = repo[empty]
    else:
        tree = repo.head.peel(pygit2.Tree)
    assert isinstance(tree, pygit2.Tree)
    return tree


def _index_changes(repo: pygit2.Repository, index: pygit2.Index) -> list[str]:
    """Paths whose staged content differs from HEAD: what a commit would change."""
    diff = _head_tree(repo).diff_to_index(index)
    paths: list[str] = []
    for delta in diff.deltas:
        paths.append(delta.old_file.path)
        paths.append(delta.new_file.path)
    return paths


def log_summaries(commits: Iterable[pygit2.Commit], limit: int) -> list[str]:
    """The first `limit` commits' summaries: `git_log`'s answer for a checkout and a commit alike."""
    out: list[str] = []
    for commit in commits:
        out.append(_summary(commit.message))
        if len(out) >= limit:
            break
    return out


def _summary(message: str) -> str:
    """libgit2's summary: the first paragraph, lines trimmed and joined by spaces."""
    lines: list[str] = []
    for line in message.lstrip().split("\n"):
        if not line.strip():
            break
        lines.append(line.strip())
    return " ".join(lines)


def _refuse_unsafe(rel: str) -> None:
    """A path with a control or bidi character is never written or committed (BEM-346): shown in a
    comment it could draw lines that are not there (bot/beam/unsafe_text.py)."""
    char = first_unsafe(rel)
    if char is not None:
        shown = "".join(escape_char(c) if first_unsafe(c) else c for c in rel)
        raise BeamError("BEM-346", f"{shown[:200]} contains {escape_char(char)}; choose another name")


def _blocked(rel: str) -> BeamError:
    return BeamError(
        "BEM-334",
        f"{rel} is blocked by the repository's configuration; tools may not change it",
        message="Path is blocked by the repository's configuration.",
    )


def _not_allowed(rel: str, patterns: tuple[str, ...]) -> BeamError:
    shown = ", ".join(patterns)
    return BeamError(
        "BEM-338",
        f"{rel} is outside the paths this run may change ({shown}); change only files matching them",
        message="Path is outside the paths this run may write.",
    )


def _text(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__
