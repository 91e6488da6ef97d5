"""The worker pool's counters for /metrics: how many jobs started, and how each attempt ended."""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Any

DURATION_BUCKETS = (0.1, 0.5, 1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0)


@dataclass(slots=True)
class WorkerStats:
    """Counters for /metrics. Outcomes: succeeded, retried, failed (permanent), dead (out of tries)."""

    started: int = 0
    succeeded: int = 0
    retried: int = 0
    failed: int = 0
    dead: int = 0
    timed_out: int = 0
    lease_lost: int = 0
    rescheduled: int = 0
    released: int = 0
    loop_errors: int = 0
    in_flight: int = 0
    duration_counts: list[int] = field(default_factory=lambda: [0] * (len(DURATION_BUCKETS) + 1))
    duration_sum: float = 0.0

    def snapshot(self) -> dict[str, Any]:
        """The counters as a plain dict; `duration_buckets` maps upper bounds to (non-cumulative) counts."""
        counters = {name: getattr(self, name) for name in _COUNTERS}
        bounds = (*DURATION_BUCKETS, float("inf"))
        return {
            **counters,
            "duration_buckets": dict(zip(bounds, self.duration_counts, strict=True)),
            "duration_sum": self.duration_sum,
        }

    def observe(self, seconds: float) -> None:
        """Non-cumulative bucket counts; the last bucket is +Inf."""
        index = bisect.bisect_left(DURATION_BUCKETS, seconds)
        self.duration_counts[index] += 1
        self.duration_sum += seconds


_COUNTERS = (
    "started",
    "succeeded",
    "retried",
    "failed",
    "dead",
    "timed_out",
    "lease_lost",
    "rescheduled",
    "released",
    "loop_errors",
    "in_flight",
)


# The WorkerStats counter each recorded outcome adds to.
OUTCOME_COUNTERS = {
    "success": "succeeded",
    "queued": "retried",
    "failed": "failed",
    "dead": "dead",
    "lease_lost": "lease_lost",
    "rescheduled": "rescheduled",
}
