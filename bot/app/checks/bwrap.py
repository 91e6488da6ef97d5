"""The bubblewrap command line of one jailed process, and its launch (probe.py says whether it can run here).

Two modes, chosen by who runs the bot:

- as root (a host or a container running the bot as uid 0): bwrap runs privileged, with no user
  namespace, and the jailed process drops to a dedicated host uid (`setpriv`) before it runs anything.
  A user namespace would map the jail's uid to host root, which owns the device nodes bwrap binds into
  `/dev`: `chmod 000 /dev/null` in the jail would then change the host's. A dedicated uid owns nothing
  of the host and is one nothing else runs as, so RLIMIT_NPROC (counted per real uid) counts only the
  jail's processes.
- as any other user (the Dockerfile's `beam`, uid 10001): bwrap makes an unprivileged user namespace
  in which the jail is uid 65534, and nested user namespaces are disabled.

Either way: empty network namespace (loopback only), own pid/ipc/uts namespaces, no capabilities,
no_new_privs, a new session, and death with the bot. Nothing of the bot goes in: bwrap itself starts
from `BWRAP_ENV` (so its own init, pid 1 of the jail, never held a variable of the bot's) and reads its
arguments from a file descriptor (so no process in the jail shows the host paths of its binds in its
command line). `/` and `/dev` are read-only; the writable mounts are the capped tmpfs of the sandbox,
`/dev/shm` and (setup) `/deps`. A seccomp filter (syscall_filter.py) refuses new user namespaces, the
keyring, ptrace and the kernel's rarer attack surface, and one memory cgroup per check (cgroups.py)
caps anonymous, tmpfs, memfd pages and the kernel's (socket buffers, pipes) together. Where the bot
has no cgroup to write to, the probe says so and nothing runs.
"""

from __future__ import annotations

import contextlib
import os
import resource
import shutil
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bot.app.checks import syscall_filter
from bot.app.checks.cgroups import Cgroups, CheckCgroup

# Inside the jail. The tree, bound read-only at SOURCE, is the lower layer of an overlay at TREE whose
# upper layer is on the capped tmpfs SANDBOX (or, where no overlay can be mounted, copied there), which
# also holds /tmp: one cap bounds everything a check can write.
SANDBOX = "/sandbox"
TREE = f"{SANDBOX}/tree"
SANDBOX_TMP = f"{SANDBOX}/tmp"  # noqa: S108 - a path inside the jail
JAIL_TMP = "/tmp"  # noqa: S108 - inside the jail: a symlink to SANDBOX_TMP
SOURCE = "/src"
CACHE = "/cache"
DEPS = "/deps"
HELPERS = "/beam"
OVERLAY_HELPER = "/.beam/overlay.py"  # overlay.py, bound read-only: the jail's first step
# What overlay.py mounts with, and drops before the check runs. The overlay does what a check asks of
# its layers with the credentials it was mounted with (once the check's own permission is checked on
# the merged file): its work directory is mode 0 (CAP_DAC_OVERRIDE), a chmod or chown of a file the
# check owns is done by uid 0 of the mounting namespace (CAP_FOWNER, CAP_CHOWN, CAP_FSETID), and the
# nested namespace's map names uid 0 of the one above (CAP_SETFCAP, user-namespace mode).
MOUNT_CAPS = ("CAP_SYS_ADMIN", "CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_CHOWN", "CAP_FSETID", "CAP_SETFCAP")

# Host uids 65000-65533 are reserved by Debian and allocated to nothing; the jail takes a block of them
# (one per check running at once in this process, so one check's processes never count against another's).
JAIL_UID_BASE = 65400
JAIL_UID_COUNT = 64
USERNS_UID = 65534

