"""JobQueue: claim exclusivity (tasks, two stores, a second OS process), one job at a time per key,
lease expiry and recovery, heartbeats, backoff, attempts and the lease compare-and-set."""

from __future__ import annotations

import subprocess
from collections import Counter

import anyio
import pytest
from sqlalchemy import inspect, text

from bot.app.jobs.migrations import SCHEMA_VERSION
from bot.app.jobs.queue import Job, JobQueue
from bot.app.jobs.store import Store
from tests.support.db import REPO_ROOT, FakeClock, claim_all, claimer_command, opened

pytestmark = pytest.mark.anyio

LEASE = 30.0


def no_jitter(store: Store, backoff_base: float = 5.0, backoff_cap: float = 600.0) -> JobQueue:
    return JobQueue(store, backoff_base=backoff_base, backoff_cap=backoff_cap, backoff_jitter=0.0)


async def test_claim_takes_the_oldest_due_job_with_a_lease(
    clocked_store: Store, fake_clock: FakeClock
) -> None:
    queue = no_jitter(clocked_store)
    later = await queue.enqueue("poll_approvals", None, run_after=fake_clock.now + 60)
    first = await queue.enqueue("resume_push", "o/r#1", {"push": "p1"})
    second = await queue.enqueue("resume_push", "o/r#2")
    job = await queue.claim("w1", LEASE)
    assert job is not None
    assert (job.id, job.kind, job.key, job.payload, job.attempts) == (
        first,
        "resume_push",
        "o/r#1",
        {"push": "p1"},
        1,
    )
    assert (job.lease_owner, job.lease_expires_at) == ("w1", fake_clock.now + LEASE)
    assert job.event is None and job.delivery_payload is None
    row = await queue.get(first)
    assert row is not None and (row["state"], row["lease_owner"]) == ("running", "w1")
    job2 = await queue.claim("w1", LEASE)
    assert job2 is not None and job2.id == second
    assert await queue.claim("w1", LEASE) is None  # `later` is not due yet
    fake_clock.advance(60)
    job3 = await queue.claim("w1", LEASE)
    assert job3 is not None and job3.id == later


async def test_a_delivery_job_carries_its_delivery(clocked_store: Store) -> None:
    body = '{"action":"created","x":"é"}'.encode()
    assert await clocked_store.accept_delivery("d-1", "issue_comment", "created", body, "o/r#4")
    job = await JobQueue(clocked_store).claim("w", LEASE)
    assert job is not None
    assert (job.kind, job.key, job.delivery_id, job.event, job.action) == (
        "delivery",
        "o/r#4",
        "d-1",
        "issue_comment",
        "created",
    )
    assert job.delivery_payload == body and job.payload is None


async def test_one_job_at_a_time_per_key(clocked_store: Store) -> None:
    queue = JobQueue(clocked_store)
    a = await queue.enqueue("delivery", "o/r#1")
    b = await queue.enqueue("delivery", "o/r#1")
    c = await queue.enqueue("delivery", "o/r#2")
    d = await queue.enqueue("delivery", None)
    e = await queue.enqueue("delivery", None)
    claimed = [await queue.claim(f"w{i}", LEASE) for i in range(5)]
    assert [j.id if j else None for j in claimed] == [a, c, d, e, None]  # b waits for a
    job_a = claimed[0]
    assert job_a is not None and await queue.complete(job_a)
    job_b = await queue.claim("w9", LEASE)
    assert job_b is not None and job_b.id == b


async def test_an_expired_job_is_recovered_before_its_key_moves_on(
    clocked_store: Store,
    fake_clock: FakeClock,
) -> None:
    queue = JobQueue(clocked_store)
    a = await queue.enqueue("delivery", "o/r#1")
    await queue.enqueue("delivery", "o/r#1")
    crashed = await queue.claim("crashed-worker", LEASE)
    assert crashed is not None and crashed.id == a
    fake_clock.advance(LEASE + 1)
    recovered = await queue.claim("w2", LEASE)
    assert recovered is not None and (recovered.id, recovered.attempts) == (a, 2)
    assert await queue.claim("w3", LEASE) is None  # the second job still waits for the first


