"""The worker pool: N claim loops in one process, each running a job under a lease and a timeout and
recording how it ended; one task of the pool heartbeats every running job's lease.

A handler signals how it failed by the exception it raises (signals.py): `RetryableError` (try
again after a backoff, or after `retry_after`), `PermanentError` (never again), anything else (a bug
or an outage we did not foresee: retried too, up to the job's `max_attempts`, so a transient fault
heals and a persistent one ends as `dead` with its error). A timeout counts as a retryable failure.

While a handler runs, every GitHub write it makes passes the write fence (bot/app/fence.py,
`_confirm`): a worker that was paused past its lease finds out before its next write, not after it.

Idle loops sleep `poll_interval` between claims; `notify()` (called by intake after it stored a job)
wakes them at once, so latency is low without polling the database hard.

Issue 8: `run()` first takes back the jobs a previous incarnation of this `worker_id` held (a stable
id from the work directory makes a restart resume its work at once); `on_gave_up` is told of every job
that ends `failed` or `dead`, and `periodic` runs every `periodic_interval` seconds (the sweep that
finishes tracking comments left non-final).

`run()` runs until cancelled or until `stop` is set. On a stop, loops take no new job and in-flight
jobs get `shutdown_grace` seconds to finish; a job still running after that, or when `run()` is
cancelled, is handed back to the queue (`release`) so another worker starts it at once instead of
waiting for its lease to expire.
"""

from __future__ import annotations

import functools
import logging
import os
import socket
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from types import TracebackType

import anyio
import anyio.abc

from bot.app.fence import fenced
from bot.app.jobs.queue import LOST_ON_LAST_ATTEMPT, Job, JobQueue
from bot.app.jobs.signals import LeaseLost, PermanentError, Reschedule, RetryableError
from bot.app.jobs.worker_stats import OUTCOME_COUNTERS, WorkerStats
from bot.app.logs import job_fields, log_context

__all__ = ["Handler", "Job", "WorkerPool", "WorkerStats"]

log = logging.getLogger("beam.workers")

Handler = Callable[[Job], Awaitable[None]]
GaveUp = Callable[[Job, str], Awaitable[None]]
Periodic = Callable[[], Awaitable[None]]
Observer = Callable[[float, str], None]


@dataclass(slots=True)
class _Attempt:
    """What one run of the handler came to; `outcome` stays "released" until the end is recorded."""

    outcome: str = "released"
    succeeded: bool = False
    lease_lost: bool = False
    error: str = ""
    retryable: bool = True
    retry_after: float | None = None
    reschedule_at: float | None = None
    next_job: Job | None = None


@dataclass(slots=True)
class _Running:
    """A job whose handler runs now, as the pool's heartbeat task sees it."""

    job: Job
    attempt: _Attempt
    scope: anyio.CancelScope  # the handler's: cancelled when the lease is lost
    next_beat: float  # monotonic time of its next heartbeat
    confirmed: float  # monotonic time of the last claim or renewal the database accepted (when sent)


def default_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


