"""`Metrics`: the counters the app increments, and their Prometheus text exposition (format 0.0.4).

Written by hand rather than with prometheus_client: a few counters and one histogram do not need a
dependency with global registries, and an instance per app keeps tests independent of each other.
`MetricsTransport` wraps the GitHub client's transport so every GitHub call is counted without the
callers doing anything.
"""

from __future__ import annotations

import math
import threading
from collections import Counter
from collections.abc import Iterable, Mapping

import httpx

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# Skill runs take seconds to many minutes (BEAM_JOB_TIMEOUT defaults to 30 minutes).
RUN_BUCKETS = (1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1200.0, 1800.0, 3600.0)

Labels = tuple[tuple[str, str], ...]


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(labels: Labels) -> str:
    if not labels:
        return ""
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in labels) + "}"


def _number(value: float) -> str:
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return str(int(value)) if float(value).is_integer() else repr(float(value))


class _Histogram:
    def __init__(self, buckets: Iterable[float]) -> None:
        self.bounds = tuple(sorted(buckets))
        self.counts = [0] * len(self.bounds)
        self.total = 0
        self.sum = 0.0

    def observe(self, value: float) -> None:
        for i, bound in enumerate(self.bounds):
            if value <= bound:
                self.counts[i] += 1
        self.total += 1
        self.sum += value


class Metrics:
    """Counters for one app instance. Safe to increment from worker threads as well as the event loop."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._deliveries: Counter[str] = Counter()
        self._rejections: Counter[str] = Counter()
        self._github_requests: Counter[tuple[str, str]] = Counter()
        self._github_errors: Counter[str] = Counter()
        self._runs: dict[str, _Histogram] = {}

    def delivery(self, outcome: str) -> None:
        """One delivery answered: `accepted`, `duplicate` or `pong`."""
        with self._lock:
            self._deliveries[outcome] += 1

    def rejection(self, reason: str) -> None:
        """One delivery refused, by reason (`signature`, `too_large`, `media_type`, ...)."""
        with self._lock:
            self._rejections[reason] += 1

    def github_request(self, method: str, status: int) -> None:
        with self._lock:
            self._github_requests[(method, f"{status // 100}xx")] += 1

    def github_error(self, kind: str) -> None:
        """A GitHub call that got no HTTP answer (connection refused, timeout, ...)."""
        with self._lock:
            self._github_errors[kind] += 1

    def observe_run(self, seconds: float, outcome: str = "success") -> None:
        with self._lock:
            self._runs.setdefault(outcome, _Histogram(RUN_BUCKETS)).observe(seconds)

    def render(self, *, mode: str, store_stats: Mapping[str, object] | None = None) -> str:
        """The exposition text; `store_stats` is `Store.stats()` (deliveries stored, jobs by state)."""
        out: list[str] = []

        def family(name: str, kind: str, help_: str, samples: Iterable[tuple[str, Labels, float]]) -> None:
            out.append(f"# HELP {name} {help_}")
            out.append(f"# TYPE {name} {kind}")
            out.extend(f"{sample}{_labels(labels)} {_number(value)}" for sample, labels, value in samples)

        with self._lock:
            family(
                "beam_mode",
                "gauge",
                "1 for the mode the server is in (setup until the GitHub App is registered).",
                [("beam_mode", (("mode", m),), 1.0 if m == mode else 0.0) for m in ("normal", "setup")],
            )
            family(
                "beam_webhook_deliveries_total",
                "counter",
                "Webhook deliveries answered with 2xx, by outcome.",
                [
                    ("beam_webhook_deliveries_total", (("outcome", k),), float(v))
                    for k, v in sorted(self._deliveries.items())
                ],
            )
            family(
                "beam_webhook_rejections_total",
                "counter",
                "Webhook deliveries refused (4xx/5xx) and not stored, by reason.",
                [
                    ("beam_webhook_rejections_total", (("reason", k),), float(v))
                    for k, v in sorted(self._rejections.items())
                ],
            )
            family(
                "beam_github_requests_total",
                "counter",
                "GitHub API requests that got an HTTP answer, by method and status class.",
                [
                    ("beam_github_requests_total", (("method", m), ("code", c)), float(v))
                    for (m, c), v in sorted(self._github_requests.items())
                ],
            )
            family(
                "beam_github_errors_total",
                "counter",
                "GitHub API requests that got no HTTP answer, by error kind.",
                [
                    ("beam_github_errors_total", (("kind", k),), float(v))
                    for k, v in sorted(self._github_errors.items())
                ],
            )
            run_samples: list[tuple[str, Labels, float]] = []
            for outcome, hist in sorted(self._runs.items()):
                for bound, count in zip(hist.bounds, hist.counts, strict=True):
                    labels = (("outcome", outcome), ("le", _number(bound)))
                    run_samples.append(("beam_run_duration_seconds_bucket", labels, float(count)))
                inf = (("outcome", outcome), ("le", "+Inf"))
                run_samples.append(("beam_run_duration_seconds_bucket", inf, float(hist.total)))
                run_samples.append(("beam_run_duration_seconds_sum", (("outcome", outcome),), hist.sum))
                run_samples.append(
                    ("beam_run_duration_seconds_count", (("outcome", outcome),), float(hist.total))
                )
            family(
                "beam_run_duration_seconds", "histogram", "Duration of skill runs, by outcome.", run_samples
            )

        if store_stats is not None:
            deliveries = store_stats.get("deliveries")
            if isinstance(deliveries, int):
                family(
                    "beam_deliveries_stored",
                    "gauge",
                    "Deliveries recorded in the database.",
                    [("beam_deliveries_stored", (), float(deliveries))],
                )
            jobs = store_stats.get("jobs")
            if isinstance(jobs, Mapping):
                family(
                    "beam_jobs",
                    "gauge",
                    "Jobs in the database, by state.",
                    [
                        ("beam_jobs", (("state", str(k)),), float(v))
                        for k, v in sorted(jobs.items())
                        if isinstance(v, int)
                    ],
                )
            age = store_stats.get("oldest_queued_age_seconds")
            if isinstance(age, int | float):
                family(
                    "beam_oldest_queued_job_age_seconds",
                    "gauge",
                    "How long the oldest due job has waited for a worker.",
                    [("beam_oldest_queued_job_age_seconds", (), float(age))],
                )
        return "\n".join(out) + "\n"


class MetricsTransport(httpx.AsyncBaseTransport):
    """Counts every request of the client it serves: by status class, or by error kind when it fails."""

    def __init__(self, inner: httpx.AsyncBaseTransport, metrics: Metrics) -> None:
        self._inner = inner
        self._metrics = metrics

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        try:
            response = await self._inner.handle_async_request(request)
        except httpx.TransportError as exc:
            self._metrics.github_error(type(exc).__name__)
            raise
        self._metrics.github_request(request.method, response.status_code)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()
