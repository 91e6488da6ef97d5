"""The jail's first process after bubblewrap: mounts the check's tree as an overlay, then gives up every
power it used for that before the wrapper (and so the check) runs (issue 43; docs/checks.md, "The tree").

Why: copying the tree into the jail's tmpfs for every check cost time in proportion to the tree (91 ms
against bwrap's 9 on a small one). An overlay costs the same on any tree: the tree (bound read-only at
SOURCE) is its lower layer, the upper and work directories are on the jail's capped tmpfs, so what a
check writes counts against that cap and vanishes with the jail, and the host's tree is never written.

Mounting needs CAP_SYS_ADMIN (and CAP_DAC_OVERRIDE: overlay's work directory is mode 0), which the
seccomp filter exists to keep from the check. So bwrap starts this step with those capabilities and
without the filter; in this order it then
  1. mounts the overlay at TREE (in root mode, over an idmapped clone of the tree, so the check's
     dedicated uid owns what the tree's owner owns, as it owned its copy), whites `.git` out, hides
     the upper and work directories under an empty read-only tmpfs, and detaches SOURCE, so the
     check sees neither the host tree's path nor any layer but the merged one;
  2. user-namespace mode: enters a nested user namespace in which it is uid 65534 (as bwrap's `--uid`
     did), which does not own the jail's mount namespace: no capability in it can touch a mount;
  3. drops every capability (root mode keeps CAP_SETUID, CAP_SETGID and CAP_SETPCAP for `setpriv`,
     which drops them with the uid, as before) from every set, ambient and bounding included;
  4. loads the seccomp filter bwrap would have loaded (no_new_privs is already set by bwrap);
  5. root mode: becomes the check's uid, as `setpriv --reuid --regid --clear-groups --bounding-set=-all
     --inh-caps=-all` did (no capability left in any set), then sets the check's rlimits, as
     `prlimit` did: two programs fewer between bwrap and the check (each a few ms of every start);
  6. writes `overlay` to the mark fd and execs the rest of the command line.
If a mount fails (a kernel before 5.11 in a user namespace, a filesystem without idmapped mounts), it
undoes nothing it need not, skips to step 2 and execs the command with TREE left empty: the wrapper
sees no `overlay` mark and copies the tree instead, as it always did.

Stdlib only and free of `bot` imports: it runs with the jail's own `python3 -I -S`.

Usage: python3 -I -S overlay.py MODE UID SECCOMP_FD MARK_FD BECOME RLIMITS -- COMMAND...
  MODE: "root" or "user" (bwrap.py's two modes); UID: the check's uid in root mode (ignored in user
  mode); SECCOMP_FD: the compiled filter, or "-" where a test weakens it; BECOME: "uid" to switch to
  UID (root mode), "-" where a test weakens it; RLIMITS: `name=value` pairs joined by commas (soft
  and hard limit alike; names as prlimit's options), or "-".
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import struct
import sys
from typing import Any

SOURCE = "/src"
TREE = "/sandbox/tree"
LAYERS = "/sandbox/.layers"  # upper, work and (root mode) the idmapped lower's mount point

_CLONE_NEWUSER = 0x10000000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV = 1, 2, 4
_MNT_DETACH = 2
_OPEN_TREE_CLONE, _OPEN_TREE_CLOEXEC = 1, 0o2000000
_AT_EMPTY_PATH = 0x1000
_MOVE_MOUNT_F_EMPTY_PATH = 0x4
_MOUNT_ATTR_IDMAP = 0x100000
_PR_CAPBSET_DROP, _PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 24, 47, 4
_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 22, 2
_PR_SET_NO_NEW_PRIVS = 38
_CAP_VERSION_3 = 0x20080522
_KEEP_ROOT = (6, 7, 8)  # CAP_SETGID, CAP_SETUID, CAP_SETPCAP: what setpriv needs to drop the uid
_FAILED = 125
_RLIMITS = {
    "nproc": resource.RLIMIT_NPROC,
    "as": resource.RLIMIT_AS,
    "cpu": resource.RLIMIT_CPU,
    "fsize": resource.RLIMIT_FSIZE,
    "nofile": resource.RLIMIT_NOFILE,
    "core": resource.RLIMIT_CORE,
}

_libc = ctypes.CDLL(None, use_errno=True)


class _Failed(Exception):
    pass


def _check(result: int, what: str) -> int:
    if result < 0:
        raise _Failed(f"{what}: {os.strerror(ctypes.get_errno())}")
    return result


def _function(name: str) -> Any:
    """A call of the C library's that an older one lacks (open_tree and its kin came in glibc 2.36)."""
    try:
        return getattr(_libc, name)
    except AttributeError:
        raise _Failed(f"this C library has no {name}") from None