class WorkerPool:
    """`concurrency` loops sharing one queue; usable as `await pool.run(stop)` or `async with pool:`."""

    def __init__(
        self,
        queue: JobQueue,
        handler: Handler,
        *,
        concurrency: int,
        lease_seconds: float = 60.0,
        job_timeout: float = 600.0,
        poll_interval: float = 0.5,
        worker_id: str | None = None,
        heartbeat_interval: float | None = None,
        shutdown_grace: float = 10.0,
        observer: Observer | None = None,
        on_gave_up: GaveUp | None = None,
        periodic: Periodic | None = None,
        periodic_interval: float = 30.0,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.queue = queue
        self.handler = handler
        self.concurrency = concurrency
        self.lease_seconds = lease_seconds
        self.job_timeout = job_timeout
        self.poll_interval = poll_interval
        self.worker_id = worker_id or default_worker_id()
        # A third of the lease: two heartbeats can be lost before another worker may take the job.
        self.heartbeat_interval = heartbeat_interval or lease_seconds / 3
        self.shutdown_grace = shutdown_grace
        self.observer = observer
        self.on_gave_up = on_gave_up
        self.periodic = periodic
        self.periodic_interval = periodic_interval
        self.stats = WorkerStats()
        self._wake = anyio.Event()
        self._stopping = anyio.Event()
        self._tg: anyio.abc.TaskGroup | None = None
        self._running: dict[int, _Running] = {}
        self._reports: anyio.abc.TaskGroup | None = None

    def notify(self) -> None:
        """Wake idle loops now: a job was just enqueued (call from the event loop)."""
        self._wake.set()

    def stop(self) -> None:
        """Take no new jobs; `run()` returns once in-flight jobs end (or the grace period is over)."""
        self._stopping.set()
        self._wake.set()

    async def run(self, stop: anyio.Event | None = None) -> None:
        await self._reclaim()
        async with anyio.create_task_group() as tg:
            if stop is not None:
                tg.start_soon(self._stop_when, stop)
            if self.periodic is not None:
                tg.start_soon(self._run_periodic, self.periodic)
            tg.start_soon(self._heartbeats)
            self._reports = tg
            async with anyio.create_task_group() as loops:
                for index in range(self.concurrency):
                    loops.start_soon(self._loop, f"{self.worker_id}/{index}")
                await self._stopping.wait()
                loops.cancel_scope.deadline = anyio.current_time() + self.shutdown_grace
            tg.cancel_scope.cancel()

    async def __aenter__(self) -> WorkerPool:
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._tg.start_soon(self.run)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        assert self._tg is not None
        self.stop()
        tg, self._tg = self._tg, None
        return await tg.__aexit__(exc_type, exc, tb)

    async def _reclaim(self) -> None:
        try:
            taken = await self.queue.reclaim(f"{self.worker_id}/")
        except Exception:
            log.exception("worker %s could not take back its earlier jobs", self.worker_id)
            return
        if taken:
            log.info("worker %s takes back %d job(s) its previous incarnation held", self.worker_id, taken)

    async def _run_periodic(self, periodic: Periodic) -> None:
        while not self._stopping.is_set():
            try:
                await periodic()
            except Exception:
                log.exception("the periodic task of worker %s failed", self.worker_id)
            with anyio.move_on_after(self.periodic_interval):
                await self._stopping.wait()

    async def _stop_when(self, stop: anyio.Event) -> None:
        await stop.wait()
        self.stop()

    async def _idle(self) -> None:
        with anyio.move_on_after(self.poll_interval):
            await self._wake.wait()
        if self._wake.is_set() and not self._stopping.is_set():
            self._wake = anyio.Event()

    async def _loop(self, owner: str) -> None:
        job: Job | None = None  # the next job, claimed with the last one's completion
        while not self._stopping.is_set():
            if job is None:
                try:
                    job = await self.queue.claim(owner, self.lease_seconds)
                except Exception:
                    # The database is down or locked for too long: keep the loop alive, try later.
                    self.stats.loop_errors += 1
                    log.exception("worker %s could not claim a job", owner)
                    await self._idle()
                    continue
                self._report_buried()
                if job is None:
                    await self._idle()
                    continue
            current, job = job, None
            try:
                job = await self._run(current)
            except Exception:
                # Recording the outcome failed (database trouble): the lease expires and another
                # claim recovers the job.
                self.stats.loop_errors += 1
                log.exception("worker %s could not record the end of job %s", owner, current.id)
                await self._idle()
        if job is not None:  # claimed just before the stop: hand it back at once
            with anyio.CancelScope(shield=True):
                await self._release(job)

    async def _run(self, job: Job) -> Job | None:
        # Every line logged while this job runs carries its delivery, job, repository and PR number.
        with log_context(**job_fields(job.id, job.delivery_id, job.key)):
            return await self._run_in_context(job)

    async def _run_in_context(self, job: Job) -> Job | None:
        self.stats.started += 1
        self.stats.in_flight += 1
        started = time.monotonic()
        attempt = _Attempt()
        log.info("job %s (%s, key %s) attempt %s started", job.id, job.kind, job.key, job.attempts)
        try:
            await self._call_handler(job, attempt)
            await self._record(job, attempt)
        finally:
            self.stats.in_flight -= 1
            if attempt.outcome == "released":
                # Cancelled (shutdown): give the job back so it need not wait for its lease to expire.
                with anyio.CancelScope(shield=True):
                    await self._release(job)
            elapsed = time.monotonic() - started
            self.stats.observe(elapsed)
            if self.observer is not None:
                self.observer(elapsed, attempt.outcome)
        return attempt.next_job

    async def _call_handler(self, job: Job, attempt: _Attempt) -> None:
        """Run the handler under its timeout while the pool's heartbeat keeps the lease; note how it
        ended. One scope serves both ends: its deadline is the timeout, and `_heartbeats` cancels it
        when the lease is lost (a task group, a task and a cancel per job were a fifth of a no-op job)."""
        with anyio.CancelScope(deadline=anyio.current_time() + self.job_timeout) as scope:
            now = time.monotonic()
            running = _Running(job, attempt, scope, now + self.heartbeat_interval, now)
            self._running[job.id] = running
            try:
                with fenced(functools.partial(self._confirm, running)):
                    await self.handler(job)
            except LeaseLost:
                pass  # the fence marked the attempt: nothing of it is recorded
            except Reschedule as again:
                attempt.reschedule_at = again.at
            except RetryableError as exc:
                attempt.error, attempt.retry_after = str(exc), exc.retry_after
            except PermanentError as exc:
                attempt.error, attempt.retryable = str(exc), False
            except Exception as exc:
                log.exception("job %s (%s) raised", job.id, job.kind)
                attempt.error = f"{type(exc).__name__}: {exc}"
            else:
                attempt.succeeded = True
            finally:
                # Before the end is recorded, so a heartbeat cannot mistake our own complete() for
                # a lost lease (one in flight now is ignored: the job is no longer registered).
                del self._running[job.id]
        if scope.cancelled_caught and not attempt.lease_lost:
            attempt.succeeded = False
            attempt.error = f"timed out after {self.job_timeout:g} s"
            self.stats.timed_out += 1

    async def _record(self, job: Job, attempt: _Attempt) -> None:
        if attempt.lease_lost:
            attempt.outcome = "lease_lost"
        elif attempt.reschedule_at is not None:
            ok = await self.queue.reschedule(job, attempt.reschedule_at)
            attempt.outcome = "rescheduled" if ok else "lease_lost"
        elif attempt.succeeded:
            # A busy worker completes this job and claims its next in one database round.
            lease = None if self._stopping.is_set() else self.lease_seconds
            done, attempt.next_job = await self.queue.complete_and_claim(job, lease)
            attempt.outcome = "success" if done else "lease_lost"
        else:
            state = await self.queue.fail(
                job, attempt.error, attempt.retryable, retry_after=attempt.retry_after
            )
            attempt.outcome = state or "lease_lost"
            log.info("job %s attempt %s: %s (%s)", job.id, job.attempts, attempt.error, attempt.outcome)
        counter = OUTCOME_COUNTERS[attempt.outcome]
        setattr(self.stats, counter, getattr(self.stats, counter) + 1)
        if attempt.outcome in ("failed", "dead"):
            await self._gave_up(job, attempt.error)
        self._report_buried()  # a completion that claimed the next job may have buried some
        if attempt.outcome == "lease_lost":
            log.warning("job %s: lease lost, another worker owns it now", job.id)

    async def _gave_up(self, job: Job, error: str) -> None:
        if self.on_gave_up is None:
            return
        try:  # never silent: the job's tracking comment is made final now
            await self.on_gave_up(job, error)
        except Exception:
            log.exception("job %s: could not report its end (the sweep will)", job.id)

    def _report_buried(self) -> None:
        """Report at once the end of every job a claim just buried (its worker died on the last
        attempt), beside the loops, so the claim that found them goes on to its own job."""
        for job in self.queue.take_buried():
            self.stats.dead += 1
            log.warning("job %s (%s): its last attempt's worker was lost; it is dead", job.id, job.kind)
            if self._reports is not None:
                self._reports.start_soon(self._gave_up, job, f"{LOST_ON_LAST_ATTEMPT}: worker lost")

    async def _heartbeats(self) -> None:
        """Extend the lease of every running job a heartbeat interval after its last one, for the
        whole pool in one task."""
        while True:
            now = time.monotonic()
            due = [r for r in self._running.values() if r.next_beat <= now]
            for running in due:
                await self._beat(running)
            # A job registered during the sleep is due an interval after it started, so after it.
            beats = [r.next_beat for r in self._running.values()]
            await anyio.sleep(max(0.0, min(beats, default=now + self.heartbeat_interval) - time.monotonic()))

    async def _beat(self, running: _Running) -> None:
        running.next_beat = time.monotonic() + self.heartbeat_interval
        try:
            held = await self._renew(running)
        except Exception:
            log.exception("job %s: heartbeat failed", running.job.id)
            return
        if not held and self._running.get(running.job.id) is running:
            self._lost(running)

    async def _renew(self, running: _Running) -> bool:
        """Extend the lease by the heartbeat's compare-and-set; False once another worker holds it."""
        sent = time.monotonic()
        held = await self.queue.heartbeat(running.job, self.lease_seconds)
        if held:
            running.confirmed = max(running.confirmed, sent)
        return held

    def _lost(self, running: _Running) -> None:
        # Someone else runs this job now: stop ours rather than do the work twice at once.
        running.attempt.lease_lost = True
        running.scope.cancel()

    async def _confirm(self, running: _Running) -> None:
        """The write fence of a running job (bot/app/fence.py): return only while the lease is ours.

        Fresh (confirmed under half a lease ago by both clocks: the monotonic one, and the wall clock
        other workers compare the lease's expiry with), it answers without the database, so a job's
        writes normally cost nothing more. Otherwise, after a pause or failed heartbeats, it renews
        the lease by the heartbeat's compare-and-set: held, the write goes on with a full lease
        ahead; taken by another worker, the attempt is lost and no write of it happens again.
        """
        job = running.job
        if not running.attempt.lease_lost:
            half = self.lease_seconds / 2
            fresh = time.monotonic() - running.confirmed < half
            if fresh and self.queue.store.clock() < job.lease_expires_at - half:
                return
            if await self._renew(running):
                return
            log.warning("job %s: lease lost before a write; the write is not made", job.id)
            self._lost(running)
        raise LeaseLost(f"job {job.id}: attempt {job.attempts} no longer holds its lease")

    async def _release(self, job: Job) -> None:
        try:
            if await self.queue.release(job):
                self.stats.released += 1
        except Exception:
            log.exception("job %s: could not release it; it runs again when its lease expires", job.id)
