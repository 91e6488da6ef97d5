"""Job signals: a GitHub failure becomes the right signal, and a rate limit's wait reaches the queue."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import pytest

from bot.app.github.api import GitHubError
from bot.app.jobs.queue import Job, JobQueue
from bot.app.jobs.signals import PermanentError, RetryableError, seconds_until
from bot.app.jobs.store import Store
from bot.app.jobs.workers import WorkerPool
from bot.app.webhooks.handlers import job_failure
from tests.support.db import FakeClock

pytestmark = pytest.mark.anyio


def github_error(status: int, retry_at: float | None = None) -> GitHubError:
    return GitHubError(status, "no", method="GET", path="/repos/o/r", retry_at=retry_at)


def test_seconds_until_a_moment() -> None:
    assert seconds_until(1000.0, now=400.0) == 600.0
    assert seconds_until(100.0, now=400.0) == 0.0  # already past: retry at once
    assert seconds_until(None, now=400.0) is None


def test_a_rate_limit_carries_its_wait_into_the_retry() -> None:
    signal = job_failure(github_error(403, retry_at=time.time() + 600))
    assert isinstance(signal, RetryableError)
    assert signal.retry_after is not None and 500 < signal.retry_after <= 600


def test_other_github_failures_retry_after_a_backoff_or_never() -> None:
    outage = job_failure(github_error(502))
    assert isinstance(outage, RetryableError) and outage.retry_after is None
    assert isinstance(job_failure(github_error(404)), PermanentError)
    assert isinstance(job_failure(github_error(403)), PermanentError)  # refused, not rate limited


async def test_the_queue_waits_retry_after_before_the_next_attempt(tmp_path: Path) -> None:
    clock = FakeClock()
    store = await Store.open(f"sqlite+aiosqlite:///{tmp_path / 'beam.db'}", clock=clock)
    queue = JobQueue(store, backoff_base=0.01, backoff_cap=0.05, backoff_jitter=0.0)
    job_id = await queue.enqueue("watch", "o/r#1", max_attempts=3)
    tried = anyio.Event()

    async def handler(job: Job) -> None:
        tried.set()
        raise RetryableError("rate limited", retry_after=900.0)

    async with WorkerPool(queue, handler, concurrency=1, poll_interval=0.01) as pool:
        with anyio.fail_after(10):
            await tried.wait()
            while pool.stats.retried == 0:
                await anyio.sleep(0.01)
    row = await queue.get(job_id)
    assert row is not None and row["state"] == "queued" and row["run_after"] == clock() + 900.0
    await store.close()