def _mount(source: str, target: str, fstype: str, flags: int, data: str) -> None:
    _check(
        _libc.mount(source.encode(), target.encode(), fstype.encode(), flags, data.encode()),
        f"mount {target}",
    )


def _idmapped_lower(uid: int, lower: str) -> None:
    """Root mode: clone SOURCE as a mount on which the tree's owner reads as the check's uid."""
    owner = os.stat(SOURCE)
    ready, hold = os.pipe(), os.pipe()
    child = os.fork()
    if child == 0:  # holds a user namespace with the mapping until the mount has taken it
        os.close(hold[1])
        os.write(ready[1], b"1" if _libc.unshare(_CLONE_NEWUSER) == 0 else b"0")
        os.read(hold[0], 1)
        os._exit(0)
    os.close(ready[1])
    os.close(hold[0])
    try:
        if os.read(ready[0], 1) != b"1":
            raise _Failed("the idmap's user namespace could not be made")
        with open(f"/proc/{child}/uid_map", "w") as out:
            out.write(f"{owner.st_uid} {uid} 1\n")  # the owner, on disk, is `uid` on this mount
        with open(f"/proc/{child}/gid_map", "w") as out:
            out.write(f"{owner.st_gid} {uid} 1\n")
        userns = os.open(f"/proc/{child}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
    finally:
        os.close(ready[0])
        os.close(hold[1])
        os.waitpid(child, 0)
    try:
        fd = _check(
            _function("open_tree")(-100, SOURCE.encode(), _OPEN_TREE_CLONE | _OPEN_TREE_CLOEXEC), "open_tree"
        )
        # struct mount_attr { u64 attr_set, attr_clr, propagation, userns_fd }
        attr = ctypes.create_string_buffer(struct.pack("QQQQ", _MOUNT_ATTR_IDMAP | 1, 0, 0, userns), 32)
        _check(_function("mount_setattr")(fd, b"", _AT_EMPTY_PATH, attr, 32), "mount_setattr")
        _check(_function("move_mount")(fd, b"", -100, lower.encode(), _MOVE_MOUNT_F_EMPTY_PATH), "move_mount")
        os.close(fd)
    finally:
        os.close(userns)


def _mount_overlay(mode: str, uid: int) -> None:
    upper, work = f"{LAYERS}/upper", f"{LAYERS}/work"
    os.mkdir(LAYERS, 0o700)
    os.mkdir(upper, 0o755)
    os.mkdir(work, 0o700)
    lower = SOURCE
    if mode == "root":
        lower = f"{LAYERS}/lower"
        os.mkdir(lower, 0o700)
        _idmapped_lower(uid, lower)
        os.chown(upper, uid, uid)  # the tree's root, as the check's copy was
    with contextlib.suppress(FileNotFoundError):
        os.lstat(f"{SOURCE}/.git")  # masked by bwrap, but a layer shows what is under a mount
        os.mknod(f"{upper}/.git", 0o20000, 0)  # a whiteout: no `.git` in the merged tree
    layers = f"lowerdir={lower},upperdir={upper},workdir={work}"
    if mode == "root":
        _mount("overlay", TREE, "overlay", _MS_NOSUID | _MS_NODEV, layers)
    else:
        # In a user namespace the overlay keeps what makes a directory opaque (`rm -r d; mkdir d`) in
        # user.* attributes, which tmpfs has since 6.6; before that, the trusted.* ones it cannot set.
        try:
            _mount("overlay", TREE, "overlay", _MS_NOSUID | _MS_NODEV, f"{layers},userxattr")
        except _Failed:
            _mount("overlay", TREE, "overlay", _MS_NOSUID | _MS_NODEV, layers)
    if mode == "root":
        _check(_libc.umount2(lower.encode(), _MNT_DETACH), "umount lower")
    _mount("none", LAYERS, "tmpfs", _MS_RDONLY | _MS_NOSUID | _MS_NODEV, "size=4k,mode=0")
    _check(_libc.umount2(SOURCE.encode(), _MNT_DETACH), f"umount {SOURCE}")


def _nested_user_namespace() -> None:
    """As bwrap's `--uid 65534 --disable-userns`: a user namespace that owns no mount of the jail."""
    _check(_libc.unshare(_CLONE_NEWUSER), "unshare")
    for name, text in (("setgroups", "deny"), ("uid_map", "65534 0 1"), ("gid_map", "65534 0 1")):
        with open(f"/proc/self/{name}", "w") as out:
            out.write(f"{text}\n")
    # No user namespace below this one, whatever the filter does (bwrap's --disable-userns, which
    # writes 1 in the namespace above, where the nested one already counts; here it is 0). Raising
    # it again takes CAP_SYS_RESOURCE, dropped below for good.
    with open("/proc/sys/user/max_user_namespaces", "w") as out:
        out.write("0\n")


def _drop_capabilities(keep: tuple[int, ...]) -> None:
    mask = sum(1 << cap for cap in keep)
    with open("/proc/sys/kernel/cap_last_cap") as source:
        last = int(source.read())
    for cap in range(last + 1):
        if cap not in keep:
            _check(_libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0), "dropping the bounding set")
    _check(_libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "clearing ambient capabilities")
    _capset(mask)