async def test_a_crashed_workers_job_is_reclaimed_and_completed_once(
    db_url: str,
    fake_clock: FakeClock,
) -> None:
    async with opened(db_url, fake_clock) as a, opened(db_url, fake_clock) as b:
        qa, qb = JobQueue(a), JobQueue(b)
        job_id = await qa.enqueue("delivery", "o/r#1")
        lost = await qa.claim("process-a", LEASE)
        assert lost is not None
        assert await qb.claim("process-b", LEASE) is None  # lease still live
        fake_clock.advance(LEASE + 0.5)
        taken = await qb.claim("process-b", LEASE)
        assert taken is not None and taken.id == job_id and taken.attempts == 2
        # The first worker wakes up: it may no longer extend, finish or fail the job.
        assert not await qa.heartbeat(lost, LEASE)
        assert not await qa.complete(lost)
        assert await qa.fail(lost, "late", retryable=True) is None
        assert await qb.complete(taken)
        assert not await qb.complete(taken)  # completing twice is refused too
        row = await qa.get(job_id)
        assert row is not None and (row["state"], row["attempts"], row["lease_owner"]) == ("done", 2, None)
        fake_clock.advance(LEASE * 10)
        assert await qa.claim("process-a", LEASE) is None


async def test_the_same_owner_cannot_finish_an_older_attempt(
    clocked_store: Store, fake_clock: FakeClock
) -> None:
    queue = JobQueue(clocked_store)
    await queue.enqueue("delivery", None)
    first = await queue.claim("w", LEASE)
    fake_clock.advance(LEASE + 1)
    second = await queue.claim("w", LEASE)
    assert first is not None and second is not None and first.id == second.id
    assert not await queue.complete(first)
    assert await queue.complete(second)


async def test_heartbeat_keeps_the_lease(clocked_store: Store, fake_clock: FakeClock) -> None:
    queue = JobQueue(clocked_store)
    await queue.enqueue("delivery", None)
    job = await queue.claim("w1", 10)
    assert job is not None
    for _ in range(5):
        fake_clock.advance(8)
        assert await queue.heartbeat(job, 10)
        assert job.lease_expires_at == fake_clock.now + 10
        assert await queue.claim("w2", 10) is None
    fake_clock.advance(11)
    stolen = await queue.claim("w2", 10)
    assert stolen is not None and stolen.id == job.id
    assert not await queue.heartbeat(job, 10)


async def test_retry_waits_for_an_exponential_backoff(clocked_store: Store, fake_clock: FakeClock) -> None:
    queue = no_jitter(clocked_store, backoff_base=2.0, backoff_cap=5.0)
    job_id = await queue.enqueue("delivery", "o/r#1")
    for attempt, delay in [(1, 2.0), (2, 4.0), (3, 5.0)]:  # 8 s is capped at 5
        job = await queue.claim("w", LEASE)
        assert job is not None and (job.id, job.attempts) == (job_id, attempt)
        assert await queue.fail(job, f"boom {attempt}", retryable=True) == "queued"
        row = await queue.get(job_id)
        assert row is not None
        assert (row["state"], row["run_after"], row["last_error"]) == (
            "queued",
            fake_clock.now + delay,
            f"boom {attempt}",
        )
        fake_clock.advance(delay - 0.01)
        assert await queue.claim("w", LEASE) is None
        fake_clock.advance(0.01)


async def test_retry_after_overrides_the_backoff(clocked_store: Store, fake_clock: FakeClock) -> None:
    queue = no_jitter(clocked_store, backoff_base=2.0)
    job_id = await queue.enqueue("delivery", None)
    job = await queue.claim("w", LEASE)
    assert job is not None
    assert await queue.fail(job, "rate limited", retryable=True, retry_after=120) == "queued"
    row = await queue.get(job_id)
    assert row is not None and row["run_after"] == fake_clock.now + 120


def test_backoff_is_capped_and_jittered_within_bounds() -> None:
    queue = JobQueue(None, backoff_base=1.0, backoff_cap=60.0, backoff_jitter=0.5)  # type: ignore[arg-type]
    for attempts, low in [(1, 1.0), (3, 4.0), (6, 32.0), (30, 60.0)]:
        for _ in range(20):
            assert low <= queue.backoff(attempts) <= min(60.0, low * 1.5)


