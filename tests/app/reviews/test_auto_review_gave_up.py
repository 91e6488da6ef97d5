"""An automatic review whose job is given up is never left half-done (reviews/abandoned.py), on real
SQLite and PostgreSQL, the fake GitHub and real git: the head's check run is completed neutral as
"The review failed", the summary says so in one line, the run row is `failed`, and doing it again
(the worker's hook, then the periodic sweep) changes nothing."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from sqlalchemy import update

from bot.app.assembly import JobHandlers
from bot.app.jobs.queue import Job
from bot.app.jobs.schema import jobs
from bot.app.jobs.workers import WorkerPool
from bot.app.limits.policy import Limits
from bot.app.reviews.abandoned import AbandonedReviews
from bot.app.reviews.auto_review_job import KIND, ReviewJob
from tests.app.reviews.test_auto_review_limits import REPO, Rig, rigged
from tests.support.db import FakeClock

pytestmark = pytest.mark.anyio

LOST = (
    "the review failed (BEM-339: the job was given up: the process running it was lost on its last attempt)"
)
FAILED = "the review failed (BEM-340: the job failed and will not be retried)"


class Killed(BaseException):
    """The worker process dies here: no `except Exception` runs, nothing after it either."""


async def kill_at_the_model(*_: Any) -> Any:
    raise Killed


def abandoned(rig: Rig) -> AbandonedReviews:
    return AbandonedReviews(rig.job.github, rig.job.deps, rig.job.states)


async def last_attempt_dies(rig: Rig, clock: FakeClock) -> Job:
    """Claim the review job with one attempt allowed, kill it at the model, and let its lease run
    out: the next claim buries it (`dead`), and no hook hears of that."""
    async with rig.store.write() as conn:
        await conn.execute(update(jobs).where(jobs.c.kind == KIND).values(max_attempts=1))
    job = await rig.queue.claim("worker", 60.0)
    assert job is not None and job.kind == KIND
    rig.llm.complete = kill_at_the_model  # type: ignore[method-assign]
    with pytest.raises(BaseException) as died:
        await rig.job(job)
    value = died.value
    assert isinstance(value, Killed) or (isinstance(value, BaseExceptionGroup) and value.subgroup(Killed))
    del rig.llm.complete  # the model answers again
    clock.advance(61)
    return job


def check_of(rig: Rig, head: str) -> Any:
    [check] = [c for c in rig.checks() if c.head_sha == head]
    return check


async def test_a_review_whose_worker_dies_on_its_last_attempt_is_ended_by_the_sweep(
    db_url: str, fake_clock: FakeClock, tmp_path: Path
) -> None:
    async with rigged(db_url, fake_clock, tmp_path, Limits()) as rig:
        await rig.send("opened")
        job = await last_attempt_dies(rig, fake_clock)
        head, base = rig.head, rig.fake.pull(REPO, 7).base_sha
        # What the dead worker left: the check run in progress, the run row running.
        assert check_of(rig, head).status == "in_progress"
        [run] = await rig.review_runs()
        assert run["status"] == "running"
        assert await rig.queue.claim("worker", 60.0) is None  # the claim buries it
        row = await rig.queue.get(job.id)
        assert row is not None and row["state"] == "dead"

        assert await abandoned(rig).finish() == 1
        check = check_of(rig, head)
        assert (check.status, check.conclusion) == ("completed", "neutral")
        assert check.output is not None and check.output["title"] == "The review failed"
        assert f"- `{base[:7]}..{head[:7]}`: {LOST}; the next push tries again" in rig.summary()
        [run] = await rig.review_runs()
        assert (run["status"], run["error_code"]) == ("failed", "BEM-339")
        assert run["finished_at"] is not None

        # Exactly once: the sweep again, and the hook late, change nothing on GitHub.
        calls = len(rig.fake.calls)
        assert await abandoned(rig).finish() == 0
        assert await abandoned(rig).finish(job.id) == 0
        assert len(rig.fake.calls) == calls
        assert rig.summary().count("the review failed") == 1
        assert check.history.count("completed") == 1

        # The next push is reviewed as usual, in full (nothing was reviewed).
        rig.script_review()
        second = rig.push("c")
        await rig.send("synchronize")
        assert await rig.work() == 1
        assert check_of(rig, second).output["title"] == "1 finding"


async def test_a_job_that_died_after_a_newer_push_leaves_that_push_to_its_own_job(
    db_url: str, fake_clock: FakeClock, tmp_path: Path
) -> None:
    async with rigged(db_url, fake_clock, tmp_path, Limits()) as rig:
        await rig.send("opened")
        first = rig.head
        job = await last_attempt_dies(rig, fake_clock)
        second = rig.push("c")
        await rig.send("synchronize")  # a new generation, its own queued check run and job
        newer = await rig.queue.claim("worker", 60.0)  # buries the dead one, takes the new one
        assert newer is not None and newer.id != job.id
        row = await rig.queue.get(job.id)
        assert row is not None and row["state"] == "dead"

        assert await abandoned(rig).finish() == 1
        old = check_of(rig, first)
        assert (old.status, old.conclusion) == ("completed", "neutral")
        assert old.output is not None and old.output["title"] == "Superseded by a newer push"
        assert check_of(rig, second).status == "queued"  # the newer job's, untouched
        assert [c.body for c in rig.fake.comments_on(REPO, 7)] == []  # no summary line for it
        [run] = await rig.review_runs()
        assert run["status"] == "failed"

        rig.script_review()
        await rig.job(newer)
        assert await rig.queue.complete(newer)
        assert check_of(rig, second).output["title"] == "1 finding"
        assert "the review failed" not in rig.summary()


class Reviews:
    """The dispatcher's part the worker pool reaches for an `auto_review` job."""

    def __init__(self, job: ReviewJob) -> None:
        self.job = job

    async def handle_job(self, job: Job) -> None:
        await self.job(job)


