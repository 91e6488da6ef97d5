"""The app's durable records: the engines and transactions, then delivery intake, runs and memory.

The webhook path (`accept_delivery`) is group-committed (`bot.app.jobs.group_commit`). On SQLite its
transaction runs whole in one worker thread on the raw sqlite3 connection (`run_hot`,
`bot.app.jobs.fastpath`): one thread hop instead of one per cursor operation. Write transactions go
through `write()`: on SQLite they begin with `BEGIN IMMEDIATE` and, within one process, queue on an
async lock, so writers wait in order instead of sleeping in SQLite's busy handler.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Self, TypeVar

import anyio
from sqlalchemy import Engine, Table, func, insert, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import make_url
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from bot.app.jobs.checkpoint import Checkpointer
from bot.app.jobs.database import BEGIN_MODE, build_url, create_engines, normalize_url
from bot.app.jobs.fairness import insert_turns
from bot.app.jobs.fastpath import INSERT_DELIVERY, INSERT_JOB, HotConnection, sqlite_transaction
from bot.app.jobs.group_commit import IntakeBatcher, IntakeRequest
from bot.app.jobs.migrations import upgrade_schema
from bot.app.jobs.schema import (
    JOB_STATES,
    deliveries,
    jobs,
    memory,
    pending_pushes,
    queued_job,
    runs,
)
from bot.app.jobs.transactions import STATE_TABLES, Clock, check_columns, install_claim_function

T = TypeVar("T")

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
class Store:
    """The database handle every part of the app shares; open it with `await Store.open(url)`: its
    engines and transactions (SQLite's write lock, the hot path's thread, compare-and-set), then the
    app's queries."""

    engine: AsyncEngine
    clock: Clock = time.time
    sync_engine: Engine | None = None  # SQLite only: the webhook path's engine
    _write_lock: anyio.Lock | None = None
    _checkpointer: Checkpointer | None = None  # SQLite files: WAL checkpoints off the commit path
    _hot_thread: ThreadPoolExecutor | None = None  # SQLite: the thread hot transactions run on

    @classmethod
    async def open(cls, url: str, *, clock: Clock = time.time) -> Self:
        """Connect, then create or upgrade the schema (see `bot.app.jobs.schema`)."""
        parsed = make_url(normalize_url(url))
        if parsed.get_backend_name() == "sqlite" and parsed.database:
            await anyio.Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        engine, sync_engine = create_engines(url)
        # fast_acquire: an uncontended lock takes no extra trip through the event loop.
        lock = anyio.Lock(fast_acquire=True) if sync_engine is not None else None
        store = cls(engine, clock, sync_engine, lock)
        if sync_engine is not None:
            store._hot_thread = ThreadPoolExecutor(1, thread_name_prefix="beam-sqlite")
        if sync_engine is not None and parsed.database:
            store._checkpointer = Checkpointer(parsed.database)
        try:
            async with store.write() as conn:
                await upgrade_schema(conn, clock())
                if not store.is_sqlite:
                    await install_claim_function(conn)
        except BaseException:
            await store.close()
            raise
        if store._checkpointer is not None:
            store._checkpointer.start()  # after the schema: WAL mode is set on the file by then
        return store

    async def close(self) -> None:
        if self._checkpointer is not None:
            await anyio.to_thread.run_sync(self._checkpointer.stop)
        await self.engine.dispose()
        if self._hot_thread is not None:
            self._hot_thread.shutdown(wait=False)
        if self.sync_engine is not None:
            await anyio.to_thread.run_sync(self.sync_engine.dispose)

    @property
    def is_sqlite(self) -> bool:
        return self.engine.dialect.name == "sqlite"

    @contextlib.asynccontextmanager
    async def write(self) -> AsyncIterator[AsyncConnection]:
        """A transaction that will write: committed on exit, rolled back on error.

        Do not call other writing Store methods inside it: on SQLite they wait for this one's lock.
        """
        lock = self._write_lock if self._write_lock is not None else contextlib.nullcontext()
        async with lock, self.engine.connect() as conn:
            if self._write_lock is not None:
                await conn.execution_options(**{BEGIN_MODE: "immediate"})
            async with conn.begin():
                yield conn

    @contextlib.asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncConnection]:
        """A read-only transaction: one consistent snapshot, no write lock."""
        async with self.engine.connect() as conn, conn.begin():
            yield conn

    async def run_hot(self, work: Callable[[HotConnection], T]) -> T:
        """Run `work` as one write transaction of the hot path (see `bot.app.jobs.fastpath`).

        On SQLite it runs whole in one worker thread on the raw sqlite3 connection (one hop, where
        the async adapter pays one per cursor operation); on PostgreSQL on SQLAlchemy's connection.
        """
        if self.sync_engine is None or self._write_lock is None or self._hot_thread is None:
            async with self.write() as conn:
                return await conn.run_sync(work)
        async with self._write_lock:
            # One thread of our own, not anyio's pool: its limiter and checkpoints cost more than
            # the hop. Shielded, as anyio's hop is: the lock is held until the transaction has ended.
            done = asyncio.get_running_loop().run_in_executor(
                self._hot_thread, sqlite_transaction, self.sync_engine, work
            )
            with anyio.CancelScope(shield=True):
                result = await done
            return result

    async def call_postgres(self, sql: str, *args: Any) -> list[Any]:
        """One statement in a transaction of its own, straight on a pooled asyncpg connection: one
        round trip, where SQLAlchemy's transaction adds a BEGIN and a COMMIT (the PostgreSQL claim)."""
        async with self.engine.connect() as conn:
            raw = await conn.get_raw_connection()
            try:
                rows: list[Any] = await raw.driver_connection.fetch(sql, *args)  # type: ignore[union-attr]
            except Exception as error:
                # An integrity violation (SQLSTATE class 23) as SQLAlchemy reports it everywhere
                # else, so callers need not import the optional asyncpg to catch it.
                if str(getattr(error, "sqlstate", "")).startswith("23"):
                    raise IntegrityError(sql, args, error) from error
                raise
            return rows

    def insert_ignore(self, table: Table) -> Any:
        """`INSERT ... ON CONFLICT DO NOTHING` in this database's dialect."""
        dialect = sqlite if self.is_sqlite else postgresql
        return dialect.insert(table).on_conflict_do_nothing()

    async def transition(
        self, table: str | Table, id: object, from_states: Iterable[str], to_state: str, **values: Any
    ) -> bool:
        """Move one row from any of `from_states` to `to_state`; True only for the caller that did it.

        This is the compare-and-set every state machine uses: two callers racing on the same row
        both send the UPDATE, the database applies one, and the other sees 0 rows changed.
        """
        target = STATE_TABLES.get(table if isinstance(table, str) else table.name)
        if target is None:
            raise ValueError(f"transition() works on tables with a state column: {sorted(STATE_TABLES)}")
        check_columns(target, values)
        if "updated_at" in target.c and "updated_at" not in values:
            values["updated_at"] = self.clock()
        stmt = (
            update(target)
            .where(target.c.id == id, target.c.state.in_(list(from_states)))
            .values(state=to_state, **values)
        )
        async with self.write() as conn:
            return (await conn.execute(stmt)).rowcount == 1

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
