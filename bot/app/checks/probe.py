"""Whether a check can run here: the probe that starts `true` in the same jail a check gets, once per
process, and the sentence the log, `/readyz` and every approval comment show when it cannot.

Apart from bwrap.py (which builds a jail's command line) because it is the one consumer of that
command line that decides for the whole process, and the place an operator's question ("why are my
checks off?") is answered.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from bot.app.checks import syscall_filter
from bot.app.checks.bwrap import BWRAP_ENV, JAIL_UID_BASE, JAIL_UID_COUNT, Launch, Layout, Rlimits, launch
from bot.app.checks.cgroups import Cgroups


@dataclass(frozen=True, slots=True)
class Probe:
    bwrap: str | None
    privileged: bool
    ok: bool
    reason: str
    cgroups: Cgroups = field(default_factory=lambda: Cgroups(None, 0, "not probed"))


@cache
def probe() -> Probe:
    """Can a jail be made here? Runs `true` in the same jail a check gets, once per process."""
    bwrap = shutil.which("bwrap")
    privileged = os.geteuid() == 0
    if bwrap is None:
        return Probe(None, privileged, False, "bubblewrap (bwrap) is not installed, so checks are off")
    for tool in ("setpriv", "prlimit", "bash", "tar") if privileged else ("prlimit", "bash", "tar"):
        if shutil.which(tool) is None:
            return Probe(bwrap, privileged, False, f"{tool} is not installed, so checks are off")
    cgroups = Cgroups.find()
    cgroups.sweep()
    try:
        syscall_filter.compiled(with_cgroup=cgroups.base is not None)
    except syscall_filter.FilterUnavailable as exc:
        return Probe(bwrap, privileged, False, f"{exc}, so checks are off")
    scratch = Path(_probe_dir())
    uid = JAIL_UID_BASE + JAIL_UID_COUNT - 1 if privileged else None
    read, write = os.pipe()
    started: Launch | None = None
    try:
        limits = Rlimits(processes=8, memory_bytes=1 << 30, cpu_seconds=10, file_bytes=1 << 20, open_files=64)
        layout = Layout(None, scratch, 1 << 20)
        started = launch(
            bwrap, layout, "exit 0", (), uid=uid, rlimits=limits, status_fd=write, cgroups=cgroups
        )
        done = subprocess.run(
            started.argv,
            pass_fds=(write, *started.fds),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=20,
            check=False,
            env=BWRAP_ENV,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Probe(bwrap, privileged, False, f"bwrap could not be started ({exc}), so checks are off")
    finally:
        os.close(write)
        os.close(read)
        if started is not None:
            started.close()
            if started.cgroup is not None:
                started.cgroup.remove()
        shutil.rmtree(scratch, ignore_errors=True)
    if done.returncode != 0:
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        why = said[-1] if said else f"exit status {done.returncode}"
        return Probe(
            bwrap,
            privileged,
            False,
            f"bwrap cannot create the jail's namespaces here ({why}), so checks are off",
        )
    if cgroups.base is None:
        return Probe(bwrap, privileged, False, no_memory_cgroup(cgroups.reason), cgroups)
    mode = "a dedicated uid, no user namespace" if privileged else "an unprivileged user namespace"
    reason = f"checks run in a bubblewrap jail ({bwrap}, {mode}; memory capped by {cgroups.reason})"
    return Probe(bwrap, privileged, True, reason, cgroups)


def no_memory_cgroup(why: str) -> str:
    """Why checks are off without a memory cgroup, and what the operator does about it: the sentence
    the log, `/readyz` and every approval comment of a repository with checks show.

    Without a cgroup nothing bounds the kernel memory a check holds: a socket's queue, a pipe's
    buffers, in-flight descriptors are counted by no rlimit, and processes times descriptors times
    buffers is gigabytes. So no fallback runs checks half-bounded (docs/checks.md, "Memory")."""
    return (
        f"the bot has no memory cgroup to cap each check with ({why}), so checks are off: without one,"
        " a check's socket buffers and pipes could hold any amount of the host's memory; give the bot"
        " a cgroup it may write below (systemd Delegate=yes, or a writable cgroup v2 mount in its"
        " container, as docs/checks.md#memory shows for Docker, compose and Kubernetes)"
    )


def _probe_dir() -> str:
    return tempfile.mkdtemp(prefix="beam-jail-probe-")
