"""The fence every GitHub write of a job passes: the worker confirms first that the job's lease is
still its own.

A lease ends when its holder stops heartbeating; another worker then claims the job and runs it
again. A worker that was only paused (SIGSTOP, a VM suspended, an event loop blocked past the lease)
does not know this when it resumes, and its next write would race the new holder's: a second comment
where the journal's intent was already taken over, or a stale progress edit over the new holder's
final one. GitHub has no fencing tokens, so the check has to happen on our side, just before the call.

The worker pool installs the check for the handler it runs (`fenced`); `InstallationClient` awaits
`before_write()` before every call that is not a GET, and `GitHubEffects` before it makes a write of
its own (a git push). While the lease is fresh the check answers locally; past half the lease it is one
compare-and-set on the job's row (workers.py). A job that lost its lease raises `LeaseLost` there and
makes no write. Outside a job (intake, the periodic sweep, the CLI) nothing is checked.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Iterator
from contextvars import ContextVar

Check = Callable[[], Awaitable[None]]

_check: ContextVar[Check | None] = ContextVar("beam_write_fence", default=None)


@contextlib.contextmanager
def fenced(check: Check) -> Iterator[None]:
    """Run the block (a job's handler, and every task it starts) with `check` before each write."""
    token = _check.set(check)
    try:
        yield
    finally:
        _check.reset(token)


async def before_write() -> None:
    """Raise (`LeaseLost`) instead of letting a write happen for a job this worker no longer holds."""
    check = _check.get()
    if check is not None:
        await check()
