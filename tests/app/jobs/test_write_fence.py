"""The write fence (bot/app/fence.py) on real SQLite/PostgreSQL and the fake GitHub: a worker paused
past its lease makes no write once another worker holds its job; one whose job nobody took renews
the lease and goes on; a fresh lease costs no database call.

The store's clock is the test's, so a lease expires without sleeping; the pool's own heartbeats are
kept out of the way (a heartbeat interval longer than the test), as they are in a paused process.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import anyio
import pytest

from bot.app.effects.journal import Journal
from bot.app.effects.writer import GitHubEffects
from bot.app.github.client import InstallationClient
from bot.app.jobs.queue import Job, JobQueue
from bot.app.jobs.signals import LeaseLost
from bot.app.jobs.store import Store
from bot.app.jobs.workers import WorkerPool
from tests.support.db import (  # noqa: F401 - fixtures, by their names
    FakeClock,
    clocked_store_fixture,
    db_url_fixture,
    fake_clock_fixture,
    pg_database_url_fixture,
)
from tests.support.fake_github import FakeGitHub, checked_fake_github, installation_client

REPO = "octo/fence"
OWNER, NAME = REPO.split("/")
INSTALLATION = 41
LEASE = 30.0
NEVER = 3600.0  # a heartbeat interval no test lives to see

pytestmark = pytest.mark.anyio


class CountingQueue(JobQueue):
    """The real queue, counting the lease confirmations the fence asks of the database."""

    beats = 0

    async def heartbeat(self, job: Job, lease_seconds: float) -> bool:
        self.beats += 1
        return await super().heartbeat(job, lease_seconds)


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    with checked_fake_github() as fake:
        fake.add_repo(REPO, installation_id=INSTALLATION)
        fake.add_pull(REPO, number=5, head_sha="c" * 40, head_ref="topic")
        yield fake


@pytest.fixture
async def gh(fake: FakeGitHub) -> AsyncIterator[InstallationClient]:
    async with installation_client(fake, INSTALLATION) as client:
        yield client


def comments_posted(fake: FakeGitHub) -> int:
    return len(fake.calls_to("issues/create-comment"))


async def run_paused_job(
    queue: JobQueue,
    handler_after_pause: Callable[[Job], Awaitable[None]],
    during_pause: Callable[[], Awaitable[None]],
) -> tuple[WorkerPool, list[BaseException]]:
    """Worker A claims the one queued job and "pauses" in its handler (no heartbeat, no write);
    `during_pause` runs; then A's handler goes on with `handler_after_pause`."""
    resume, started = anyio.Event(), anyio.Event()
    refused: list[BaseException] = []

    async def handler(job: Job) -> None:
        started.set()
        await resume.wait()
        try:
            await handler_after_pause(job)
        except LeaseLost as lost:
            refused.append(lost)
            await handler_after_pause(job)  # and once more: refused too

    pool = WorkerPool(queue, handler, concurrency=1, lease_seconds=LEASE, heartbeat_interval=NEVER)
    with anyio.fail_after(20):
        async with pool:
            await started.wait()
            await during_pause()
            resume.set()
            while pool.stats.started > sum(
                (pool.stats.succeeded, pool.stats.lease_lost, pool.stats.retried, pool.stats.dead)
            ):
                await anyio.sleep(0.01)
    return pool, refused


