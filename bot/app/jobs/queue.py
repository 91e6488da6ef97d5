"""The durable job queue: claim with a lease, retry with backoff, one job at a time per pull request.

A claim takes the oldest claimable row and marks it running with a lease (owner + expiry). Claimable
means queued and due, or running with an expired lease: a worker that died left its job behind, and
the next claim recovers it. Fairness (fairness.py) first chooses the installation served least
recently that has a due job (and room under its concurrency cap); its oldest claimable job is then
one statement of two `ORDER BY id LIMIT 1` probes of the `(installation_id, state, id)` index, so a
claim costs the same with 100 or 50,000 jobs queued. On SQLite the claim runs inside `BEGIN
IMMEDIATE`, which serialises writers across processes. On PostgreSQL the same steps run inside the
server, in one call of a PL/pgSQL function (pg_claims.py), one round trip where the statements sent one
by one took six; its probes use `FOR UPDATE SKIP LOCKED`, so concurrent claimers (any number of
processes) never wait on or take the same row. A worker that completes a job claims its next one in
the same transaction (`complete_and_claim`).

Jobs with the same `key` ("owner/repo#N") run one at a time: a job is skipped while another job with
its key is running, and a partial unique index on `(key) WHERE state = 'running'` makes the database
refuse a second one even if two claims race.

`attempts` counts claims. Each claim adds one, so a job whose worker keeps dying is also bounded by
`max_attempts`. Every finishing call is a compare-and-set on (owner, attempt): a worker that lost its
lease cannot complete or fail a job another worker now holds.
"""

from __future__ import annotations

import functools
import json
import random
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import anyio
from sqlalchemy import and_, insert, select, update
from sqlalchemy.exc import IntegrityError

from bot.app.jobs import pg_claims
from bot.app.jobs.fairness import MAX_CHOICES, SYSTEM_INSTALLATION, FairTurns, add_turns
from bot.app.jobs.fastpath import (
    CLAIM_STATEMENTS,
    ClaimStatements,
    HotConnection,
)
from bot.app.jobs.schema import DEFAULT_MAX_ATTEMPTS, jobs, queued_job
from bot.app.jobs.store import Store

FinalState = Literal["queued", "failed", "dead"]

