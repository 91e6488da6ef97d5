"""WorkerPool: concurrency, notify, timeouts, retry/permanent errors, heartbeats, lease loss, crash
recovery and shutdown, with real leases of fractions of a second."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import anyio
import pytest

from bot.app.jobs.queue import Job, JobQueue
from bot.app.jobs.signals import PermanentError, RetryableError
from bot.app.jobs.store import Store
from bot.app.jobs.workers import WorkerPool
from tests.support.db import opened

pytestmark = pytest.mark.anyio


def fast_queue(store: Store) -> JobQueue:
    return JobQueue(store, backoff_base=0.01, backoff_cap=0.05, backoff_jitter=0.0)


async def wait_for(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    """Poll a condition with a deadline that fails the test instead of hanging it."""
    with anyio.fail_after(timeout):
        while not condition():
            await anyio.sleep(0.01)


async def test_the_pool_runs_every_job_with_the_given_concurrency(store: Store) -> None:
    queue = fast_queue(store)
    ids = [await queue.enqueue("delivery", None, {"n": i}) for i in range(9)]
    seen: list[int] = []
    in_flight = 0
    peak = 0
    all_busy = anyio.Event()

    async def handler(job: Job) -> None:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        if in_flight == 3:
            all_busy.set()
        with anyio.fail_after(5):  # the first jobs wait until three run at once
            await all_busy.wait()
        seen.append(job.id)
        in_flight -= 1

    stop = anyio.Event()
    pool = WorkerPool(queue, handler, concurrency=3, lease_seconds=5, poll_interval=0.02)
    async with anyio.create_task_group() as tg:
        tg.start_soon(pool.run, stop)
        await wait_for(lambda: len(seen) == 9)
        stop.set()
    assert sorted(seen) == ids and peak == 3
    assert pool.stats.started == pool.stats.succeeded == 9
    assert sum(pool.stats.duration_counts) == 9 and pool.stats.in_flight == 0
    assert (await store.stats())["jobs"]["done"] == 9


async def test_notify_wakes_an_idle_pool_at_once(store: Store) -> None:
    done = anyio.Event()

    async def handler(job: Job) -> None:
        done.set()

    queue = fast_queue(store)
    pool = WorkerPool(queue, handler, concurrency=2, poll_interval=60)  # it would sleep a minute
    async with pool:
        await anyio.sleep(0.05)  # let both loops find the queue empty and go idle
        assert await store.accept_delivery("d-1", "issue_comment", "created", b"{}", "o/r#1")
        pool.notify()
        with anyio.fail_after(5):
            await done.wait()
    assert pool.stats.succeeded == 1


async def test_a_timed_out_job_is_retried(store: Store) -> None:
    queue = fast_queue(store)
    job_id = await queue.enqueue("delivery", "o/r#1")
    attempts: list[int] = []

    async def handler(job: Job) -> None:
        attempts.append(job.attempts)
        if job.attempts == 1:
            await anyio.sleep_forever()

    async with WorkerPool(queue, handler, concurrency=1, job_timeout=0.1, poll_interval=0.01) as pool:
        await wait_for(lambda: pool.stats.succeeded == 1)
    assert attempts == [1, 2]
    assert (pool.stats.timed_out, pool.stats.retried) == (1, 1)
    row = await queue.get(job_id)
    assert row is not None and row["state"] == "done"


async def test_handler_errors_decide_retry_or_not(store: Store) -> None:
    queue = fast_queue(store)
    retry = await queue.enqueue("retry", None, max_attempts=3)
    permanent = await queue.enqueue("permanent", None)
    crash = await queue.enqueue("crash", None, max_attempts=2)
    calls: Counter[str] = Counter()

    async def handler(job: Job) -> None:
        calls[job.kind] += 1
        if job.kind == "retry":
            if job.attempts < 3:
                raise RetryableError("GitHub said 502", retry_after=0.01)
            return
        if job.kind == "permanent":
            raise PermanentError("no such repository")
        raise KeyError("bug")

    async with WorkerPool(queue, handler, concurrency=2, poll_interval=0.01) as pool:
        await wait_for(lambda: pool.stats.succeeded + pool.stats.failed + pool.stats.dead == 3)
    assert calls == {"retry": 3, "permanent": 1, "crash": 2}
    states = {}
    for job_id in (retry, permanent, crash):
        row = await queue.get(job_id)
        assert row is not None
        states[row["kind"]] = (row["state"], row["last_error"])
    assert states == {
        "retry": ("done", None),
        "permanent": ("failed", "no such repository"),
        "crash": ("dead", "KeyError: 'bug'"),
    }
    assert (pool.stats.retried, pool.stats.failed, pool.stats.dead) == (3, 1, 1)


async def test_heartbeats_keep_a_long_job_from_being_taken(store: Store) -> None:
    queue = fast_queue(store)
    job_id = await queue.enqueue("delivery", "o/r#1")
    started = anyio.Event()
    release = anyio.Event()
    runs = 0

    async def handler(job: Job) -> None:
        nonlocal runs
        runs += 1
        started.set()
        await release.wait()

    pool = WorkerPool(
        queue, handler, concurrency=1, lease_seconds=0.2, heartbeat_interval=0.04, poll_interval=0.01
    )
    async with pool:
        with anyio.fail_after(5):
            await started.wait()
        rival = fast_queue(store)
        for _ in range(25):  # 0.5 s: more than two leases
            assert await rival.claim("rival", 0.2) is None
            await anyio.sleep(0.02)
        release.set()
        await wait_for(lambda: pool.stats.succeeded == 1)
    assert runs == 1 and pool.stats.lease_lost == 0
    row = await queue.get(job_id)
    assert row is not None and (row["state"], row["attempts"]) == ("done", 1)


async def test_one_heartbeat_task_keeps_every_running_job_of_the_pool(store: Store) -> None:
    """The pool heartbeats all its running jobs from one task: jobs that started at different times
    all keep their leases, and a job that ended on the way is no longer touched."""
    queue = fast_queue(store)
    ids = [await queue.enqueue("delivery", f"o/r#{n}") for n in range(4)]
    started: list[int] = []
    release = anyio.Event()

    async def handler(job: Job) -> None:
        started.append(job.id)
        if job.id == ids[0]:
            return  # ends at once; the others wait
        await anyio.sleep(0.05 * len(started))  # staggered: their heartbeats fall due apart
        await release.wait()

    pool = WorkerPool(
        queue, handler, concurrency=3, lease_seconds=0.2, heartbeat_interval=0.04, poll_interval=0.01
    )
    async with pool:
        await wait_for(lambda: len(started) == 4)
        rival = fast_queue(store)
        for _ in range(25):  # 0.5 s: more than two leases
            assert await rival.claim("rival", 0.2) is None
            await anyio.sleep(0.02)
        release.set()
        await wait_for(lambda: pool.stats.succeeded == 4)
    assert sorted(started) == ids and pool.stats.lease_lost == 0
    for job_id in ids:
        row = await queue.get(job_id)
        assert row is not None and (row["state"], row["attempts"]) == ("done", 1)


async def test_a_lost_lease_stops_the_handler(store: Store) -> None:
    queue = fast_queue(store)
    job_id = await queue.enqueue("delivery", None)
    started = anyio.Event()
    cancelled = anyio.Event()

    async def handler(job: Job) -> None:
        started.set()
        try:
            await anyio.sleep_forever()
        finally:
            cancelled.set()

    # Heartbeats slower than the lease: the lease runs out and a rival takes the job.
    pool = WorkerPool(
        queue, handler, concurrency=1, lease_seconds=0.1, heartbeat_interval=0.3, poll_interval=5
    )
    async with pool:
        with anyio.fail_after(5):
            await started.wait()
        rival = fast_queue(store)
        stolen: Job | None = None
        with anyio.fail_after(5):
            while stolen is None:
                await anyio.sleep(0.02)
                stolen = await rival.claim("rival", 30)
            await cancelled.wait()
        await wait_for(lambda: pool.stats.lease_lost == 1)
        assert await rival.complete(stolen)
    row = await queue.get(job_id)
    assert row is not None and (row["state"], row["attempts"]) == ("done", 2)
    assert pool.stats.succeeded == 0


async def test_a_crashed_workers_job_is_finished_by_the_pool_exactly_once(db_url: str) -> None:
    async with opened(db_url) as crashed_process, opened(db_url) as live_process:
        dead_queue = fast_queue(crashed_process)
        job_id = await dead_queue.enqueue("delivery", "o/r#1")
        assert await dead_queue.claim("crashed", 0.15) is not None  # and never heard from again
        seen: list[int] = []

        async def handler(job: Job) -> None:
            seen.append(job.attempts)

        queue = fast_queue(live_process)
        async with WorkerPool(queue, handler, concurrency=2, poll_interval=0.02) as pool:
            await wait_for(lambda: pool.stats.succeeded == 1)
            await anyio.sleep(0.1)  # nothing else runs it
        assert seen == [2]
        row = await queue.get(job_id)
        assert row is not None and row["state"] == "done"


@pytest.mark.parametrize("how", ["stop", "cancel"])
async def test_a_running_job_is_given_back_when_the_pool_stops_or_is_cancelled(
    store: Store, how: str
) -> None:
    queue = fast_queue(store)
    job_id = await queue.enqueue("delivery", None)
    started = anyio.Event()

    async def handler(job: Job) -> None:
        started.set()
        await anyio.sleep_forever()

    stop = anyio.Event()
    pool = WorkerPool(queue, handler, concurrency=2, lease_seconds=60, shutdown_grace=0.05)
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(pool.run, stop)
            await started.wait()
            if how == "stop":
                stop.set()
            else:
                tg.cancel_scope.cancel()
    assert pool.stats.released == 1
    row = await queue.get(job_id)
    assert row is not None and (row["state"], row["attempts"], row["lease_owner"]) == ("queued", 0, None)


async def test_a_graceful_stop_lets_the_running_job_finish(store: Store) -> None:
    queue = fast_queue(store)
    await queue.enqueue("delivery", None)
    started = anyio.Event()
    finish = anyio.Event()

    async def handler(job: Job) -> None:
        started.set()
        await finish.wait()

    pool = WorkerPool(queue, handler, concurrency=1, shutdown_grace=10)
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(pool.run)
            await started.wait()
            pool.stop()
            await queue.enqueue("delivery", None)  # not taken: the pool is stopping
            finish.set()
    assert (pool.stats.succeeded, pool.stats.released) == (1, 0)
    assert (await store.stats())["jobs"] == {"queued": 1, "running": 0, "done": 1, "failed": 0, "dead": 0}


async def test_a_job_claimed_with_the_last_completion_is_given_back_on_stop(store: Store) -> None:
    queue = fast_queue(store)
    first = await queue.enqueue("delivery", None)
    second = await queue.enqueue("delivery", None)
    ran: list[int] = []

    async def handler(job: Job) -> None:
        ran.append(job.id)

    # The observer hears the first outcome after its completion claimed the second job in the
    # same transaction; stopping there leaves the loop holding a job it has not started.
    pool = WorkerPool(
        queue, handler, concurrency=1, lease_seconds=60, observer=lambda seconds, outcome: pool.stop()
    )
    with anyio.fail_after(5):
        await pool.run()
    assert ran == [first]
    row = await queue.get(second)
    assert row is not None and (row["state"], row["attempts"], row["lease_owner"]) == ("queued", 0, None)
    assert (pool.stats.succeeded, pool.stats.released) == (1, 1)


async def test_the_observer_hears_every_outcome(store: Store) -> None:
    queue = fast_queue(store)
    await queue.enqueue("ok", None)
    await queue.enqueue("bad", None)
    heard: list[str] = []

    async def handler(job: Job) -> None:
        if job.kind == "bad":
            raise PermanentError("nope")

    pool = WorkerPool(
        queue, handler, concurrency=1, poll_interval=0.01, observer=lambda s, o: heard.append(o)
    )
    async with pool:
        await wait_for(lambda: len(heard) == 2)
    assert sorted(heard) == ["failed", "success"]
    snapshot = pool.stats.snapshot()
    assert snapshot["succeeded"] == 1 and snapshot["failed"] == 1
    assert sum(snapshot["duration_buckets"].values()) == 2


def test_concurrency_must_be_positive() -> None:
    async def handler(job: Job) -> None:
        return None

    with pytest.raises(ValueError, match="concurrency"):
        WorkerPool(JobQueue(None), handler, concurrency=0)  # type: ignore[arg-type]


async def test_a_job_lost_on_its_last_attempt_is_reported_at_once(db_url: str) -> None:
    """Issue 23: the claim that buries a job whose worker died on its last attempt reports its end
    to `on_gave_up` right away (its tracking comment is made final), not at the next periodic sweep."""
    async with opened(db_url) as crashed_process, opened(db_url) as live_process:
        dead_queue = fast_queue(crashed_process)
        job_id = await dead_queue.enqueue("run", "o/r#1", max_attempts=1)
        assert await dead_queue.claim("crashed", 0.15) is not None  # its only attempt, and it dies
        ended: list[tuple[int, str, str]] = []

        async def handler(job: Job) -> None:
            raise AssertionError("a job out of attempts must not run again")

        async def gave_up(job: Job, error: str) -> None:
            ended.append((job.id, job.kind, error))

        queue = fast_queue(live_process)
        async with WorkerPool(
            queue, handler, concurrency=1, poll_interval=0.02, on_gave_up=gave_up, periodic=None
        ) as pool:
            await wait_for(lambda: bool(ended), timeout=5)
            await anyio.sleep(0.1)  # and once only
        assert ended == [(job_id, "run", "lease expired during the last attempt: worker lost")]
        assert pool.stats.dead == 1
        row = await queue.get(job_id)
        assert row is not None and row["state"] == "dead"
