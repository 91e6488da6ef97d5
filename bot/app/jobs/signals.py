"""How a job handler says it failed, or wants to run again: the exceptions the worker pool reads.

Task code (webhook handlers, runs, the approval poller) raises these; `workers.py` turns them into a
retry after a backoff (`RetryableError`, or after `retry_after` seconds when the cause said when,
such as a GitHub rate limit), a final failure (`PermanentError`), or the same row queued again
(`Reschedule`). Anything else a handler raises is retried too, up to the job's `max_attempts`.
`LeaseLost` is raised to task code, not by it: the write fence (bot/app/fence.py) found that another
worker holds the job now, so the attempt ends without a write and without a record.
"""

from __future__ import annotations

import time

__all__ = ["LeaseLost", "PermanentError", "Reschedule", "RetryableError", "seconds_until"]


class RetryableError(Exception):
    """The job may succeed later (rate limit, outage): retry after a backoff or `retry_after` seconds."""

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class PermanentError(Exception):
    """Trying again cannot help (bad input, refused permission): the job ends as `failed`."""


class Reschedule(Exception):
    """The job did its work for now and wants to run again at `at` (epoch seconds), as the same row.

    Periodic jobs (the approval poller) use it so one job lives as long as what it watches, instead of
    a new row per poll; the attempt is not counted.
    """

    def __init__(self, at: float) -> None:
        super().__init__(f"again at {at}")
        self.at = at


class LeaseLost(Exception):
    """This worker no longer holds the job: its lease expired and another worker claimed the job.
    Nothing of the attempt may reach GitHub any more; the pool ends it as `lease_lost`."""


def seconds_until(at: float | None, *, now: float | None = None) -> float | None:
    """`retry_after` for a cause that names the moment it clears (epoch seconds); None when it does not."""
    if at is None:
        return None
    return max(0.0, at - (time.time() if now is None else now))