# Weakenings a test may ask for, to show that an attack succeeds without the limit it names:
# "bwrap-env" starts bwrap with the bot's environment, "readonly" leaves `/` and `/dev` writable and
# `/dev/shm` uncapped, "seccomp" drops the filter, "cgroup" runs without a memory cgroup (the fallback),
# "proxy-cap" lets the setup's proxy hold any number of connections, "overlay" copies the tree as
# before issue 43 (what a kernel that cannot mount the overlay falls back to).
WEAKENINGS = frozenset(
    {
        "net",
        "pid",
        "env",
        "nproc",
        "fsize",
        "tmpfs",
        "uid",
        "home",
        "session",
        "bwrap-env",
        "readonly",
        "seccomp",
        "cgroup",
        "proxy-cap",
        "overlay",
    }
)

# The whole environment bwrap starts with: the jail's own variables are set with --setenv after
# --clearenv, so this only lets bwrap and its init find nothing of the bot's.
BWRAP_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}

_HOST_DIRS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# Of the host's /etc, only what toolchains need to start: no passwd (ours is synthetic), no hosts, no
# resolver configuration, nothing with a secret.
_HOST_ETC = (
    "alternatives",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "ssl",
    "ca-certificates",
    "localtime",
)


_SYNTHETIC_ETC = ("passwd", "group", "hosts", "nsswitch.conf")


def interpreter_prefix() -> Path:
    """The installation the bot's Python was made from: a check's `python` (never the bot's venv)."""
    return Path(sys.base_prefix).resolve()


def path_dirs(*, deps: bool, cache: bool) -> str:
    prefix = interpreter_prefix()
    dirs = [f"{DEPS}/bin"] if deps else []
    dirs += [f"{CACHE}/bin"] if cache else []
    if not str(prefix).startswith("/usr/"):
        dirs.append(f"{prefix}/bin")
    dirs += ["/usr/local/bin", "/usr/bin", "/bin"]
    return ":".join(dirs)


@dataclass(slots=True)
class Layout:
    """What one jailed process sees, besides the read-only toolchains every jail has."""

    tree: Path | None  # mounted (or copied) at TREE before the command runs
    scratch: Path  # host directory for the synthetic /etc files
    tmpfs_bytes: int
    cache: Path | None = None
    deps: Path | None = None  # setup's installed packages, read-only
    deps_tmpfs: bool = False  # setup: a writable, capped DEPS
    helpers: Path | None = None  # bound read-only at HELPERS (the forwarder and the proxy's socket)
    shm_bytes: int = 64 << 20  # /dev/shm, a tmpfs of its own (POSIX semaphores and shared memory)
    env: dict[str, str] = field(default_factory=dict)
    weaken: frozenset[str] = frozenset()


class _UidPool:
    def __init__(self) -> None:
        self._free = list(range(JAIL_UID_BASE + JAIL_UID_COUNT - 1, JAIL_UID_BASE - 1, -1))
        self._lock = threading.Lock()

    def take(self) -> int | None:
        with self._lock:
            return self._free.pop() if self._free else None

    def give(self, uid: int) -> None:
        with self._lock:
            self._free.append(uid)


UIDS = _UidPool()


def _etc_files(scratch: Path, uid: int) -> Path:
    etc = scratch / f"etc-{uid}"
    files = {
        "passwd": f"root:x:0:0::/:/usr/sbin/nologin\ncheck:x:{uid}:{uid}::/tmp:/bin/sh\n",
        "group": f"root:x:0:\ncheck:x:{uid}:\n",
        "hosts": "127.0.0.1 localhost\n::1 localhost\n",
        "nsswitch.conf": "passwd: files\ngroup: files\nhosts: files\n",
    }
    if all(_holds(etc / name, text) for name, text in files.items()):
        return etc  # made by an earlier check of this scratch directory
    etc.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (etc / name).write_text(text)
        (etc / name).chmod(0o644)
    etc.chmod(0o755)
    return etc


def _holds(path: Path, text: str) -> bool:
    try:
        return path.read_text() == text
    except OSError:
        return False