MAX_ERROR_CHARS = 4000
# How `last_error` begins when a claim buries a job whose worker died on its last attempt (no hook
# heard of it; the periodic sweeps find it by this).
LOST_ON_LAST_ATTEMPT = "lease expired during the last attempt"
_CLAIM_RACE_RETRIES = 5
# SQLAlchemy's (PostgreSQL, the claim function's included) and sqlite3's own (SQLite's hot path).
_INTEGRITY_ERRORS = (IntegrityError, sqlite3.IntegrityError)


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
    installation_id: int = 0


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
        max_per_installation: int | None = None,
        capped_kinds: frozenset[str] | None = None,
    ) -> None:
        self.store = store
        self.turns = FairTurns(cap=max_per_installation, capped_kinds=capped_kinds)
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self.backoff_jitter = backoff_jitter
        self.max_attempts = max_attempts
        # Jobs a claim found dead on the way (their last attempt's worker was lost), not yet reported.
        self._buried: list[Job] = []

    _claims: ClaimStatements = CLAIM_STATEMENTS

    def take_buried(self) -> list[Job]:
        """The jobs claims buried since the last call: the pool reports each end at once (issue 23),
        rather than leaving its tracking comment at "Working" until the next periodic sweep."""
        buried, self._buried = self._buried, []
        return buried

    def _buried_job(self, job_id: int, kind: str) -> Job:
        return Job(job_id, kind, None, None, None, self.max_attempts, self.max_attempts, "", 0.0)

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
        installation_id: int = 0,
        delivery_id: str | None = None,
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
            row = queued_job(
                kind,
                key,
                now,
                installation_id=installation_id,
                delivery_id=delivery_id,
                max_attempts=max_attempts or self.max_attempts,
                run_after=run_after,
                payload=dict(payload) if payload is not None else None,
            )
            job_id = int((await conn.execute(insert(jobs).values(row).returning(jobs.c.id))).scalar_one())
            await conn.run_sync(add_turns, self.store.is_sqlite, [installation_id])
            return job_id

    async def claim(self, worker_id: str, lease_seconds: float) -> Job | None:
        """Take the oldest claimable job for `worker_id`, or None when there is nothing to do."""
        for _ in range(_CLAIM_RACE_RETRIES):
            try:
                # Shielded: a claim committed by the database is always returned to the caller,
                # whose worker then runs or releases it (never left running until its lease ends).
                with anyio.CancelScope(shield=True):
                    return await self._claim_once(worker_id, lease_seconds)
            except _INTEGRITY_ERRORS:
                # Two claims raced for the same key and the unique index stopped the second one.
                continue
        return None

    async def _claim_once(self, worker_id: str, lease_seconds: float) -> Job | None:
        now = self.store.clock()
        if not self.store.is_sqlite:
            call = pg_claims.ClaimCall(worker_id, now, now + lease_seconds, claim=True)
            return (await self._call_postgres(call))[1]
        claim = functools.partial(self._claim_in, now=now, worker_id=worker_id, lease_seconds=lease_seconds)
        return await self.store.run_hot(claim)

    async def _call_postgres(self, call: pg_claims.ClaimCall) -> tuple[bool | None, Job | None]:
        """Complete and/or claim in one call of the claim function (pg_claims.py): one round trip."""
        args = call.args(
            self.turns.cap, self.turns.capped_kinds, SYSTEM_INSTALLATION, MAX_CHOICES, LOST_ON_LAST_ATTEMPT
        )
        rows = await self.store.call_postgres(pg_claims.CALL, *args)
        done, row, buried = pg_claims.unpack(rows[0])
        self._buried.extend(self._buried_job(job_id, kind) for job_id, kind in buried)
        if row is None:
            return done, None
        job = _job_of(row)
        if row["event"] is not None:
            job.event, job.action = row["event"], row["action"]
            job.delivery_payload = row["delivery_payload"].encode("utf-8")
        return done, job

    def _claim_in(self, conn: HotConnection, now: float, worker_id: str, lease_seconds: float) -> Job | None:
        """The claim transaction on SQLite: the installation whose turn it is (fairness.py), then the
        oldest of its two picks, the first job with an expired lease and the first due queued job;
        each pick is one probe of the (installation_id, state, id) index. PostgreSQL runs the same
        steps in its claim function (pg_claims.py)."""
        assert isinstance(conn, sqlite3.Connection)
        sql = self._claims
        params = {"b_now": now, "b_owner": worker_id, "b_expires": now + lease_seconds}
        while True:
            row = self.turns.take(conn, sql, params)
            if row is None:
                return None
            if row["attempts"] > row["max_attempts"]:
                # Its last allowed attempt died with the worker: bury it, look again.
                error = f"{LOST_ON_LAST_ATTEMPT} ({row['max_attempts']}): worker lost"
                sql.bury.rowcount(conn, {"b_id": row["id"], "b_now": now, "b_error": error})
                self._buried.append(self._buried_job(row["id"], row["kind"]))
                continue
            return self._job(conn, row)

    def _job(self, conn: sqlite3.Connection, row: dict[str, Any]) -> Job:
        job = _job_of(row)
        if job.delivery_id is not None:
            found = self._claims.delivery.rows(conn, {"b_delivery": job.delivery_id})
            if found:
                job.event, job.action, text = found[0]
                job.delivery_payload = text.encode("utf-8")
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
        done, _ = await self.complete_and_claim(job, None)
        return done

    async def complete_and_claim(self, job: Job, lease_seconds: float | None) -> tuple[bool, Job | None]:
        """Complete `job` and, given `lease_seconds`, claim the next job for the same worker in the
        same transaction, so a busy worker pays one database round (one thread hop) per job.

        Returns whether the job was completed (False: the lease was lost) and the next job, if any.
        """
        now = self.store.clock()
        params = {"b_id": job.id, "b_owner": job.lease_owner, "b_attempts": job.attempts, "b_now": now}

        def work(conn: HotConnection, claim: bool) -> tuple[bool, Job | None]:  # SQLite's
            assert isinstance(conn, sqlite3.Connection)
            done = self._claims.complete.rowcount(conn, params) == 1
            if not claim:
                return done, None
            return done, self._claim_in(conn, now, job.lease_owner, lease_seconds or 0.0)

        async def once(claim: bool) -> tuple[bool, Job | None]:
            if self.store.is_sqlite:
                return await self.store.run_hot(functools.partial(work, claim=claim))
            call = pg_claims.ClaimCall(
                job.lease_owner,
                now,
                now + (lease_seconds or 0.0),
                claim=claim,
                done_id=job.id,
                done_attempts=job.attempts,
            )
            done, next_job = await self._call_postgres(call)
            return bool(done), next_job

        result: tuple[bool, Job | None] | None = None
        with anyio.CancelScope(shield=True):  # bounded by short transactions; see claim()
            for _ in range(_CLAIM_RACE_RETRIES):
                try:
                    result = await once(lease_seconds is not None)
                    break
                except _INTEGRITY_ERRORS:
                    # A racing claim took the key: the whole transaction, completion included, was
                    # undone; run it again.
                    continue
            else:
                result = await once(False)
        assert result is not None  # a shield scope is never cancelled, so it never swallows
        return result

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

    async def schedule(
        self, kind: str, key: str, payload: Mapping[str, Any] | None, at: float, *, installation_id: int = 0
    ) -> int:
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
        return await self.enqueue(kind, key, payload, run_after=at, installation_id=installation_id)

    async def get(self, job_id: int) -> dict[str, Any] | None:
        """The job's row as stored (for status pages and tests)."""
        async with self.store.read() as conn:
            row = (await conn.execute(select(jobs).where(jobs.c.id == job_id))).first()
        return dict(row._mapping) if row is not None else None


def _job_of(row: Mapping[str, Any]) -> Job:
    payload = row["payload"]
    return Job(
        id=row["id"],
        kind=row["kind"],
        key=row["key"],
        delivery_id=row["delivery_id"],
        # JSON text from SQLite and from the claim function; SQLAlchemy rows carry the parsed value.
        payload=json.loads(payload) if isinstance(payload, str) else payload,
        attempts=row["attempts"],
        max_attempts=row["max_attempts"],
        lease_owner=row["lease_owner"],
        lease_expires_at=row["lease_expires_at"],
        installation_id=row["installation_id"],
    )