async def wait_until(condition: Callable[[], Any], timeout: float = 20.0) -> None:
    with anyio.fail_after(timeout):
        while not await condition():
            await anyio.sleep(0.02)


async def test_a_review_that_fails_for_good_says_so_once_through_the_workers_hook(
    db_url: str, fake_clock: FakeClock, tmp_path: Path
) -> None:
    async with rigged(db_url, fake_clock, tmp_path, Limits()) as rig:
        await rig.send("opened")
        head = rig.head
        rig.fake.inject("GET", r"/pulls/7/files", status=422, times=None)  # no retry mends this
        handlers = JobHandlers(Reviews(rig.job), rig.job.deps, rig.job.github)  # type: ignore[arg-type]
        pool = WorkerPool(rig.queue, handlers, concurrency=1, poll_interval=0.02, on_gave_up=handlers.gave_up)

        async def told() -> bool:
            comments = rig.fake.comments_on(REPO, 7)
            return bool(comments) and FAILED in comments[0].body

        async with pool:
            await wait_until(told)
        assert pool.stats.failed == 1
        check = check_of(rig, head)
        assert (check.status, check.conclusion) == ("completed", "neutral")
        assert check.output is not None and check.output["title"] == "The review failed"
        assert check.history.count("completed") == 1  # the job completed it; the hook left it so
        assert rig.summary().count("the review failed") == 1
        assert await abandoned(rig).finish() == 0  # the sweep finds it seen to


async def test_a_job_buried_before_it_read_the_pull_request_ends_the_queued_check_run(
    db_url: str, fake_clock: FakeClock, tmp_path: Path
) -> None:
    async with rigged(db_url, fake_clock, tmp_path, Limits()) as rig:
        await rig.send("opened")
        head = rig.head
        job = await rig.queue.claim("worker", 60.0)
        assert job is not None
        # Its worker died before the job noted where it was; a claim buried it as it does.
        async with rig.store.write() as conn:
            lost = "lease expired during the last attempt (5): worker lost"
            await conn.execute(update(jobs).where(jobs.c.id == job.id).values(state="dead", last_error=lost))
        assert check_of(rig, head).status == "queued"

        assert await abandoned(rig).finish() == 1
        check = check_of(rig, head)
        assert (check.status, check.conclusion) == ("completed", "neutral")
        assert check.output is not None and check.output["title"] == "The review failed"
        assert f"- `{head[:7]}`: {LOST}; the next push tries again" in rig.summary()
        state = await rig.job.states.get(REPO, 7)
        assert state is not None and state.check_run_id is None
        assert await abandoned(rig).finish() == 0


async def test_the_hook_and_the_sweep_at_once_post_one_summary(
    db_url: str, fake_clock: FakeClock, tmp_path: Path
) -> None:
    """The worker that buried the job and the periodic sweep (two processes, in production) both set
    out to show its end: the first to claim it shows it, the other leaves it; one summary comment."""
    async with rigged(db_url, fake_clock, tmp_path, Limits()) as rig:
        await rig.send("opened")
        job = await last_attempt_dies(rig, fake_clock)
        assert await rig.queue.claim("worker", 60.0) is None  # the claim buries it
        shown: list[int] = []

        async def finish(job_id: int | None) -> None:
            shown.append(await abandoned(rig).finish(job_id))

        async with anyio.create_task_group() as both:
            both.start_soon(finish, job.id)
            both.start_soon(finish, None)
        assert sorted(shown) == [0, 1]
        assert len(rig.fake.calls_to("issues/create-comment")) == 1
        assert rig.summary().count("the review failed") == 1
        assert await abandoned(rig).finish() == 0