def argv(
    bwrap: str,
    layout: Layout,
    script: str,
    args: Sequence[str],
    *,
    uid: int | None,
    rlimits: Rlimits,
    status_fd: int,
    seccomp_fd: int | None,
    mark_fd: int | None = None,
) -> tuple[list[str], list[str]]:
    """bwrap and its options, and the command it runs (`bash -c script beam-jail args...`); `uid`:
    the host uid (root mode); `seccomp_fd`: the compiled filter (None only where a test weakens it);
    `mark_fd`: where the overlay step says it mounted the tree (None: no overlay, the tree is copied)."""
    weaken = layout.weaken
    privileged = uid is not None
    # The overlay step (overlay.py) mounts with these, then drops them before anything else runs.
    # ("pid" binds the host's /proc, read-only: no nested user namespace can be mapped in it.)
    overlay = layout.tree is not None and mark_fd is not None and not {"overlay", "pid"} & weaken
    mounting = list(MOUNT_CAPS) if overlay else []
    cmd = [bwrap]
    if "net" in weaken:
        cmd += ["--share-net"]
    if privileged:
        cmd += ["--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
        cmd += [] if "net" in weaken else ["--unshare-net"]
        cmd += [] if "pid" in weaken else ["--unshare-pid"]
        keep = ["CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP", *mounting]
        cmd += ["--cap-drop", "ALL"] + [arg for cap in keep for arg in ("--cap-add", cap)]
    else:
        cmd += ["--unshare-user", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
        cmd += [] if "net" in weaken else ["--unshare-net"]
        cmd += [] if "pid" in weaken else ["--unshare-pid"]
        if overlay:
            # uid 0 of a namespace owning the jail's mounts, to mount the overlay; overlay.py then
            # enters a nested one as USERNS_UID, as `--uid` and `--disable-userns` do.
            cmd += ["--uid", "0", "--gid", "0", "--cap-drop", "ALL"]
            cmd += [arg for cap in mounting for arg in ("--cap-add", cap)]
        else:
            cmd += [
                "--uid",
                str(USERNS_UID),
                "--gid",
                str(USERNS_UID),
                "--disable-userns",
                "--cap-drop",
                "ALL",
            ]
    cmd += ["--die-with-parent"]
    cmd += [] if "session" in weaken else ["--new-session"]
    cmd += ["--json-status-fd", str(status_fd)]
    # Toolchains, read-only.
    cmd += ["--ro-bind", "/usr", "/usr"]
    for name in _HOST_DIRS:
        path = Path(name)
        if path.is_symlink():
            cmd += ["--symlink", os.readlink(path), name]
        elif path.is_dir():
            cmd += ["--ro-bind", name, name]
    prefix = interpreter_prefix()
    if not str(prefix).startswith("/usr/"):
        cmd += ["--ro-bind", str(prefix), str(prefix), *_open_parents(prefix)]
    for name in _HOST_ETC:
        if Path("/etc", name).exists():
            cmd += ["--ro-bind", f"/etc/{name}", f"/etc/{name}"]
    etc = _etc_files(layout.scratch, USERNS_UID if uid is None else uid)
    for name in _SYNTHETIC_ETC:
        cmd += ["--ro-bind", str(etc / name), f"/etc/{name}"]
    cmd += _open_parents(Path("/etc/passwd"))
    if "home" in weaken:
        cmd += ["--ro-bind", str(Path.home()), str(Path.home()), *_open_parents(Path.home())]
    # A fresh /proc of the jail's own pid namespace, a minimal /dev.
    cmd += ["--ro-bind", "/proc", "/proc"] if "pid" in weaken else ["--proc", "/proc"]
    cmd += ["--dev", "/dev"]
    if "readonly" not in weaken:
        cmd += ["--perms", "1777", "--size", str(layout.shm_bytes), "--tmpfs", "/dev/shm"]  # noqa: S108
    # Everything writable: one capped tmpfs (with /tmp on it).
    if "tmpfs" in weaken:
        cmd += ["--perms", "1777", "--tmpfs", SANDBOX]
    else:
        cmd += ["--perms", "1777", "--size", str(layout.tmpfs_bytes), "--tmpfs", SANDBOX]
    cmd += ["--symlink", SANDBOX_TMP, JAIL_TMP]
    cmd += ["--perms", "1777", "--dir", SANDBOX_TMP]
    if layout.tree is not None:
        # The whole tree in one bind (a bind never follows the symlinks inside it), `.git` masked: its
        # objects, config and the mirror's path stay out of reach; the overlay whites it out, the copy
        # leaves it out.
        cmd += ["--ro-bind", str(layout.tree), SOURCE, "--perms", "0777", "--dir", TREE]
        git = layout.tree / ".git"
        if git.is_dir() and not git.is_symlink():
            cmd += ["--tmpfs", f"{SOURCE}/.git"]
        elif git.exists() or git.is_symlink():
            cmd += ["--ro-bind", "/dev/null", f"{SOURCE}/.git"]
    if layout.cache is not None:
        cmd += ["--ro-bind", str(layout.cache), CACHE]
    if layout.deps_tmpfs:
        cmd += ["--perms", "1777", "--size", str(layout.tmpfs_bytes), "--tmpfs", DEPS]
    elif layout.deps is not None:
        cmd += ["--ro-bind", str(layout.deps), DEPS]
    if layout.helpers is not None:
        cmd += ["--ro-bind", str(layout.helpers), HELPERS]
    if overlay:
        cmd += ["--ro-bind", str(Path(__file__).with_name("overlay.py")), OVERLAY_HELPER]
    if "readonly" not in weaken:
        # Last, once every mount point exists: bwrap's own tmpfs for `/` and `/dev` are uncapped.
        cmd += ["--remount-ro", "/dev", "--remount-ro", "/"]
    if seccomp_fd is not None and not overlay:
        cmd += ["--seccomp", str(seccomp_fd)]
    cmd += ["--chdir", "/"]
    if "env" not in weaken:
        cmd += ["--clearenv"]
    for key, value in layout.env.items():
        cmd += ["--setenv", key, value]
    options, cmd = cmd, []
    # bash for our wrapper script, which names pipe fds above 9 (dash parses only one digit); the
    # check's own command line runs with /bin/sh.
    wrapper = ["/bin/bash", "-c", script, "beam-jail", *args]
    # The rlimits are set inside, by prlimit or the overlay step, rather than in a preexec of bwrap: a
    # preexec makes Python fork instead of vfork (about 10 ms of the start-up), and in user-namespace
    # mode an RLIMIT_NPROC set before bwrap would also cap the bot's own uid (the parent namespace's
    # count), so a fork bomb could starve the bot. Every process of the check inherits them.
    if overlay:
        # Before anything of the check's: mounts the tree, drops what mounting needed, loads the filter,
        # then does what setpriv and prlimit do below (two programs fewer in every check's start).
        python = str(interpreter_prefix() / "bin" / "python3")
        filter_fd = "-" if seccomp_fd is None else str(seccomp_fd)
        mode = "root" if privileged else "user"
        become = "uid" if privileged and "uid" not in weaken else "-"
        limits = ",".join(f"{name}={value}" for name, value in rlimits.values(weaken)) or "-"
        step = [OVERLAY_HELPER, mode, str(uid or 0), filter_fd, str(mark_fd), become, limits]
        return options, [python, "-I", "-S", *step, "--", *wrapper]
    if privileged and "uid" not in weaken:
        cmd += [_system_tool("setpriv"), f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]
        cmd += ["--no-new-privs", "--bounding-set=-all", "--inh-caps=-all", "--"]
    cmd += [_system_tool("prlimit"), *rlimits.args(weaken), "--"]
    return options, [*cmd, *wrapper]


def _system_tool(name: str) -> str:
    """The host's own `name`, by its full path: looked up on the jail's PATH, a `setpriv` or `prlimit`
    the setup put in /deps/bin (first there) would run instead, with the check's limits in its hands."""
    return shutil.which(name, path=BWRAP_ENV["PATH"]) or name


@dataclass(frozen=True, slots=True)
class Launch:
    """How to start one jail: `argv` (bwrap, or the cgroup's entry prefix then bwrap), the descriptors
    to pass (the caller closes them once the process has them), and the check's cgroup, if any."""

    argv: list[str]
    fds: tuple[int, ...]
    cgroup: CheckCgroup | None

    def close(self) -> None:
        for fd in self.fds:
            with contextlib.suppress(OSError):
                os.close(fd)


def launch(
    bwrap: str,
    layout: Layout,
    script: str,
    args: Sequence[str],
    *,
    uid: int | None,
    rlimits: Rlimits,
    status_fd: int,
    cgroups: Cgroups,
    mark_fd: int | None = None,
) -> Launch:
    """Everything `argv` needs, made: the filter and the arguments in sealed memory files, the cgroup."""
    weaken = layout.weaken
    use_cgroup = cgroups.base is not None and "cgroup" not in weaken
    fds: list[int] = []
    cgroup: CheckCgroup | None = None
    try:
        seccomp_fd = None
        if "seccomp" not in weaken:
            seccomp_fd = _memory_file("beam-seccomp", syscall_filter.compiled(with_cgroup=use_cgroup))
            fds.append(seccomp_fd)
        options, command = argv(
            bwrap,
            layout,
            script,
            args,
            uid=uid,
            rlimits=rlimits,
            status_fd=status_fd,
            seccomp_fd=seccomp_fd,
            mark_fd=mark_fd,
        )
        # bwrap reads its options from this file: its command line, which every process of the jail
        # can read in /proc/1/cmdline, names no path of the host's (the command names only the jail's).
        args_fd = _memory_file("beam-bwrap-args", b"".join(a.encode() + b"\0" for a in options[1:]))
        fds.append(args_fd)
        cmd = [options[0], "--args", str(args_fd), "--", *command]
        if use_cgroup:
            cgroup = cgroups.make(rlimits.memory_bytes)
            cmd = [*cgroup.enter_argv(), *cmd]
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    return Launch(cmd, tuple(fds), cgroup)


def _memory_file(name: str, data: bytes) -> int:
    """A file only in memory, read from its start by bwrap (no size limit of a pipe, nothing on disk)."""
    fd = os.memfd_create(name, os.MFD_CLOEXEC)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _open_parents(path: Path) -> list[str]:
    # bwrap (privileged) makes a mount point's missing parents 0700: open them to the jail's uid.
    return [arg for parent in reversed(path.parents[:-1]) for arg in ("--chmod", "0755", str(parent))]


@dataclass(frozen=True, slots=True)
class Rlimits:
    processes: int
    memory_bytes: int
    cpu_seconds: int
    file_bytes: int
    open_files: int

    def args(self, weaken: frozenset[str]) -> list[str]:
        """prlimit's options: `--NAME=V:V`."""
        return [f"--{name}={value}:{value}" for name, value in self.values(weaken)]

    def values(self, weaken: frozenset[str]) -> list[tuple[str, int]]:
        """Each limit by prlimit's name for it, but those `weaken` names (a test proving each one)."""
        wanted = {
            "nproc": (resource.RLIMIT_NPROC, self.processes),
            "as": (resource.RLIMIT_AS, self.memory_bytes),
            "cpu": (resource.RLIMIT_CPU, self.cpu_seconds),
            "fsize": (resource.RLIMIT_FSIZE, self.file_bytes),
            "nofile": (resource.RLIMIT_NOFILE, self.open_files),
            "core": (resource.RLIMIT_CORE, 0),
        }
        out = []
        for name, (which, value) in wanted.items():
            if name in weaken:
                continue
            # The jail can only lower a limit: never ask for more than the bot's own hard limit.
            hard = resource.getrlimit(which)[1]
            value = value if hard == resource.RLIM_INFINITY else min(value, hard)
            out.append((name, value))
        return out
