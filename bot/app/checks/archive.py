"""What `checks_setup` installed, unpacked on the host by a writer of our own: files and directories only.

Stdlib only, and free of other `bot` imports, so the tests can run it under every interpreter the bot
supports (Debian 12's 3.11.2 included) with nothing but this checkout on the path.

Why not `tarfile.extractall`: its "data" filter first came in 3.11.4, and a check of member names
before anything is written (what we did on older interpreters) is fooled by a chain of links, `b -> .`
then `a -> b/b/../../elsewhere`, which reads as inside and, once `b` exists, points out; `a/x` was then
written through it as the bot's user. So links are refused outright (pip puts none in a user site),
devices and the like too, and every member is written by walking its path from a descriptor of `dest`
one name at a time with O_NOFOLLOW, each file made with O_EXCL: nothing in the archive is ever followed
and nothing already there is overwritten. Owners, setuid, setgid and sticky bits are not kept.
"""

from __future__ import annotations

import os
import shutil
import tarfile
from pathlib import Path

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class Refused(tarfile.TarError):
    """The archive holds what the setup's packages may not: a link, a device, a path out of `dest`."""


def unpack(archive: Path, dest: Path) -> None:
    """Empty `dest` and unpack `archive` (an uncompressed tar) into it; raises Refused (a TarError)
    or OSError, leaving `dest` for the caller to remove."""
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(mode=0o755)
    root = os.open(dest, _DIR_FLAGS)
    try:
        with tarfile.open(archive, "r:") as tar:
            for member in tar:
                _write(tar, member, root)
    finally:
        os.close(root)
    dest.chmod(0o755)


def _parts(name: str) -> list[str]:
    """The names on the way to a member, checked: relative, no `..`, no NUL."""
    if "\0" in name or name.startswith("/"):
        raise Refused(f"{name!r} is not a relative path")
    parts = [part for part in name.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise Refused(f"{name!r} climbs out of the deps")
    return parts


def _write(tar: tarfile.TarFile, member: tarfile.TarInfo, root: int) -> None:
    if member.issym() or member.islnk():
        raise Refused(
            f"{member.name!r} is a link; what the setup installs may hold files and directories only"
        )
    if not (member.isfile() or member.isdir()):
        raise Refused(f"{member.name!r} is not a file or a directory")
    parts = _parts(member.name)
    if member.isdir():
        os.close(_directory(root, parts))
        return
    if not parts:
        raise Refused(f"{member.name!r} names no file")
    parent = _directory(root, parts[:-1])
    try:
        mode = 0o755 if member.mode & 0o111 else 0o644
        fd = os.open(parts[-1], _FILE_FLAGS, mode, dir_fd=parent)
    finally:
        os.close(parent)
    source = tar.extractfile(member)
    assert source is not None  # a regular file always has a body
    with source, os.fdopen(fd, "wb") as out:
        shutil.copyfileobj(source, out, 1 << 16)
        os.fchmod(out.fileno(), mode)  # the umask does not decide it


def _directory(root: int, parts: list[str]) -> int:
    """A descriptor of `root/parts...`, each directory made (0755) if missing and none followed."""
    fd = os.dup(root)
    try:
        for part in parts:
            try:
                os.mkdir(part, 0o755, dir_fd=fd)
                made = True
            except FileExistsError:
                made = False
            inner = os.open(part, _DIR_FLAGS, dir_fd=fd)  # ELOOP or ENOTDIR for anything but a directory
            os.close(fd)
            fd = inner
            if made:
                os.fchmod(fd, 0o755)  # the umask does not decide it: checks run as another uid as root
    except BaseException:
        os.close(fd)
        raise
    return fd
