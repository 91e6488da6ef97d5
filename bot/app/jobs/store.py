"""The app's durable records: delivery intake, runs and memory, as queries over `Transactions`.

The webhook path (`accept_delivery`) is group-committed (`bot.app.jobs.group_commit`). On SQLite its
transaction runs whole in one worker thread on the raw sqlite3 connection (`run_hot`,
`bot.app.jobs.fastpath`): one thread hop instead of one per cursor operation. The engines,
transactions and compare-and-set live in `bot.app.jobs.transactions`.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import func, insert, select, update

from bot.app.jobs.database import build_url, normalize_url
from bot.app.jobs.fairness import insert_turns
from bot.app.jobs.fastpath import INSERT_DELIVERY, INSERT_JOB, HotConnection
from bot.app.jobs.group_commit import IntakeBatcher, IntakeRequest
from bot.app.jobs.schema import (
    JOB_STATES,
    deliveries,
    jobs,
    memory,
    pending_pushes,
    queued_job,
    runs,
)
from bot.app.jobs.transactions import Clock, Transactions, check_columns

__all__ = [
    "Clock",
    "Delivery",
    "MemoryItem",
    "Store",
    "build_url",
    "deliveries",
    "jobs",
    "memory",
    "normalize_url",
    "pending_pushes",
    "runs",
]


@dataclass(frozen=True, slots=True)
class Delivery:
    delivery_id: str
    event: str
    action: str | None
    received_at: float
    payload: bytes


@dataclass(frozen=True, slots=True)
class MemoryItem:
    id: int
    scope_key: str
    kind: str
    text: str
    created_at: float


@dataclass(slots=True)
class Store(Transactions):
    """The database handle every part of the app shares; open it with `await Store.open(url)`."""

    _intake: IntakeBatcher = field(init=False)

    def __post_init__(self) -> None:
        self._intake = IntakeBatcher(self._write_intake)

    # -- deliveries -------------------------------------------------------------------------------

    async def accept_delivery(
        self,
        delivery_id: str,
        event: str,
        action: str | None,
        payload: bytes,
        job_key: str | None,
        job_kind: str = "delivery",
        *,
        with_job: bool = True,
        installation_id: int = 0,
    ) -> bool:
        """Store a delivery and its job atomically; False for a redelivery of a known id.

        With `with_job=False` the delivery is stored without a job (it cannot lead to work)."""
        request = IntakeRequest(
            delivery_id, event, action, payload.decode("utf-8"), job_key, job_kind, with_job, installation_id
        )
        return await self._intake.submit(request)

    async def _write_intake(self, batch: Sequence[IntakeRequest]) -> set[str]:
        now = self.clock()
        return await self.run_hot(lambda conn: self._insert_deliveries(conn, batch, now))

    def _insert_deliveries(self, conn: HotConnection, batch: Sequence[IntakeRequest], now: float) -> set[str]:
        """The intake transaction's statements: deliveries first, then a job for each new one."""
        rows = [
            {
                "delivery_id": r.delivery_id,
                "event": r.event,
                "action": r.action,
                "received_at": now,
                "payload": r.payload,
            }
            for r in batch
        ]
        if isinstance(conn, sqlite3.Connection):
            inserted = {
                r.delivery_id
                for r, row in zip(batch, rows, strict=True)
                if INSERT_DELIVERY.rowcount(conn, row) == 1
            }
        else:
            # Rows as parameters, not .values(rows): the statement stays cacheable, and SQLAlchemy
            # still sends one multi-row INSERT ... RETURNING for the batch ("insertmanyvalues").
            stmt = self.insert_ignore(deliveries).returning(deliveries.c.delivery_id)
            inserted = set(conn.execute(stmt, rows).scalars())
        new_jobs = [
            queued_job(
                r.job_kind, r.job_key, now, installation_id=r.installation_id, delivery_id=r.delivery_id
            )
            for r in batch
            if r.delivery_id in inserted and r.with_job
        ]
        if new_jobs:
            INSERT_JOB.many(conn, new_jobs)
            insert_turns(conn, {r.installation_id for r in batch if r.delivery_id in inserted and r.with_job})
        return inserted

    async def get_delivery(self, delivery_id: str) -> Delivery | None:
        async with self.read() as conn:
            row = (
                await conn.execute(select(deliveries).where(deliveries.c.delivery_id == delivery_id))
            ).first()
        if row is None:
            return None
        return Delivery(row.delivery_id, row.event, row.action, row.received_at, row.payload.encode("utf-8"))

    async def stats(self) -> dict[str, Any]:
        """Counts for /metrics: deliveries stored, jobs per state, age of the oldest due job, held pushes."""
        now = self.clock()
        async with self.read() as conn:
            count = (await conn.execute(select(func.count()).select_from(deliveries))).scalar_one()
            by_state = (await conn.execute(select(jobs.c.state, func.count()).group_by(jobs.c.state))).all()
            pushes = (
                await conn.execute(
                    select(pending_pushes.c.state, func.count()).group_by(pending_pushes.c.state)
                )
            ).all()
            oldest = (
                await conn.execute(
                    select(func.min(jobs.c.run_after)).where(
                        jobs.c.state == "queued", jobs.c.run_after <= now
                    )
                )
            ).scalar()
        states = dict.fromkeys(JOB_STATES, 0)
        states.update({state: int(n) for state, n in by_state})
        return {
            "deliveries": int(count),
            "jobs": states,
            "oldest_queued_age_seconds": max(0.0, now - oldest) if oldest is not None else 0.0,
            "pushes": {state: int(n) for state, n in pushes},
        }

    # -- runs -------------------------------------------------------------------------------------

    async def create_run(
        self,
        *,
        repo: str,
        number: int | None,
        skill: str,
        requester: str | None,
        job_id: int | None = None,
        run_id: str | None = None,
        **values: Any,
    ) -> str:
        """Record a new run (status `queued` unless given) and return its id."""
        check_columns(runs, values)
        run_id = run_id or str(uuid.uuid4())
        row = {
            "id": run_id,
            "job_id": job_id,
            "repo": repo,
            "number": number,
            "skill": skill,
            "requester": requester,
            "created_at": self.clock(),
            **values,
        }
        async with self.write() as conn:
            await conn.execute(insert(runs).values(row))
        return run_id

    async def update_run(self, run_id: str, **values: Any) -> bool:
        check_columns(runs, values)
        if not values:
            return False
        async with self.write() as conn:
            return (await conn.execute(update(runs).where(runs.c.id == run_id).values(values))).rowcount == 1

    async def get_run(self, run_id: str) -> dict[str, Any] | None:
        async with self.read() as conn:
            row = (await conn.execute(select(runs).where(runs.c.id == run_id))).first()
        return dict(row._mapping) if row is not None else None

    # -- memory -----------------------------------------------------------------------------------

    async def memory_append(self, scope_key: str, kind: str, text: str) -> int:
        row = {"scope_key": scope_key, "kind": kind, "text": text, "created_at": self.clock()}
        async with self.write() as conn:
            return int((await conn.execute(insert(memory).values(row).returning(memory.c.id))).scalar_one())

    async def memory_load(self, scope_keys: Sequence[str], *, limit: int | None = None) -> list[MemoryItem]:
        """Items of the given scopes, oldest first; with `limit`, the newest `limit` of them."""
        if not scope_keys:
            return []
        stmt = select(memory).where(memory.c.scope_key.in_(list(scope_keys))).order_by(memory.c.id.desc())
        if limit is not None:
            stmt = stmt.limit(limit)
        async with self.read() as conn:
            rows = (await conn.execute(stmt)).all()
        return [MemoryItem(r.id, r.scope_key, r.kind, r.text, r.created_at) for r in reversed(rows)]

    async def memory_forget(self, item_id: int, *, within: str = "", scope_key: str | None = None) -> bool:
        """Delete one item; with `within`, only when its scope key starts with that prefix; with
        `scope_key`, only when it is that key."""
        stmt = memory.delete().where(memory.c.id == item_id)
        if within:
            stmt = stmt.where(memory.c.scope_key.startswith(within, autoescape=True))
        if scope_key is not None:
            stmt = stmt.where(memory.c.scope_key == scope_key)
        async with self.write() as conn:
            return (await conn.execute(stmt)).rowcount == 1
