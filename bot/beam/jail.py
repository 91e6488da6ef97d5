"""`SandboxRoot`: the path jail every sandbox tool goes through, and the capped file operations on it.

Codes are Riverbeam's (riverbeam-reference.md section 6.1). Where the original could be escaped we
do better (ARCHITECTURE.md 4.5): every existing ancestor of a path is resolved before anything is
created, so a symlinked parent of a missing path cannot make a directory outside the jail; `.git`
is out of reach at any depth and in any case; listings never follow symlinks; sizes are capped.
"""

from __future__ import annotations

import functools
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from bot.beam.errors import BeamError
from bot.beam.sandbox_policy import is_git_name
from bot.beam.text_search import MAX_SEARCH_FILE_BYTES, SearchFile, search_files

DEFAULT_MAX_FILE_BYTES = 1 << 20
DEFAULT_MAX_LIST_ENTRIES = 20_000

_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)


class SandboxRoot:
    """A directory that tool paths cannot leave.

    The root is created if missing and kept canonical, so containment is a string-prefix test on
    canonical paths. Time-of-check/time-of-use races with another process are out of scope (the
    agent's tools run one at a time); files are still opened with O_NOFOLLOW as a last guard.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        try:
            os.makedirs(root, exist_ok=True)
        except OSError as exc:
            raise BeamError("BEM-310", f"{exc.strerror}") from None
        try:
            real = os.path.realpath(root, strict=True)
        except OSError as exc:
            raise BeamError("BEM-311", f"{exc.strerror}") from None
        self._root = real
        self._prefix = real.rstrip("/") + "/"

    @property
    def path(self) -> Path:
        """The canonical root."""
        return Path(self._root)

    def contains(self, real: str) -> bool:
        """Whether a canonical path is the root or under it."""
        return real == self._root or real.startswith(self._prefix)

    def relative(self, real: str | os.PathLike[str]) -> str:
        """A canonical path inside the root, made root-relative with `/` separators (`""` is the root)."""
        text = os.fspath(real)
        if text == self._root:
            return ""
        if not text.startswith(self._prefix):
            raise BeamError("BEM-309", "path is not under the sandbox root")
        return text[len(self._prefix) :]

    def resolve(self, rel: str) -> Path:
        """The canonical host path for a root-relative path, or a BEM error if it would leave the jail."""
        return Path(self.resolve_str(rel))

    def resolve_str(self, rel: str) -> str:
        if rel == "":
            return self._root
        names = lexical_names(rel)
        current = self._root
        followed = False
        for index, name in enumerate(names):
            candidate = current + "/" + name
            try:
                mode = os.lstat(candidate).st_mode
            except (FileNotFoundError, NotADirectoryError):
                # The rest does not exist: it is made only of plain names under `current`, which is
                # canonical and inside, so nothing created from it can land outside.
                current = "/".join([current, *names[index:]])
                break
            except OSError as exc:
                raise BeamError("BEM-312", f"{rel}: {exc.strerror}") from None
            if stat.S_ISLNK(mode):
                followed = True
                current = self._follow(rel, candidate, "/".join([self._root, *names]))
            else:
                current = candidate
        if followed and any(is_git_name(part) for part in self.relative(current).split("/")):
            raise BeamError("BEM-337", rel, message=GIT_MESSAGE)
        return current

    def _follow(self, rel: str, link: str, lexical: str) -> str:
        """Resolve one symlink met during `resolve`; its whole chain must stay inside the root."""
        try:
            target = os.path.realpath(link, strict=True)
        except (FileNotFoundError, NotADirectoryError):
            target = os.path.realpath(link)  # a dangling link: where a write through it would land
        except OSError as exc:
            raise BeamError("BEM-312", f"{rel}: {exc.strerror}") from None
        if not self.contains(target):
            code = "BEM-302" if os.path.exists(lexical) else "BEM-303"
            raise BeamError(code, rel)
        return target

    def list_files(self, rel: str = "", *, max_entries: int = DEFAULT_MAX_LIST_ENTRIES) -> list[str]:
        """Every file under `rel`, root-relative, sorted; symlinks are never followed, `.git` never listed.

        Symlinks to directories are skipped (following them could loop or leave the jail); other
        symlinks are listed as the entries they are. More than `max_entries` files is BEM-319.
        """
        base = self.resolve_str(rel)
        if not os.path.isdir(base):
            raise BeamError("BEM-306", rel)
        out: list[str] = []
        stack = [(base, self.relative(base))]
        while stack:
            directory, prefix = stack.pop()
            try:
                entries = os.scandir(directory)
            except OSError as exc:
                raise BeamError("BEM-318", f"{prefix or '.'}: {exc.strerror}") from None
            with entries:
                for entry in entries:
                    name = entry.name
                    if is_git_name(name):
                        continue
                    path = prefix + "/" + name if prefix else name
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            stack.append((entry.path, path))
                            continue
                        if entry.is_symlink() and _points_to_dir(entry.path):
                            continue
                    except OSError as exc:
                        raise BeamError("BEM-317", f"{path}: {exc.strerror}") from None
                    out.append(path)
                    if len(out) > max_entries:
                        raise too_many_files(rel, max_entries)
        out.sort()
        return out

    def read_text(self, rel: str, *, max_bytes: int = DEFAULT_MAX_FILE_BYTES) -> str:
        """A UTF-8 file's text; larger than `max_bytes` is BEM-319 and nothing past the cap is read."""
        return decode_text(rel, self.read_bytes(rel, max_bytes=max_bytes))

    def read_bytes(self, rel: str, *, max_bytes: int | None = DEFAULT_MAX_FILE_BYTES) -> bytes:
        """A regular file's bytes (BEM-307 for anything else); larger than `max_bytes` is BEM-319.
        `None` reads it whole, as `get_page` always has (it shows at most 400 lines of it)."""
        path = self.resolve_str(rel)
        cap = max_bytes if max_bytes is not None else 1 << 62
        try:
            fd = os.open(path, os.O_RDONLY | _O_NOFOLLOW | _O_NONBLOCK | _O_CLOEXEC)
        except OSError as exc:
            raise BeamError("BEM-307", f"{rel}: {exc.strerror}") from None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                kind = "is a directory" if stat.S_ISDIR(info.st_mode) else "is not a regular file"
                raise BeamError("BEM-307", f"{rel}: {kind}")
            if info.st_size > cap:
                raise too_large(rel, info.st_size, cap)
            chunks: list[bytes] = []
            total = 0
            while total <= cap:
                chunk = os.read(fd, min(cap + 1 - total, 1 << 24))
                if not chunk:
                    break
                chunks.append(chunk)
                total += len(chunk)
            if total > cap:  # the file grew after the stat
                raise too_large(rel, total, cap)
        except OSError as exc:
            raise BeamError("BEM-307", f"{rel}: {exc.strerror}") from None
        finally:
            os.close(fd)
        return b"".join(chunks)

    def search(self, rel: str, needle: str) -> dict[str, Any]:
        """The `search` tool over the files under `rel` (text_search.py); symlinks and `.git` are
        never entered, a missing or non-directory base finds nothing."""
        return search_files(self._walk_for_search(Path(self.resolve_str(rel))), needle)

    def _walk_for_search(self, base: Path) -> Iterator[SearchFile]:
        root = self.path
        for dirpath, dirnames, filenames in os.walk(base, followlinks=False):
            dirnames[:] = sorted(d for d in dirnames if d.lower() != ".git")
            for name in sorted(filenames):
                path = Path(dirpath) / name
                if path.is_symlink():
                    continue
                yield path.relative_to(root).as_posix(), functools.partial(_small_file, path)

    def write_text(
        self,
        rel: str,
        body: str,
        *,
        max_bytes: int = DEFAULT_MAX_FILE_BYTES,
        guard: Callable[[str], None] | None = None,
    ) -> None:
        """Create or replace a UTF-8 file, making missing parent directories, all inside the jail.

        `guard` gets the root-relative target after symlinks are resolved and may raise to refuse
        (the working tree uses it for blocked paths). Nothing is written or created on any error
        found before the write itself.
        """
        path = self.resolve_str(rel)
        if path == self._root:
            raise BeamError("BEM-316", f"{rel}: is a directory")
        if guard is not None:
            guard(self.relative(path))
        try:
            data = body.encode("utf-8")
        except UnicodeEncodeError:
            raise BeamError("BEM-316", f"{rel}: body is not valid UTF-8 text") from None
        if len(data) > max_bytes:
            raise too_large(rel, len(data), max_bytes)
        parent = os.path.dirname(path)
        try:
            os.makedirs(parent, exist_ok=True)
        except OSError as exc:
            raise BeamError("BEM-314", f"{rel}: {exc.strerror}") from None
        try:
            real_parent = os.path.realpath(parent, strict=True)
        except OSError as exc:
            raise BeamError("BEM-315", f"{rel}: {exc.strerror}") from None
        if not self.contains(real_parent):
            raise BeamError("BEM-308", rel)
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _O_NOFOLLOW | _O_CLOEXEC
        try:
            fd = os.open(path, flags, 0o644)
        except OSError as exc:
            raise BeamError("BEM-316", f"{rel}: {exc.strerror}") from None
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        except OSError as exc:
            raise BeamError("BEM-316", f"{rel}: {exc.strerror}") from None
        finally:
            os.close(fd)