async def test_a_worker_paused_past_its_lease_writes_nothing_once_another_worker_holds_its_job(
    clocked_store: Store, fake_clock: FakeClock, fake: FakeGitHub, gh: InstallationClient
) -> None:
    queue = CountingQueue(clocked_store)
    job_id = await queue.enqueue("review", f"{REPO}#5")
    taken: list[Job] = []

    async def another_worker_takes_over() -> None:
        fake_clock.advance(LEASE + 1)  # A's lease has expired: B's claim takes the job
        job = await queue.claim("worker-b/0", LEASE)
        assert job is not None and job.id == job_id and job.attempts == 2
        taken.append(job)

    async def post(job: Job) -> None:
        await gh.create_comment(OWNER, NAME, 5, f"from attempt {job.attempts}")

    pool, refused = await run_paused_job(queue, post, another_worker_takes_over)

    assert comments_posted(fake) == 0  # neither the write nor the one tried after it reached GitHub
    assert len(refused) == 1 and pool.stats.lease_lost == 1 and pool.stats.succeeded == 0
    assert queue.beats == 1  # asked once; the second write was refused without asking again
    # B still holds the job, untouched by A's attempt, and completes it.
    assert await queue.complete(taken[0])


async def test_a_push_of_a_job_another_worker_took_is_not_made(
    clocked_store: Store, fake_clock: FakeClock, gh: InstallationClient
) -> None:
    # A push is git, not an API call: the journal's writer checks the fence itself before it.
    queue = CountingQueue(clocked_store)
    await queue.enqueue("run", f"{REPO}#5")
    effects = GitHubEffects(gh, Journal(clocked_store), in_flight=0)
    pushed: list[str] = []

    async def another_worker_takes_over() -> None:
        fake_clock.advance(LEASE + 1)
        assert await queue.claim("worker-b/0", LEASE) is not None

    async def push(job: Job) -> None:
        async def tip() -> str | None:
            return None

        async def send() -> None:
            pushed.append("c1")

        await effects.push(f"run-{job.id}:push", "c1", tip, send)

    pool, refused = await run_paused_job(queue, push, another_worker_takes_over)

    assert pushed == [] and len(refused) == 1 and pool.stats.lease_lost == 1


async def test_a_paused_worker_whose_job_nobody_took_renews_its_lease_and_writes(
    clocked_store: Store, fake_clock: FakeClock, fake: FakeGitHub, gh: InstallationClient
) -> None:
    queue = CountingQueue(clocked_store)
    await queue.enqueue("review", f"{REPO}#5")
    leases: list[float] = []

    async def nobody_comes() -> None:
        fake_clock.advance(LEASE + 1)  # expired, but no claim has taken the job

    async def post(job: Job) -> None:
        await gh.create_comment(OWNER, NAME, 5, "still mine")
        leases.append(job.lease_expires_at)
        # Renewed: nobody can claim it now for a whole lease.
        assert await queue.claim("worker-b/0", LEASE) is None

    pool, refused = await run_paused_job(queue, post, nobody_comes)

    assert not refused and pool.stats.succeeded == 1 and pool.stats.lease_lost == 0
    assert comments_posted(fake) == 1 and queue.beats == 1
    assert leases == [fake_clock() + LEASE]


async def test_a_fresh_lease_lets_every_write_through_without_asking_the_database(
    clocked_store: Store, fake_clock: FakeClock, fake: FakeGitHub, gh: InstallationClient
) -> None:
    queue = CountingQueue(clocked_store)
    await queue.enqueue("review", f"{REPO}#5")

    async def quick() -> None:
        fake_clock.advance(LEASE / 2 - 1)  # under half the lease gone: still fresh

    async def writes(job: Job) -> None:
        made = await gh.create_comment(OWNER, NAME, 5, "one")
        await gh.update_comment(OWNER, NAME, made.id, "one, edited")
        await gh.create_comment(OWNER, NAME, 5, "two")

    pool, refused = await run_paused_job(queue, writes, quick)

    assert not refused and pool.stats.succeeded == 1
    assert comments_posted(fake) == 2 and len(fake.calls_to("issues/update-comment")) == 1
    assert queue.beats == 0


async def test_writes_outside_a_job_are_not_fenced(fake: FakeGitHub, gh: InstallationClient) -> None:
    # Intake, the periodic sweep and the CLI write with no job: nothing to confirm, nothing refused.
    await gh.create_comment(OWNER, NAME, 5, "from no job")
    assert comments_posted(fake) == 1
