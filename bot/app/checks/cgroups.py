"""One memory cgroup per jailed process: the single cap over anonymous, tmpfs, memfd and kernel pages.

rlimits cannot do this: RLIMIT_AS is per process and ignores tmpfs and memfd pages, and a tmpfs size
caps one mount. A memory cgroup counts every page the check's processes fault, whatever holds it, and
the kernel's own allocations for them (socket buffers, pipe buffers) too (docs/checks.md, "Memory").
The bot needs a cgroup it may write below:

- cgroup v2: its own cgroup, delegated (a systemd unit with `Delegate=yes`, a container whose
  /sys/fs/cgroup is writable). v2 lets no cgroup hold both processes and children with controllers,
  so the bot first moves its own processes into a leaf, `beam-bot`, then enables `memory` below.
- cgroup v1: the memory hierarchy's directory of its own cgroup, writable (root on a host, say).

Where neither is there (a default Docker container as a non-root user), `Cgroups.find()` says why and
checks are off (probe.no_memory_cgroup): rlimits and tmpfs sizes bound no socket queue, pipe buffer
or other kernel memory, so there is no honest fallback.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import time
from dataclasses import dataclass
from pathlib import Path

_PREFIX = "beam-check-"
_LEAF = "beam-bot"


@dataclass(frozen=True, slots=True)
class Usage:
    peak_bytes: int | None
    oom_kills: int


@dataclass(frozen=True, slots=True)
class CheckCgroup:
    """One check's cgroup: the bwrap command is started inside it with `enter_argv`."""

    path: Path
    version: int

    def enter_argv(self) -> list[str]:
        """A prefix that moves the process into the cgroup before it execs the rest (no Python
        preexec, which would make the bot fork instead of vfork)."""
        return ["/bin/sh", "-c", 'echo $$ >"$0" && exec "$@"', str(self.path / "cgroup.procs")]

    def usage(self) -> Usage:
        peak_file = "memory.max_usage_in_bytes" if self.version == 1 else "memory.peak"
        peak: int | None = None
        with contextlib.suppress(OSError, ValueError):
            peak = int((self.path / peak_file).read_text().strip())
        kills = 0
        events = "memory.oom_control" if self.version == 1 else "memory.events"
        with contextlib.suppress(OSError, ValueError):
            for line in (self.path / events).read_text().splitlines():
                name, _, value = line.partition(" ")
                if name == "oom_kill":
                    kills = int(value)
        return Usage(peak, kills)

    def remove(self) -> None:
        """Gone once its processes are (the jail's pid namespace dies with bwrap): tries for about a
        second. The first waits are short: the last processes of a jail are usually gone a millisecond
        or two after bwrap, and a check's outcome waits for this (a first wait of 20 ms was a sixth of
        a small check's start)."""
        waited, wait = 0.0, 0.001
        while True:
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                if waited >= 1.0:
                    return
                time.sleep(wait)
                waited, wait = waited + wait, min(wait * 2, 0.02)


@dataclass(frozen=True, slots=True)
class Cgroups:
    """Where per-check cgroups are made (`base`), or why there is none (`reason`)."""

    base: Path | None
    version: int
    reason: str

    @staticmethod
    def find(proc_self: Path = Path("/proc/self")) -> Cgroups:
        try:
            lines = (proc_self / "cgroup").read_text().splitlines()
            mounts = (proc_self / "mountinfo").read_text().splitlines()
        except OSError as exc:
            return Cgroups(None, 0, f"the process's cgroup cannot be read ({exc})")
        v1 = _v1(lines, mounts)
        if v1 is not None:
            return v1
        return _v2(lines, mounts)

    def make(self, memory_bytes: int) -> CheckCgroup:
        """A new cgroup capped at `memory_bytes`, swap included."""
        assert self.base is not None
        path = self.base / f"{_PREFIX}{os.getpid()}-{next(_SEQ)}"
        path.mkdir(mode=0o755)
        try:
            if self.version == 1:
                (path / "memory.limit_in_bytes").write_text(str(memory_bytes))
                swap = path / "memory.memsw.limit_in_bytes"
                if swap.exists():
                    swap.write_text(str(memory_bytes))
            else:
                (path / "memory.max").write_text(str(memory_bytes))
                for name, value in (("memory.swap.max", "0"), ("memory.oom.group", "1")):
                    with contextlib.suppress(FileNotFoundError):
                        (path / name).write_text(value)
        except OSError:
            with contextlib.suppress(OSError):
                path.rmdir()
            raise
        return CheckCgroup(path, self.version)

    def sweep(self) -> None:
        """Remove the empty cgroups of checks whose bot process is gone (a crash, a kill -9)."""
        if self.base is None:
            return
        for child in self.base.glob(f"{_PREFIX}*"):
            pid = child.name[len(_PREFIX) :].partition("-")[0]
            if pid.isdigit() and not Path(f"/proc/{pid}").exists():
                with contextlib.suppress(OSError):
                    child.rmdir()


