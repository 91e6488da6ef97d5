"""The durable job queue: claim with a lease, retry with backoff, one job at a time per pull request.

A job is claimed by one UPDATE that picks the oldest claimable row and marks it running with a lease
(owner + expiry). Claimable means queued and due, or running with an expired lease: a worker that died
left its job behind, and the next claim recovers it. On PostgreSQL the pick uses
`FOR UPDATE SKIP LOCKED`, so concurrent claimers (any number of processes) never wait on or take the
same row; on SQLite the claim runs inside `BEGIN IMMEDIATE`, which serialises writers across processes.

Jobs with the same `key` ("owner/repo#N") run one at a time: a job is skipped while another job with
its key is running, and a partial unique index on `(key) WHERE state = 'running'` makes the database
refuse a second one even if two claims race.

`attempts` counts claims. Each claim adds one, so a job whose worker keeps dying is also bounded by
`max_attempts`. Every finishing call is a compare-and-set on (owner, attempt): a worker that lost its
lease cannot complete or fail a job another worker now holds.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy import RowMapping, and_, insert, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from bot.app.jobs.schema import DEFAULT_MAX_ATTEMPTS, deliveries, jobs
from bot.app.jobs.store import Store

FinalState = Literal["queued", "failed", "dead"]

MAX_ERROR_CHARS = 4000
_CLAIM_RACE_RETRIES = 5


@dataclass(slots=True)
class Job:
    """A claimed job, as the worker holding its lease sees it."""

    id: int
    kind: str
    key: str | None
    delivery_id: str | None
    payload: dict[str, Any] | None
    attempts: int
    max_attempts: int
    lease_owner: str
    lease_expires_at: float
    event: str | None = None
    action: str | None = None
    delivery_payload: bytes | None = None


class JobQueue:
    """Enqueue, claim and finish jobs; one instance per process is enough (it holds no connection)."""

    def __init__(
        self,
        store: Store,
        *,
        backoff_base: float = 5.0,
        backoff_cap: float = 600.0,
        backoff_jitter: float = 0.1,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    ) -> None:
        self.store = store
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self.backoff_jitter = backoff_jitter
        self.max_attempts = max_attempts

    def backoff(self, attempts: int) -> float:
        """Delay before the next try after `attempts` tries: base * 2^(attempts-1), capped, jittered."""
        delay = min(self.backoff_cap, self.backoff_base * 2.0 ** max(0, attempts - 1))
        # Jitter spreads retries of jobs that failed together (e.g. a GitHub outage).
        delay *= 1 + self.backoff_jitter * random.random()  # noqa: S311 - not for security
        return min(self.backoff_cap, delay)

    async def enqueue(
        self,
        kind: str,
        key: str | None,
        payload: Mapping[str, Any] | None = None,
        run_after: float | None = None,
        *,
        max_attempts: int | None = None,
        if_absent: bool = False,
    ) -> int:
        """Add a job and return its id. With `if_absent`, an already queued job of the same kind and
        key is returned instead (for periodic jobs such as `poll_approvals`)."""
        now = self.store.clock()
        async with self.store.write() as conn:
            if if_absent:
                same_key = jobs.c.key.is_(None) if key is None else jobs.c.key == key
                found = select(jobs.c.id).where(jobs.c.kind == kind, same_key, jobs.c.state == "queued")
                existing = (await conn.execute(found.order_by(jobs.c.id).limit(1))).scalar()
                if existing is not None:
                    return int(existing)
            row = {
                "kind": kind,
                "key": key,
                "payload": dict(payload) if payload is not None else None,
                "state": "queued",
                "attempts": 0,
                "max_attempts": max_attempts or self.max_attempts,
                "run_after": now if run_after is None else run_after,
                "created_at": now,
                "updated_at": now,
            }
            return int((await conn.execute(insert(jobs).values(row).returning(jobs.c.id))).scalar_one())

    async def claim(self, worker_id: str, lease_seconds: float) -> Job | None:
        """Take the oldest claimable job for `worker_id`, or None when there is nothing to do."""
        races = 0
        while True:
            now = self.store.clock()
            try:
                async with self.store.write() as conn:
                    row = (await conn.execute(self._claim_statement(now, worker_id, lease_seconds))).first()
                    if row is None:
                        return None
                    if row.attempts > row.max_attempts:
                        # Its last allowed attempt died with the worker: bury it, look again.
                        await self._bury_expired(conn, row.id, row.max_attempts, now)
                        continue
                    return await self._job(conn, row._mapping)
            except IntegrityError:
                # Two claims raced for the same key and the unique index stopped the second one.
                races += 1
                if races >= _CLAIM_RACE_RETRIES:
                    return None

    def _claim_statement(self, now: float, worker_id: str, lease_seconds: float) -> Any:
        cand = jobs.alias("cand")
        other = jobs.alias("other")
        key_busy = (
            select(other.c.id)
            .where(other.c.key == cand.c.key, other.c.state == "running", other.c.id != cand.c.id)
            .exists()
        )
        claimable = or_(
            and_(cand.c.state == "queued", cand.c.run_after <= now),
            and_(cand.c.state == "running", cand.c.lease_expires_at < now),
        )
        pick = select(cand.c.id).where(claimable, or_(cand.c.key.is_(None), ~key_busy)).order_by(cand.c.id)
        pick = pick.limit(1)
        if not self.store.is_sqlite:
            pick = pick.with_for_update(skip_locked=True)
        return (
            update(jobs)
            .where(jobs.c.id == pick.scalar_subquery())
            .values(
                state="running",
                attempts=jobs.c.attempts + 1,
                lease_owner=worker_id,
                lease_expires_at=now + lease_seconds,
                updated_at=now,
            )
            .returning(*jobs.c)
        )

    async def _bury_expired(self, conn: AsyncConnection, job_id: int, max_attempts: int, now: float) -> None:
        await conn.execute(
            update(jobs)
            .where(jobs.c.id == job_id)
            .values(
                state="dead",
                attempts=max_attempts,
                lease_owner=None,
                lease_expires_at=None,
                last_error=f"lease expired during the last attempt ({max_attempts}): worker lost",
                updated_at=now,
            )
        )

    async def _job(self, conn: AsyncConnection, row: RowMapping) -> Job:
        job = Job(
            id=row["id"],
            kind=row["kind"],
            key=row["key"],
            delivery_id=row["delivery_id"],
            payload=row["payload"],
            attempts=row["attempts"],
            max_attempts=row["max_attempts"],
            lease_owner=row["lease_owner"],
            lease_expires_at=row["lease_expires_at"],
        )
        if job.delivery_id is not None:
            stmt = select(deliveries.c.event, deliveries.c.action, deliveries.c.payload).where(
                deliveries.c.delivery_id == job.delivery_id
            )
            found = (await conn.execute(stmt)).first()
            if found is not None:
                job.event, job.action = found.event, found.action
                job.delivery_payload = found.payload.encode("utf-8")
        return job

    def _held(self, job: Job) -> Any:
        """The compare-and-set condition: this worker still holds this attempt's lease."""
        return and_(
            jobs.c.id == job.id,
            jobs.c.state == "running",
            jobs.c.lease_owner == job.lease_owner,
            jobs.c.attempts == job.attempts,
        )

    async def _finish(self, job: Job, **values: Any) -> bool:
        values.setdefault("updated_at", self.store.clock())
        async with self.store.write() as conn:
            return (await conn.execute(update(jobs).where(self._held(job)).values(**values))).rowcount == 1

    async def heartbeat(self, job: Job, lease_seconds: float) -> bool:
        """Extend the lease; False when it was lost (another worker took the job over)."""
        expires = self.store.clock() + lease_seconds
        if await self._finish(job, lease_expires_at=expires):
            job.lease_expires_at = expires
            return True
        return False

    async def complete(self, job: Job) -> bool:
        return await self._finish(job, state="done", lease_owner=None, lease_expires_at=None, last_error=None)

    async def fail(
        self, job: Job, error: str, retryable: bool, *, retry_after: float | None = None
    ) -> FinalState | None:
        """Record a failed attempt; return the job's new state, or None if the lease was lost.

        Retryable failures go back to the queue after a backoff (or `retry_after` seconds) until
        `max_attempts` tries were made, then the job is `dead`; a permanent failure is `failed` at once.
        """
        error = error[:MAX_ERROR_CHARS]
        cleared = {"lease_owner": None, "lease_expires_at": None, "last_error": error}
        state: FinalState
        if retryable and job.attempts < job.max_attempts:
            delay = self.backoff(job.attempts) if retry_after is None else retry_after
            state = "queued"
            ok = await self._finish(job, state=state, run_after=self.store.clock() + delay, **cleared)
        else:
            state = "dead" if retryable else "failed"
            ok = await self._finish(job, state=state, **cleared)
        return state if ok else None

    async def release(self, job: Job) -> bool:
        """Give a job back untried (the worker is shutting down): due now, this attempt not counted."""
        return await self._finish(
            job,
            state="queued",
            attempts=job.attempts - 1,
            run_after=self.store.clock(),
            lease_owner=None,
            lease_expires_at=None,
        )

    async def reclaim(self, owner_prefix: str) -> int:
        """Make the running jobs leased to `owner_prefix...` claimable now (issue 8): a restarted
        process takes back its previous incarnation's jobs at once instead of after their lease."""
        now = self.store.clock()
        held = and_(jobs.c.state == "running", jobs.c.lease_owner.startswith(owner_prefix, autoescape=True))
        async with self.store.write() as conn:
            result = await conn.execute(
                update(jobs).where(held).values(lease_expires_at=now - 1, updated_at=now)
            )
            return int(result.rowcount)

    async def reschedule(self, job: Job, at: float) -> bool:
        """Queue this job again for `at` as the same row, this attempt not counted (periodic jobs)."""
        return await self._finish(
            job,
            state="queued",
            attempts=job.attempts - 1,
            run_after=at,
            lease_owner=None,
            lease_expires_at=None,
            last_error=None,
        )

    async def schedule(self, kind: str, key: str, payload: Mapping[str, Any] | None, at: float) -> int:
        """Make sure a job of this kind and key runs by `at`: an already queued one is moved earlier
        (never later), else a new one is added. Several wake-ups thus share one row."""
        async with self.store.write() as conn:
            found = select(jobs.c.id, jobs.c.run_after).where(
                jobs.c.kind == kind, jobs.c.key == key, jobs.c.state == "queued"
            )
            row = (await conn.execute(found.order_by(jobs.c.id).limit(1))).first()
            if row is not None:
                if row.run_after > at:
                    stmt = update(jobs).where(jobs.c.id == row.id, jobs.c.state == "queued")
                    await conn.execute(stmt.values(run_after=at, updated_at=self.store.clock()))
                return int(row.id)
        return await self.enqueue(kind, key, payload, run_after=at)

    async def get(self, job_id: int) -> dict[str, Any] | None:
        """The job's row as stored (for status pages and tests)."""
        async with self.store.read() as conn:
            row = (await conn.execute(select(jobs).where(jobs.c.id == job_id))).first()
        return dict(row._mapping) if row is not None else None
