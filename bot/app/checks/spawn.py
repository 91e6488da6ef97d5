"""Run one bwrap command to its end: output read as it comes (only a capped tail kept), a wall-clock
timeout that takes the whole jail down, and what bwrap's status fd says about how it ended.

The kill: SIGTERM to bwrap's process group (bwrap runs in a session of its own), SIGKILL after a
grace. The jail's pid 1 is bwrap's, started with `--die-with-parent`, and when the pid 1 of a pid
namespace dies the kernel kills every other process in it, so a process that ignores SIGTERM, or one
that made itself a daemon, goes with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
from dataclasses import dataclass

_CHUNK = 1 << 16


@dataclass(frozen=True, slots=True)
class Finished:
    started: bool  # bwrap reported its child: the jail was built
    exit_code: int | None
    timed_out: bool
    duration_s: float
    tail: bytes
    truncated: bool
    marks: bytes  # what the jail wrote to the mark fd (e.g. "copied" once the tree is in place)


class _Tail:
    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.buf = bytearray()
        self.seen = 0

    def add(self, data: bytes) -> None:
        self.seen += len(data)
        self.buf += data
        if len(self.buf) > self.cap:
            del self.buf[: len(self.buf) - self.cap]


def _read_all(fd: int) -> bytes:
    """A small pipe whose writers are all gone (the jail is dead): read it to its end."""
    out = bytearray()
    os.set_blocking(fd, False)
    while len(out) < _CHUNK:
        try:
            data = os.read(fd, _CHUNK)
        except BlockingIOError:
            break
        if not data:
            break
        out += data
    return bytes(out)


def _status(raw: bytes) -> tuple[bool, int | None]:
    started, code = False, None
    for line in raw.decode("utf-8", "replace").splitlines():
        with contextlib.suppress(ValueError):
            item = json.loads(line)
            if isinstance(item, dict):
                started = started or "child-pid" in item
                if isinstance(item.get("exit-code"), int):
                    code = item["exit-code"]
    return started, code


def _killpg(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


async def run(
    cmd: list[str],
    *,
    status_fd: tuple[int, int],
    mark_fd: tuple[int, int],
    extra_fds: tuple[int, ...] = (),
    timeout_s: float,
    grace_s: float,
    output_bytes: int,
    env: dict[str, str] | None,
) -> Finished:
    """Run `cmd`; `status_fd`/`mark_fd` are (read, write) pipes whose write ends the jail inherits;
    `env` is the whole environment bwrap starts with (None: the bot's, only where a test weakens it).

    The write ends, and `extra_fds`, are closed here once bwrap has them.
    """
    tail = _Tail(output_bytes)
    start = time.monotonic()
    try:
        proc = await asyncio.create_subprocess_exec(
            *cmd,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
            pass_fds=(status_fd[1], mark_fd[1], *extra_fds),
            env=env,
        )
    finally:
        for fd in (status_fd[1], mark_fd[1], *extra_fds):
            os.close(fd)
    assert proc.stdout is not None
    stdout = proc.stdout

    async def pump() -> None:
        while data := await stdout.read(_CHUNK):
            tail.add(data)

    reader = asyncio.ensure_future(pump())
    # Both ends: a check that closes its output and goes on running is still timed.
    both = asyncio.gather(reader, proc.wait())
    timed_out = False
    try:
        try:
            await asyncio.wait_for(asyncio.shield(both), timeout_s)
        except TimeoutError:
            timed_out = True
            _killpg(proc.pid, signal.SIGTERM)
            try:
                await asyncio.wait_for(asyncio.shield(proc.wait()), grace_s)
            except TimeoutError:
                _killpg(proc.pid, signal.SIGKILL)
        # bwrap is gone or going; the output's writers die with the jail's pid namespace.
        try:
            await asyncio.wait_for(asyncio.shield(reader), grace_s + 5)
        except TimeoutError:
            _killpg(proc.pid, signal.SIGKILL)
            reader.cancel()
        returncode = await proc.wait()
    except BaseException:
        _killpg(proc.pid, signal.SIGKILL)
        reader.cancel()
        both.cancel()
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await asyncio.shield(proc.wait())
        raise
    finally:
        raw_status = _read_all(status_fd[0])
        marks = _read_all(mark_fd[0])
        os.close(status_fd[0])
        os.close(mark_fd[0])
    started, code = _status(raw_status)
    if code is None and not timed_out:
        code = returncode if returncode >= 0 else 128 - returncode
    return Finished(
        started=started,
        exit_code=None if timed_out else code,
        timed_out=timed_out,
        duration_s=time.monotonic() - start,
        tail=bytes(tail.buf),
        truncated=tail.seen > len(tail.buf),
        marks=marks,
    )