_SEQ = itertools.count(1)


def _mount_dir(mounts: list[str], fstype: str, option: str | None, path: str) -> Path | None:
    """The directory of cgroup `path` in the mount of `fstype` (with super option `option`)."""
    for line in mounts:
        fields = line.split(" ")
        try:
            dash = fields.index("-")
        except ValueError:
            continue
        if fields[dash + 1] != fstype:
            continue
        if option is not None and option not in fields[dash + 3].split(","):
            continue
        root, point = fields[3], fields[4]
        relative = os.path.relpath(path, root) if root != "/" else path.lstrip("/")
        if relative.startswith(".."):
            continue  # our cgroup is not below this mount's root (another cgroup namespace)
        return Path(point) / relative if relative not in ("", ".") else Path(point)
    return None


def _writable(base: Path) -> bool:
    probe = base / f"{_PREFIX}probe-{os.getpid()}"
    try:
        probe.mkdir()
    except OSError:
        return False
    with contextlib.suppress(OSError):
        probe.rmdir()
    return True


def _v1(lines: list[str], mounts: list[str]) -> Cgroups | None:
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "memory" not in controllers.split(","):
            continue
        base = _mount_dir(mounts, "cgroup", "memory", path)
        if base is None or not (base / "memory.limit_in_bytes").exists():
            return None
        if not _writable(base):
            return Cgroups(None, 1, f"the memory cgroup {base} is not writable by this user")
        return Cgroups(base, 1, f"a cgroup v1 memory cap ({base})")
    return None


def _v2(lines: list[str], mounts: list[str]) -> Cgroups:
    path = next((line[3:] for line in lines if line.startswith("0::")), None)
    base = _mount_dir(mounts, "cgroup2", None, path) if path is not None else None
    if base is None:
        return Cgroups(None, 0, "no cgroup v2 hierarchy is mounted where this process can see it")
    if base.name == _LEAF:  # another process of the bot adopted the cgroup first: checks go beside it
        base = base.parent
    try:
        controllers = (base / "cgroup.controllers").read_text().split()
    except OSError as exc:
        return Cgroups(None, 2, f"the cgroup {base} cannot be read ({exc})")
    if "memory" not in controllers:
        return Cgroups(None, 2, f"the memory controller is not delegated to the cgroup {base}")
    if "memory" in (base / "cgroup.subtree_control").read_text().split():
        # Already delegated for children (the bot runs in a leaf of its own below it, or at the root).
        ok = _writable(base)
    else:
        ok = _adopt_leaf(base)
    if not ok:
        return Cgroups(None, 2, f"the cgroup {base} is not delegated to this user (writable)")
    return Cgroups(base, 2, f"a cgroup v2 memory cap ({base})")


def _adopt_leaf(base: Path) -> bool:
    """Move this cgroup's processes into the leaf `beam-bot` and enable `memory` for children."""
    leaf = base / _LEAF
    try:
        leaf.mkdir(exist_ok=True)
        for pid in (base / "cgroup.procs").read_text().split():
            with contextlib.suppress(ProcessLookupError):
                (leaf / "cgroup.procs").write_text(pid)
        (base / "cgroup.subtree_control").write_text("+memory")
    except OSError:
        return False
    return True
