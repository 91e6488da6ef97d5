"""`Metrics`: the app's Prometheus metrics, in a `prometheus_client` registry of its own (one per app).

A registry per app (never the library's global one) keeps tests and several apps in one process
independent. Counters and histograms are updated where things happen; what the database knows (jobs by
state, the oldest queued job, held pushes by state, deliveries stored) is read at each scrape.
`MetricsTransport` wraps the GitHub client's transport so every GitHub call is counted, and GitHub's
rate-limit headers recorded per installation, without the callers doing anything.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import httpx
import prometheus_client
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

from bot.app.github.api import GitHubStats
from bot.app.logs import current

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# Skill runs take seconds to many minutes (BEAM_JOB_TIMEOUT defaults to 30 minutes).
RUN_BUCKETS = (1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1200.0, 1800.0, 3600.0)
MODES = ("normal", "setup")
TOKEN_KINDS = ("prompt", "completion")

# `*_created` series double the output for no use here.
prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]


class _GitHubStatsCollector(Collector):
    """GitHub API retries and rate-limit waits, read from the API layer's own counters at each scrape."""

    def __init__(self, stats: GitHubStats) -> None:
        self.stats = stats

    def collect(self) -> Iterable[Metric]:
        yield CounterMetricFamily(
            "beam_github_api_retries", "GitHub API calls retried (5xx, rate limits).", self.stats.retries
        )
        yield CounterMetricFamily(
            "beam_github_rate_limit_waits",
            "Waits for a GitHub rate limit to reset.",
            self.stats.rate_limit_waits,
        )


