"""Periodic jobs: a job that reschedules itself stays one row, and `schedule` moves a queued job earlier."""

from __future__ import annotations

import anyio
import pytest
from sqlalchemy import func, select

from bot.app.jobs.queue import Job, JobQueue
from bot.app.jobs.signals import Reschedule
from bot.app.jobs.store import Store, jobs
from bot.app.jobs.workers import WorkerPool

pytestmark = pytest.mark.anyio


async def count_rows(store: Store) -> int:
    async with store.read() as conn:
        return int((await conn.execute(select(func.count()).select_from(jobs))).scalar_one())


async def test_a_job_that_reschedules_itself_keeps_one_row(store: Store) -> None:
    queue = JobQueue(store)
    job_id = await queue.enqueue("poll", "push:1", {"n": 1})
    runs: list[int] = []
    done = anyio.Event()

    async def handler(job: Job) -> None:
        runs.append(job.attempts)
        if len(runs) < 5:
            raise Reschedule(store.clock())
        done.set()

    pool = WorkerPool(queue, handler, concurrency=1, lease_seconds=5, poll_interval=0.01)
    async with pool:
        with anyio.fail_after(10):
            await done.wait()
    assert runs == [1, 1, 1, 1, 1]  # a reschedule is not a try
    assert await count_rows(store) == 1
    row = await queue.get(job_id)
    assert row is not None and row["state"] == "done"
    assert pool.stats.rescheduled == 4


async def test_schedule_moves_a_queued_job_earlier_but_never_later(store: Store) -> None:
    queue = JobQueue(store)
    now = store.clock()
    first = await queue.schedule("poll", "push:2", {"push_id": "2"}, now + 100)
    assert await queue.schedule("poll", "push:2", {"push_id": "2"}, now + 500) == first
    row = await queue.get(first)
    assert row is not None and row["run_after"] == pytest.approx(now + 100)
    assert await queue.schedule("poll", "push:2", {"push_id": "2"}, now + 1) == first
    row = await queue.get(first)
    assert row is not None and row["run_after"] == pytest.approx(now + 1)
    other = await queue.schedule("poll", "push:3", None, now)
    assert other != first and await count_rows(store) == 2


async def test_a_running_job_is_not_moved_a_new_one_is_queued(store: Store) -> None:
    queue = JobQueue(store)
    first = await queue.enqueue("poll", "push:4", None)
    claimed = await queue.claim("w1", 30)
    assert claimed is not None and claimed.id == first
    second = await queue.schedule("poll", "push:4", None, store.clock())
    assert second != first
    assert await queue.claim("w2", 30) is None  # one job at a time per key
    assert await queue.reschedule(claimed, store.clock() + 60)
    row = await queue.get(first)
    assert row is not None and row["state"] == "queued" and row["attempts"] == 0