def _capset(mask: int) -> None:
    """Effective and permitted `mask`, inheritable nothing (lowering needs no capability)."""
    header = ctypes.create_string_buffer(struct.pack("Ii", _CAP_VERSION_3, 0), 8)
    data = ctypes.create_string_buffer(struct.pack("IIIIII", mask, mask, 0, 0, 0, 0), 24)
    _check(_libc.capset(header, data), "capset")


def _load_filter(fd: int) -> None:
    with os.fdopen(fd, "rb") as source:
        program = source.read()
    buffer = ctypes.create_string_buffer(program, len(program))
    prog = struct.pack("HxxxxxxP", len(program) // 8, ctypes.addressof(buffer))
    fprog = ctypes.create_string_buffer(prog, len(prog))
    _check(_libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, fprog, 0, 0), "loading the seccomp filter")


def _become(uid: int) -> None:
    """Root mode: `setpriv --reuid=UID --regid=UID --clear-groups --bounding-set=-all --inh-caps=-all`.
    The filter allows these calls, as it allowed setpriv's."""
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    for cap in _KEEP_ROOT:  # the bounding set's last three, while CAP_SETPCAP still holds
        _check(_libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0), "dropping the bounding set")
    os.setresuid(uid, uid, uid)
    _capset(0)  # permitted, effective, inheritable: empty, whatever the securebits said
    if os.getresuid() != (uid, uid, uid) or os.getresgid() != (uid, uid, uid) or os.getgroups():
        raise _Failed("the check's uid could not be taken")


def _set_rlimits(spec: str) -> None:
    """As `prlimit --NAME=V:V ...`: every process of the check inherits them from here."""
    for pair in spec.split(","):
        name, _, value = pair.partition("=")
        resource.setrlimit(_RLIMITS[name], (int(value), int(value)))


def main(argv: list[str]) -> int:
    mode, uid, seccomp, mark = argv[1], int(argv[2]), argv[3], int(argv[4])
    become, rlimits = argv[5], argv[6]
    command = argv[8:]
    mounted = False
    try:
        _mount_overlay(mode, uid)
        mounted = True
    except (_Failed, OSError) as exc:
        # The idmapped clone, if it was attached, holds the tree without bwrap's mask over `.git`.
        _libc.umount2(f"{LAYERS}/lower".encode(), _MNT_DETACH)
        sys.stderr.write(f"beam: the tree's overlay could not be mounted ({exc}); copying it instead\n")
    try:
        if mode != "root":
            _nested_user_namespace()
        _drop_capabilities(_KEEP_ROOT if mode == "root" else ())
        if seccomp != "-":
            _load_filter(int(seccomp))
        if mode == "root" and become == "uid":
            _check(_libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "setting no_new_privs")
            _become(uid)
        if rlimits != "-":
            _set_rlimits(rlimits)
    except (_Failed, OSError, ValueError, KeyError) as exc:
        sys.stderr.write(f"beam: the jail could not be sealed ({exc}); nothing ran\n")
        return _FAILED
    if mounted:
        os.write(mark, b"overlay")
    os.execv(command[0], command)  # noqa: S606 - a full path (bwrap.py), never one of the jail's PATH
    return _FAILED


if __name__ == "__main__":
    sys.exit(main(sys.argv))