async def test_after_max_attempts_the_job_is_dead(clocked_store: Store, fake_clock: FakeClock) -> None:
    queue = no_jitter(clocked_store, backoff_base=1.0)
    job_id = await queue.enqueue("delivery", None, max_attempts=3)
    states = []
    for _ in range(3):
        job = await queue.claim("w", LEASE)
        assert job is not None
        states.append(await queue.fail(job, f"try {job.attempts}", retryable=True))
        fake_clock.advance(100)
    assert states == ["queued", "queued", "dead"]
    row = await queue.get(job_id)
    assert row is not None and (row["state"], row["attempts"], row["last_error"]) == ("dead", 3, "try 3")
    assert await queue.claim("w", LEASE) is None


async def test_a_permanent_failure_is_not_retried(clocked_store: Store, fake_clock: FakeClock) -> None:
    queue = JobQueue(clocked_store)
    job_id = await queue.enqueue("delivery", None)
    job = await queue.claim("w", LEASE)
    assert job is not None
    assert await queue.fail(job, "x" * 10_000, retryable=False) == "failed"
    row = await queue.get(job_id)
    assert row is not None and row["state"] == "failed" and len(row["last_error"]) == 4000
    fake_clock.advance(10_000)
    assert await queue.claim("w", LEASE) is None


async def test_a_job_whose_worker_always_dies_ends_dead(clocked_store: Store, fake_clock: FakeClock) -> None:
    queue = JobQueue(clocked_store)
    job_id = await queue.enqueue("delivery", "o/r#1", max_attempts=2)
    follower = await queue.enqueue("delivery", "o/r#1")
    for attempt in (1, 2):
        job = await queue.claim("w", LEASE)
        assert job is not None and (job.id, job.attempts) == (job_id, attempt)
        fake_clock.advance(LEASE + 1)  # the worker dies holding it
    nxt = await queue.claim("w", LEASE)  # the dead job is buried and its key freed
    assert nxt is not None and nxt.id == follower
    row = await queue.get(job_id)
    assert row is not None and (row["state"], row["attempts"]) == ("dead", 2)
    assert "lease expired" in row["last_error"]


async def test_release_gives_the_job_back_without_counting_the_attempt(clocked_store: Store) -> None:
    queue = JobQueue(clocked_store)
    job_id = await queue.enqueue("delivery", None)
    job = await queue.claim("w", LEASE)
    assert job is not None and await queue.release(job)
    again = await queue.claim("w2", LEASE)
    assert again is not None and (again.id, again.attempts) == (job_id, 1)


async def test_complete_and_claim_takes_the_next_job_in_the_same_transaction(clocked_store: Store) -> None:
    queue = JobQueue(clocked_store)
    a = await queue.enqueue("delivery", "o/r#1")
    b = await queue.enqueue("delivery", "o/r#1")  # same key: claimable only once `a` is done
    c = await queue.enqueue("delivery", "o/r#2")
    first = await queue.claim("w", LEASE)
    assert first is not None and first.id == a
    done, following = await queue.complete_and_claim(first, LEASE)
    assert done and following is not None and (following.id, following.lease_owner) == (b, "w")
    assert (await queue.get(a) or {})["state"] == "done"
    # A lost lease (here: an attempt this worker does not hold) is reported, and the worker still
    # gets its next job.
    lost = Job(b, "delivery", "o/r#1", None, None, following.attempts + 1, 5, "w", 0.0)
    done, last = await queue.complete_and_claim(lost, LEASE)
    assert not done and last is not None and last.id == c
    done, none_left = await queue.complete_and_claim(following, None)
    assert done and none_left is None
    assert (await queue.get(c) or {})["state"] == "running"


async def test_enqueue_if_absent_reuses_a_queued_job(clocked_store: Store) -> None:
    queue = JobQueue(clocked_store)
    first = await queue.enqueue("poll_approvals", None, if_absent=True)
    assert await queue.enqueue("poll_approvals", None, if_absent=True) == first
    assert await queue.enqueue("poll_approvals", "o/r#1", if_absent=True) != first
    job = await queue.claim("w", LEASE)
    assert job is not None and job.id == first
    assert await queue.enqueue("poll_approvals", None, if_absent=True) != first  # the old one runs