GIT_MESSAGE = "The .git directory is out of reach of sandbox tools; use the git_* tools instead."


def lexical_names(rel: str) -> list[str]:
    """The names of a non-empty tool path, or the jail's refusal of its spelling alone: absolute or
    NUL (BEM-300), a `..` (BEM-301), a `.git` at any depth (BEM-337). Every view of a tree (a
    directory here, a commit's objects in commit_tree.py) starts from these same rules."""
    if rel.startswith(("/", "\\")) or "\0" in rel:
        raise BeamError("BEM-300", rel)
    names = [part for part in rel.split("/") if part not in ("", ".")]
    if ".." in names:
        raise BeamError("BEM-301", rel)
    if any(is_git_name(name) for name in names):
        raise BeamError("BEM-337", rel, message=GIT_MESSAGE)
    return names


def decode_text(rel: str, data: bytes) -> str:
    """A file's bytes as text for `read_file`: UTF-8 or BEM-307."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise BeamError("BEM-307", f"{rel}: not valid UTF-8 text") from None


def _small_file(path: Path) -> bytes | None:
    try:
        if path.stat().st_size > MAX_SEARCH_FILE_BYTES:
            return None
        return path.read_bytes()
    except OSError:
        return None


def _points_to_dir(path: str) -> bool:
    try:
        return stat.S_ISDIR(os.stat(path).st_mode)
    except OSError:
        return False  # dangling or looping: not a directory we could enter


def too_many_files(rel: str, limit: int) -> BeamError:
    return BeamError(
        "BEM-319",
        f"{rel or '.'}: more than {limit} files; list a subdirectory instead",
        message="The listing is larger than the sandbox allows.",
    )


def too_large(rel: str, size: int, limit: int) -> BeamError:
    return BeamError(
        "BEM-319",
        f"{rel}: {size} bytes is over the sandbox limit of {limit} bytes",
        message="The file is larger than the sandbox allows.",
    )