class Metrics:
    """The metrics of one app instance. Safe to update from worker threads as well as the event loop."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.github_stats = GitHubStats()
        self._mode = Gauge(
            "beam_mode",
            "1 for the mode the server is in (setup until the App is registered).",
            ["mode"],
            registry=r,
        )
        self._deliveries = Counter(
            "beam_webhook_deliveries",
            "Webhook deliveries answered with 2xx, by outcome.",
            ["outcome"],
            registry=r,
        )
        self._delivery_counters: dict[str, Any] = {}
        self._rejections = Counter(
            "beam_webhook_rejections",
            "Webhook deliveries refused (4xx/5xx) and not stored, by reason.",
            ["reason"],
            registry=r,
        )
        self._github_requests = Counter(
            "beam_github_requests",
            "GitHub API requests that got an HTTP answer, by method and status class.",
            ["method", "code"],
            registry=r,
        )
        self._github_errors = Counter(
            "beam_github_errors",
            "GitHub API requests that got no HTTP answer, by error kind.",
            ["kind"],
            registry=r,
        )
        self._rate_limit = Gauge(
            "beam_github_rate_limit_remaining",
            "GitHub API calls left in the current rate-limit window, by installation ('app' for App calls).",
            ["installation"],
            registry=r,
        )
        self._runs = Histogram(
            "beam_run_duration_seconds",
            "Duration of jobs, by outcome.",
            ["outcome"],
            buckets=RUN_BUCKETS,
            registry=r,
        )
        self._skill_runs = Histogram(
            "beam_skill_run_duration_seconds",
            "Duration of skill runs on GitHub, by skill and final status.",
            ["skill", "status"],
            buckets=RUN_BUCKETS,
            registry=r,
        )
        self._tokens = Counter(
            "beam_llm_tokens", "Tokens used by skill runs, by skill and kind.", ["skill", "kind"], registry=r
        )
        self._stored = Gauge("beam_deliveries_stored", "Deliveries recorded in the database.", registry=r)
        self._jobs = Gauge("beam_jobs", "Jobs in the database, by state.", ["state"], registry=r)
        self._oldest = Gauge(
            "beam_oldest_queued_job_age_seconds",
            "How long the oldest due job has waited for a worker.",
            registry=r,
        )
        self._pushes = Gauge(
            "beam_held_pushes", "Held pushes in the database, by state.", ["state"], registry=r
        )
        self._workers = Gauge(
            "beam_workers_alive", "1 when this process's worker pool is running.", registry=r
        )
        self._recovered = Counter(
            "beam_deliveries_recovered",
            "Missed webhook deliveries GitHub was asked to redeliver (issue 32).",
            registry=r,
        )
        r.register(_GitHubStatsCollector(self.github_stats))
        ProcessCollector(
            registry=r
        )  # process_resident_memory_bytes, process_cpu_seconds_total, process_open_fds

    def delivery(self, outcome: str) -> None:
        """One delivery answered: `accepted`, `no_work`, `duplicate` or `pong`."""
        # The labelled child is cached: `labels()` takes a lock and builds a key on every call,
        # a measurable share of intake's CPU at thousands of deliveries a second.
        counter = self._delivery_counters.get(outcome)
        if counter is None:
            counter = self._delivery_counters[outcome] = self._deliveries.labels(outcome)
        counter.inc()

    def rejection(self, reason: str) -> None:
        """One delivery refused, by reason (`signature`, `too_large`, `media_type`, ...)."""
        self._rejections.labels(reason).inc()

    def recovered(self, count: int) -> None:
        """`count` missed deliveries were asked again of GitHub by one redelivery sweep."""
        self._recovered.inc(max(0, count))

    def github_request(self, method: str, status: int) -> None:
        self._github_requests.labels(method, f"{status // 100}xx").inc()

    def github_error(self, kind: str) -> None:
        """A GitHub call that got no HTTP answer (connection refused, timeout, ...)."""
        self._github_errors.labels(kind).inc()

    def rate_limit(self, installation: str, remaining: int) -> None:
        self._rate_limit.labels(installation).set(remaining)

    def observe_run(self, seconds: float, outcome: str = "success") -> None:
        """One job attempt ended (the worker pool's observer)."""
        self._runs.labels(outcome).observe(seconds)

    def observe_skill_run(
        self, skill: str, status: str, seconds: float, prompt_tokens: int = 0, completion_tokens: int = 0
    ) -> None:
        """One skill run ended: its duration, and the tokens the model reported."""
        self._skill_runs.labels(skill, status).observe(seconds)
        self._tokens.labels(skill, "prompt").inc(max(0, prompt_tokens))
        self._tokens.labels(skill, "completion").inc(max(0, completion_tokens))

    def render(
        self, *, mode: str, store_stats: Mapping[str, object] | None = None, workers_alive: bool = False
    ) -> str:
        """The exposition text; `store_stats` is `Store.stats()` (deliveries, jobs and pushes by state)."""
        for m in MODES:
            self._mode.labels(m).set(1.0 if m == mode else 0.0)
        self._workers.set(1.0 if workers_alive else 0.0)
        if store_stats is not None:
            _set(self._stored, store_stats.get("deliveries"))
            _set(self._oldest, store_stats.get("oldest_queued_age_seconds"))
            for gauge, key in ((self._jobs, "jobs"), (self._pushes, "pushes")):
                counts = store_stats.get(key)
                if isinstance(counts, Mapping):
                    for state, value in counts.items():
                        _set(gauge.labels(str(state)), value)
        return prometheus_client.generate_latest(self.registry).decode("utf-8")


def _set(gauge: Any, value: object) -> None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        gauge.set(float(value))


class MetricsTransport(httpx.AsyncBaseTransport):
    """Counts every request of the client it serves: by status class, or by error kind when it fails;
    records `x-ratelimit-remaining` for the installation the call is made as (from the context)."""

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
        remaining = response.headers.get("x-ratelimit-remaining")
        if remaining is not None and remaining.isdigit():
            # The token request itself is made as the App, even inside an installation's call.
            app_call = request.url.path.endswith("/access_tokens")
            installation = None if app_call else current("installation_id")
            self._metrics.rate_limit(str(installation) if installation is not None else "app", int(remaining))
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()