async def test_many_claimers_in_two_stores_never_share_a_job(db_url: str) -> None:
    async with opened(db_url) as a, opened(db_url) as b:
        total = 60
        for i in range(total):
            await JobQueue(a).enqueue("delivery", None, {"n": i})
        claimed: list[int] = []
        async with anyio.create_task_group() as tg:
            for i in range(10):
                tg.start_soon(claim_all, JobQueue(a if i % 2 else b), f"w{i}", LEASE, claimed)
        assert sorted(claimed) == sorted(set(claimed)) and len(claimed) == total
        assert (await a.stats())["jobs"]["done"] == total


async def test_concurrent_claimers_run_one_job_per_key_at_a_time(db_url: str) -> None:
    async with opened(db_url) as a, opened(db_url) as b:
        keys = [f"o/r#{n}" for n in range(3)]
        for i in range(24):
            await JobQueue(a).enqueue("delivery", keys[i % 3])
        running: set[str] = set()
        done: list[int] = []
        overlaps: list[str] = []

        async def worker(queue: JobQueue, name: str) -> None:
            with anyio.fail_after(20):
                while len(done) < 24:
                    job = await queue.claim(name, LEASE)
                    if job is None:
                        await anyio.sleep(0.002)
                        continue
                    assert job.key is not None
                    if job.key in running:
                        overlaps.append(job.key)
                    running.add(job.key)
                    await anyio.sleep(0.003)
                    running.discard(job.key)
                    assert await queue.complete(job)
                    done.append(job.id)

        async with anyio.create_task_group() as tg:
            for i in range(8):
                tg.start_soon(worker, JobQueue(a if i % 2 else b), f"w{i}")
        assert overlaps == []
        assert len(done) == 24 == len(set(done))


async def test_a_second_os_process_never_claims_the_same_job(db_url: str) -> None:
    total = 200
    async with opened(db_url) as s:
        queue = JobQueue(s)
        for i in range(total):
            await queue.enqueue("delivery", None, {"n": i})
        async with await anyio.open_process(
            claimer_command(db_url, LEASE), cwd=REPO_ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE
        ) as proc:
            assert proc.stdin is not None and proc.stdout is not None
            output = b""
            with anyio.fail_after(30):
                while b"ready" not in output:
                    output += await proc.stdout.receive()
                await proc.stdin.send(b"go\n")
                mine: list[int] = []
                await claim_all(queue, "test-process", LEASE, mine)
                while b"end" not in output:
                    output += await proc.stdout.receive()
                assert await proc.wait() == 0
        theirs = [int(line) for line in output.decode().split() if line.isdigit()]
        counts = Counter(mine + theirs)
        assert len(counts) == total and set(counts.values()) == {1}
        assert (await s.stats())["jobs"]["done"] == total


async def test_the_claim_index_nothing_reads_is_dropped_from_older_databases(db_url: str) -> None:
    """v3 added `jobs_state_id` for the claims before fairness; v6 drops it (each job wrote it twice).
    A database of either version ends at the current one without it, its jobs still claimed."""
    for old_version in (2, 5):
        async with opened(db_url) as s, s.write() as conn:
            await conn.execute(text("DROP INDEX IF EXISTS jobs_state_id"))
            if old_version == 5:  # as v3 made it
                await conn.execute(text("CREATE INDEX jobs_state_id ON jobs (state, id)"))
            await conn.execute(text("UPDATE schema_version SET version = :v"), {"v": old_version})
        async with opened(db_url) as s:
            async with s.read() as conn:
                version = (await conn.execute(text("SELECT version FROM schema_version"))).scalar_one()
                indexes = await conn.run_sync(lambda c: {i["name"] for i in inspect(c).get_indexes("jobs")})
            queue = JobQueue(s)
            await queue.enqueue("w", f"after-v{old_version}")
            job = await queue.claim("test", LEASE)
        assert version == SCHEMA_VERSION >= 6  # v7 and later keep what v6 dropped dropped
        assert "jobs_state_id" not in indexes and "jobs_installation_state" in indexes
        assert job is not None and job.key == f"after-v{old_version}"
