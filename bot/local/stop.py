"""How a terminal command stops: Ctrl-C, SIGTERM and SIGHUP cancel its work, and a closed output pipe
(`| head`) ends it, in every case through the work's own `finally` blocks (the temporary worktree or
repository is removed), with the exit code a shell expects (128 + the signal's number).

`beam-bot run` and `beam-bot review|summarize|ask <URL>` both run their work under `stoppable`, so a
signal means the same in both; each says in its own words what was left undone.
"""

from __future__ import annotations

import signal
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import anyio
import anyio.abc

from bot.local.git import Interrupted

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
PIPE_CLOSED = 128 + signal.SIGPIPE.value  # the exit code of a process killed by SIGPIPE, as shells expect


@dataclass(frozen=True, slots=True)
class Ended:
    """How the work ended: its exit code, or the signal that cancelled it."""

    code: int
    signal: signal.Signals | None = None

    @property
    def exit_code(self) -> int:
        return 128 + self.signal.value if self.signal is not None else self.code


def signal_name(signum: signal.Signals) -> str:
    """`SIGINT (Ctrl-C)`: the name a person pressed, beside the one a log shows."""
    return f"{signum.name} (Ctrl-C)" if signum is signal.SIGINT else signum.name


async def stoppable(work: Callable[[], Awaitable[int]]) -> Ended:
    """Run `work`; the first stop signal cancels it (its `finally` blocks still run, shielded ones
    to the end). Without this, SIGTERM would kill the process where it stands and leave the
    temporary directories behind, and Ctrl-C would end in a traceback."""
    stopped: list[signal.Signals] = []
    code = 1
    async with anyio.create_task_group() as tg:

        async def watch(*, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
            with anyio.open_signal_receiver(*STOP_SIGNALS) as signals:
                task_status.started()
                async for signum in signals:
                    stopped.append(signal.Signals(signum))
                    tg.cancel_scope.cancel()
                    return

        await tg.start(watch)  # the receiver is in place before the work starts
        try:
            code = await work()
        except BrokenPipeError:
            # The reader is gone; the work's `finally` blocks ran on the way out.
            code = PIPE_CLOSED
        except Interrupted as stop:
            # The signal killed a git child before our watcher saw it (a blocking git call holds the
            # event loop): the same stop, said once.
            if not stopped:
                stopped.append(stop.signal)
        tg.cancel_scope.cancel()
    return Ended(code, stopped[0] if stopped and code != PIPE_CLOSED else None)
