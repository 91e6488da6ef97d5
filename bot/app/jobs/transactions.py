"""The database plumbing under `Store`: engines, write and read transactions, and compare-and-set.

One code path serves SQLite (default, one machine) and PostgreSQL (several processes and machines);
`bot.app.jobs.database` sets the engines up, `bot.app.jobs.schema` holds the tables. Write transactions
go through `write()`: on SQLite they begin with `BEGIN IMMEDIATE` and, within one process, queue on an
async lock, so writers wait in order instead of sleeping in SQLite's busy handler.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Self, TypeVar

import anyio
from sqlalchemy import Engine, Table, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import make_url
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from bot.app.jobs.checkpoint import Checkpointer
from bot.app.jobs.database import BEGIN_MODE, create_engines, normalize_url
from bot.app.jobs.fastpath import HotConnection, sqlite_transaction
from bot.app.jobs.migrations import upgrade_schema
from bot.app.jobs.pg_claims import CREATE as CREATE_CLAIM_FUNCTION
from bot.app.jobs.pg_claims import EXISTS as CLAIM_FUNCTION_EXISTS
from bot.app.jobs.pg_claims import FUNCTION as CLAIM_FUNCTION
from bot.app.jobs.schema import jobs, pending_pushes

Clock = Callable[[], float]
T = TypeVar("T")

_STATE_TABLES = {t.name: t for t in (jobs, pending_pushes)}


@dataclass(slots=True)
class Transactions:
    """Engines and transactions; `Store` adds the app's queries on top. Open with `await Store.open(url)`."""

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
                    await _install_claim_function(conn)
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
        target = _STATE_TABLES.get(table if isinstance(table, str) else table.name)
        if target is None:
            raise ValueError(f"transition() works on tables with a state column: {sorted(_STATE_TABLES)}")
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


async def _install_claim_function(conn: AsyncConnection) -> None:
    """Create this release's claim function (pg_claims.py) unless it exists; under the upgrade's
    advisory lock, so processes starting together do not race on the catalog."""
    raw = await conn.get_raw_connection()
    driver: Any = raw.driver_connection
    if not await driver.fetchval(CLAIM_FUNCTION_EXISTS, CLAIM_FUNCTION):
        await driver.execute(CREATE_CLAIM_FUNCTION)


def check_columns(table: Table, values: dict[str, Any]) -> None:
    unknown = sorted(set(values) - set(table.c.keys()))
    if unknown:
        raise ValueError(f"unknown {table.name} columns: {', '.join(unknown)}")
