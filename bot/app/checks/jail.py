"""Run a repository's checks on a tree, each in a fresh bubblewrap jail (docs/checks.md, "The jail").

The interface (stable; the flow codes against it):

    CheckSpec(name, run)            run: a shell command line, run with /bin/sh -c in the tree
    JailLimits(timeout_s=600, memory_bytes=2 GiB, processes=256, cpu_seconds=1200, file_bytes=1 GiB,
               open_files=1024, tmpfs_bytes=1 GiB, shm_bytes=64 MiB, output_bytes=1 MiB, kill_grace_s=5)

`memory_bytes` is one cap over everything the check holds (its memory cgroup: without one the jail
is unavailable) and each process's address-space limit.
    CheckOutcome(name, status: "passed" | "failed" | "timed_out" | "error", exit_code, duration_s,
                 output_tail, output_truncated)
    JailStatus(available, reason)   reason: one sentence for the log, /readyz and the approval comment
    jail_status() -> JailStatus     probed once per process
    await run_checks(tree, checks, *, limits, cache_dir=None, setup=None, allowed_hosts=(), scratch)
        -> list[CheckOutcome]

- Raises BeamError BEM-350 when the jail is unavailable: nothing ever runs outside it.
- With `setup`, the first outcome is the setup's, named "setup"; the checks follow only if it passed
  (otherwise the list holds the setup's outcome alone). Without `setup`, one outcome per check, in order.
- "error": the jail could not be built, or (where it is copied) the tree did not fit in the jail's
  tmpfs; "failed": the check ran and exited non-zero (or was killed by an rlimit); "timed_out":
  `timeout_s` passed.
- `scratch` is a host directory of the caller's (made if missing, emptied of what we put there): the
  synthetic /etc files, the setup's installed packages, the proxy's socket. The tree's writable layer is
  not there: it is made inside the jail, on its capped tmpfs.

Inside the jail: the tree is the working directory /sandbox/tree (no `.git`), an overlay whose lower
layer is the tree, read-only, and whose upper layer is on the jail's capped tmpfs (overlay.py; where
the kernel cannot mount it, a copy on that tmpfs, said once in the log), HOME and TMPDIR
are /tmp (on the same capped tmpfs), `python` is the installation the bot's interpreter was made from
(`sys.base_prefix`, never the bot's venv), `cache_dir` is read-only at /cache (/cache/bin on PATH,
/cache/site on PYTHONPATH), and what `setup` installed with pip (run with PIP_USER=1 and
PYTHONUSERBASE=/deps) is read-only at /deps, on the checks' user site.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import shutil
import socket
import tarfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Literal

import anyio.to_thread

from bot.app.checks import archive as deps_archive
from bot.app.checks import bwrap, spawn
from bot.app.checks import probe as jail_probe
from bot.app.checks.bwrap import CACHE, DEPS, HELPERS, JAIL_TMP, SOURCE, TREE, Layout
from bot.beam.errors import BeamError

log = logging.getLogger("beam.checks")

Status = Literal["passed", "failed", "timed_out", "error"]
SETUP_NAME = "setup"
FORWARD_PORT = 3128
_COPY_FAILED = 125


@dataclass(frozen=True, slots=True)
class CheckSpec:
    name: str
    run: str


@dataclass(frozen=True, slots=True)
class JailLimits:
    timeout_s: float = 600
    memory_bytes: int = 2 << 30
    processes: int = 256
    cpu_seconds: int = 1200
    file_bytes: int = 1 << 30
    open_files: int = 1024
    tmpfs_bytes: int = 1 << 30
    shm_bytes: int = 64 << 20
    output_bytes: int = 1 << 20
    kill_grace_s: float = 5


@dataclass(frozen=True, slots=True)
class CheckOutcome:
    name: str
    status: Status
    exit_code: int | None
    duration_s: float
    output_tail: str
    output_truncated: bool


@dataclass(frozen=True, slots=True)
class JailStatus:
    available: bool
    reason: str
    memory_cgroup: bool = False  # one cgroup caps a check's memory (always so where `available`)


def jail_status() -> JailStatus:
    probe = jail_probe.probe()
    return JailStatus(probe.ok, probe.reason, probe.cgroups.base is not None)


# The fallback copy, in bash (the wrapper's shell). Where overlay.py mounted the tree it detached
# SOURCE first, leaving its empty mount point: no entry, nothing copied, no `tar` started. Every
# top-level entry but `.git`, through a tar pipe, which keeps modes, times and symlinks (owners the
# jail's uid cannot keep, and need not) and, reading and writing in two processes, is about 25% faster
# than one `cp` on two cores. `command -p`: the system's tar, never one the setup left first on the
# checks' PATH (/deps/bin).
_COPY = (
    "umask 022; set -o pipefail; shopt -s dotglob nullglob extglob\n"
    f"cd {SOURCE} && entries=(!(.git)) || exit {_COPY_FAILED}\n"
    '(( ${#entries[@]} == 0 )) || command -p tar -cf - -- "${entries[@]}"'
    f" | command -p tar -C {TREE} -xf - --no-same-owner || exit {_COPY_FAILED}\n"
)
_fallback_said = False


def _tree_script(mark_fd: int, status_fd: int) -> str:
    # `copied`: the tree is in place (mounted, or copied where the overlay could not be mounted).
    return (
        f"exec {status_fd}>&-\n"
        f"{_COPY}printf copied >&{mark_fd} && exec {mark_fd}>&-\n"
        f"cd {TREE} || exit {_COPY_FAILED}\n"
    )


def _env(*, deps: bool, cache: bool) -> dict[str, str]:
    env = {
        "PATH": bwrap.path_dirs(deps=deps, cache=cache),
        "HOME": JAIL_TMP,
        "TMPDIR": JAIL_TMP,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
    }
    if deps:
        env["PYTHONUSERBASE"] = DEPS
    if cache:
        env["PYTHONPATH"] = f"{CACHE}/site"
    return env


def _outcome(name: str, done: spawn.Finished) -> CheckOutcome:
    text = done.tail.decode("utf-8", "replace")
    status: Status
    if not done.started:
        status, code = "error", None
        text = f"The jail could not be built (BEM-351).\n{text}"
    elif done.timed_out:
        status, code = "timed_out", None
    elif b"copied" not in done.marks:
        status, code = "error", None
        why = "The tree could not be put in the jail (where it is copied: is it larger than its tmpfs?)"
        text = f"{why}\n{text}"
    else:
        code = done.exit_code
        status = "passed" if code == 0 else "failed"
    return CheckOutcome(name, status, code, round(done.duration_s, 3), text, done.truncated)


def _say_fallback(layout: Layout, marks: bytes) -> None:
    """Once per process: the tree was copied because the overlay could not be mounted (overlay.py
    says why in the check's output), so every check costs time in proportion to its tree."""
    global _fallback_said
    mounted = b"overlay" in marks or b"copied" not in marks  # not in place at all: the outcome says so
    if layout.tree is None or {"overlay", "pid"} & layout.weaken or mounted or _fallback_said:
        return
    _fallback_said = True
    log.warning("checks: the tree's overlay could not be mounted here, so each check copies its tree")


async def _jailed(
    layout: Layout,
    script_for: Callable[[int, int], str],
    args: Sequence[str],
    limits: JailLimits,
    *,
    extra_fds: tuple[int, ...] = (),
) -> spawn.Finished:
    """Run `script_for(mark_fd, status_fd)` in a jail made of `layout`; every check and setup goes here."""
    probe = jail_probe.probe()
    if not probe.ok or probe.bwrap is None:
        for fd in extra_fds:
            os.close(fd)
        raise BeamError("BEM-350", probe.reason)
    uid = bwrap.UIDS.take() if probe.privileged else None
    if probe.privileged and uid is None:
        for fd in extra_fds:
            os.close(fd)
        raise BeamError("BEM-352", f"at most {bwrap.JAIL_UID_COUNT} checks run at once in one process")
    status_fd, mark_fd = os.pipe(), os.pipe()
    started: bwrap.Launch | None = None
    try:
        try:
            started = bwrap.launch(
                probe.bwrap,
                layout,
                script_for(mark_fd[1], status_fd[1]),
                args,
                uid=uid,
                rlimits=bwrap.Rlimits(
                    processes=limits.processes,
                    memory_bytes=limits.memory_bytes,
                    cpu_seconds=limits.cpu_seconds,
                    file_bytes=limits.file_bytes,
                    open_files=limits.open_files,
                ),
                status_fd=status_fd[1],
                cgroups=probe.cgroups,
                mark_fd=mark_fd[1] if layout.tree is not None else None,
            )
        except OSError as exc:  # the check's cgroup (or a memory file) could not be made: nothing runs
            for fd in (status_fd[0], status_fd[1], mark_fd[0], mark_fd[1], *extra_fds):
                os.close(fd)
            why = f"beam: the jail's memory cgroup or options could not be made ({exc})".encode()
            return spawn.Finished(False, None, False, 0.0, why, False, b"")
        done = await spawn.run(
            started.argv,
            status_fd=status_fd,
            mark_fd=mark_fd,
            extra_fds=(*extra_fds, *started.fds),
            timeout_s=limits.timeout_s,
            grace_s=limits.kill_grace_s,
            output_bytes=limits.output_bytes,
            env=None if "bwrap-env" in layout.weaken else bwrap.BWRAP_ENV,
        )
        _say_fallback(layout, done.marks)
        if started.cgroup is not None and started.cgroup.usage().oom_kills:
            cap = limits.memory_bytes >> 20
            note = f"\nbeam: the check reached its memory cap ({cap} MiB) and was killed"
            done = dataclasses.replace(done, tail=done.tail + note.encode())
        return done
    except BaseException:
        if started is None:
            for fd in (status_fd[0], status_fd[1], mark_fd[0], mark_fd[1], *extra_fds):
                with contextlib.suppress(OSError):
                    os.close(fd)
        raise
    finally:
        if started is not None and started.cgroup is not None:
            await anyio.to_thread.run_sync(started.cgroup.remove)
        if uid is not None:
            bwrap.UIDS.give(uid)


async def run_checks(
    tree: Path,
    checks: Sequence[CheckSpec],
    *,
    limits: JailLimits,
    cache_dir: Path | None = None,
    setup: str | None = None,
    allowed_hosts: Sequence[str] = (),
    scratch: Path,
) -> list[CheckOutcome]:
    return await _run_checks(
        tree,
        checks,
        limits=limits,
        cache_dir=cache_dir,
        setup=setup,
        allowed_hosts=allowed_hosts,
        scratch=scratch,
    )


async def _run_checks(
    tree: Path,
    checks: Sequence[CheckSpec],
    *,
    limits: JailLimits,
    cache_dir: Path | None = None,
    setup: str | None = None,
    allowed_hosts: Sequence[str] = (),
    scratch: Path,
    weaken: frozenset[str] = frozenset(),
) -> list[CheckOutcome]:
    """`run_checks`, with the weakenings a test asks for (bwrap.WEAKENINGS) to prove each limit."""
    status = jail_status()
    if not status.available:
        raise BeamError("BEM-350", status.reason)
    tree, cache = await anyio.to_thread.run_sync(_prepare, tree, cache_dir, scratch)
    outcomes: list[CheckOutcome] = []
    deps: Path | None = None
    try:
        if setup is not None:
            first, deps = await _setup(tree, setup, limits, cache, allowed_hosts, scratch, weaken)
            outcomes.append(first)
            if first.status != "passed":
                return outcomes
        env = _env(deps=deps is not None, cache=cache is not None)
        for check in checks:
            layout = Layout(
                tree,
                scratch,
                limits.tmpfs_bytes,
                cache=cache,
                deps=deps,
                shm_bytes=limits.shm_bytes,
                env=env,
                weaken=weaken,
            )
            done = await _jailed(
                layout,
                lambda mark, status: _tree_script(mark, status) + 'exec /bin/sh -c "$1"\n',
                [check.run],
                limits,
            )
            outcomes.append(_outcome(check.name, done))
    finally:
        if deps is not None:
            await anyio.to_thread.run_sync(partial(shutil.rmtree, deps, ignore_errors=True))
    return outcomes


def _prepare(tree: Path, cache_dir: Path | None, scratch: Path) -> tuple[Path, Path | None]:
    if not tree.is_dir():
        raise BeamError("BEM-353", f"{tree} is not a directory")
    scratch.mkdir(parents=True, exist_ok=True)
    cache = cache_dir.resolve() if cache_dir is not None and cache_dir.is_dir() else None
    return tree.resolve(), cache


def _helpers(scratch: Path) -> Path:
    helpers = scratch / "helpers"
    shutil.rmtree(helpers, ignore_errors=True)
    helpers.mkdir(mode=0o755)
    for name in ("forward.py", "settle.py"):
        shutil.copyfile(Path(__file__).with_name(name), helpers / name)
        (helpers / name).chmod(0o644)
    return helpers


def _receive(channel: socket.socket, path: Path, cap: int) -> bool:
    """The bot's end of the setup's channel (in a worker thread): once the supervisor says the setup
    has settled, make the archive pipe, hand over its write end, and copy what comes into `path` up
    to `cap` bytes (the rest is read and dropped). Under the cap? (True also when nothing came: the
    jail ended first, and the missing `packed` mark says so.)"""
    with channel:
        said = b""
        while len(said) < 16 and (data := channel.recv(16)):
            said += data
            if said == b"settled":
                break
        if said != b"settled":
            return True
        read, write = os.pipe()
        try:
            socket.send_fds(channel, [b"pipe"], [write])
        finally:
            os.close(write)
    written = 0
    with os.fdopen(read, "rb", buffering=0) as pipe, path.open("wb") as out:
        while data := pipe.read(1 << 16):
            if written + len(data) <= cap:
                out.write(data)
            written += len(data)
    return written <= cap


async def _setup(
    tree: Path,
    command: str,
    limits: JailLimits,
    cache: Path | None,
    allowed_hosts: Sequence[str],
    scratch: Path,
    weaken: frozenset[str],
) -> tuple[CheckOutcome, Path | None]:
    """Run `command` in a jail whose only network is the proxy; what it installs under /deps is packed
    to the host through a pipe (capped), unpacked into `scratch/deps`, and bound read-only for checks.

    The wrapper execs the supervisor (settle.py) before the setup starts; the archive pipe is made
    only once the supervisor says every setup process is gone, and reaches only its `tar`."""
    from bot.app.checks.proxy import AllowlistProxy

    helpers = await anyio.to_thread.run_sync(_helpers, scratch)
    proxy: AllowlistProxy | None = None
    env = _env(deps=True, cache=cache is not None)
    env.update(
        PIP_USER="1", PIP_BREAK_SYSTEM_PACKAGES="1", PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1"
    )
    if allowed_hosts:
        proxy = AllowlistProxy(allowed_hosts, max_connections=1 << 20 if "proxy-cap" in weaken else 64)
        try:
            await proxy.start(helpers / "proxy.sock")
        except OSError as exc:
            raise BeamError("BEM-355", str(exc)) from exc
        url = f"http://127.0.0.1:{FORWARD_PORT}"
        env.update(HTTP_PROXY=url, HTTPS_PROXY=url, http_proxy=url, https_proxy=url, NO_PROXY="", no_proxy="")
    archive = scratch / "deps.tar"
    ours, theirs = socket.socketpair()
    jail_end = theirs.detach()

    def script(mark: int, status: int) -> str:
        closed = f"{mark}>&- {jail_end}>&-"
        forward = (
            f"python3 {HELPERS}/forward.py {FORWARD_PORT} {HELPERS}/proxy.sock {closed} "
            f"|| {{ echo 'beam: the setup proxy forwarder did not start' >&2; exit {_COPY_FAILED}; }}\n"
            if proxy is not None
            else ""
        )
        return (
            f"exec {status}>&-\n"
            f"{_COPY}"
            f"cd {TREE} || exit {_COPY_FAILED}\n{forward}printf copied >&{mark}\n"
            # No process of the setup's exists yet: the supervisor replaces this shell before it starts.
            f'exec python3 -I {HELPERS}/settle.py {jail_end} {mark} {DEPS} "$1"\n'
        )

    layout = Layout(
        tree,
        scratch,
        limits.tmpfs_bytes,
        cache=cache,
        deps_tmpfs=True,
        helpers=helpers,
        shm_bytes=limits.shm_bytes,
        env=env,
        weaken=weaken,
    )
    drained = asyncio.ensure_future(anyio.to_thread.run_sync(_receive, ours, archive, limits.tmpfs_bytes))
    try:
        done = await _jailed(layout, script, [command], limits, extra_fds=(jail_end,))
    except BaseException:
        await drained  # the channel's other end and the pipe's writers are gone: the thread is at its end
        raise
    finally:
        if proxy is not None:
            await proxy.close()
    fits = await drained
    outcome = _outcome(SETUP_NAME, done)
    try:
        if outcome.status != "passed":
            return outcome, None
        if b"packed" not in done.marks or not fits:
            why = (
                "what the setup installed is larger than the jail's tmpfs (BEM-356)"
                if not fits
                else "what the setup installed could not be packed"
            )
            return _replace(outcome, status="error", output_tail=f"{outcome.output_tail}\n{why}"), None
        deps = scratch / "deps"
        try:
            await anyio.to_thread.run_sync(deps_archive.unpack, archive, deps)
        except (tarfile.TarError, OSError) as exc:
            why = f"what the setup installed was refused: {exc}"
            return _replace(outcome, status="error", output_tail=f"{outcome.output_tail}\n{why}"), None
        return outcome, deps
    finally:
        with contextlib.suppress(FileNotFoundError):
            archive.unlink()
        shutil.rmtree(helpers, ignore_errors=True)


def _replace(outcome: CheckOutcome, *, status: Status, output_tail: str) -> CheckOutcome:
    return CheckOutcome(
        outcome.name, status, outcome.exit_code, outcome.duration_s, output_tail, outcome.output_truncated
    )
