"""The hot path's transactions (intake, claim, complete): statements built once, run the cheapest way.

Building the claim statement on every call cost a fifth of the worker's CPU, and on SQLite the
SQLAlchemy execution path costs several times the query itself (a claim is three index probes of a
few microseconds each; a delivery insert 55 us raw against 365 us through Core). So each statement
is built once and compiled once for SQLite; on SQLite a hot transaction runs whole in one worker
thread on the raw sqlite3 connection (`sqlite_transaction`), on PostgreSQL through SQLAlchemy
(asyncpg), where the claim is one call of its own function instead (pg_claims.py). Which job a
claim takes on SQLite is fairness.py's; here are the statements around it.

Claim parameters: `b_now`, `b_owner`, `b_expires`, `b_id`, `b_attempts`, `b_delivery`, `b_error`.
Job states are SQL literals, so SQLite can use the partial unique index on running keys.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlalchemy import (
    Connection,
    Double,
    Engine,
    Insert,
    bindparam,
    insert,
    literal_column,
    select,
    update,
)
from sqlalchemy.dialects import sqlite
from sqlalchemy.sql.expression import BindParameter, ColumnClause, Select, Update

from bot.app.jobs.schema import deliveries, jobs

T = TypeVar("T")
# What a hot transaction runs on: the raw sqlite3 connection, or SQLAlchemy's (PostgreSQL).
HotConnection = sqlite3.Connection | Connection

_RUNNING: ColumnClause[str] = literal_column("'running'")
_QUEUED: ColumnClause[str] = literal_column("'queued'")
_SQLITE = sqlite.dialect(paramstyle="named")

JOB_COLUMNS = tuple(c.name for c in jobs.c)


def sqlite_transaction(engine: Engine, work: Callable[[sqlite3.Connection], T]) -> T:
    """Run `work` in one `BEGIN IMMEDIATE` transaction on a pooled raw sqlite3 connection (the
    engine's connect hook has set its pragmas); call it from a worker thread."""
    pooled = engine.raw_connection()
    try:
        raw = pooled.driver_connection
        assert isinstance(raw, sqlite3.Connection)
        raw.execute("BEGIN IMMEDIATE")
        try:
            result = work(raw)
        except BaseException:
            raw.execute("ROLLBACK")
            raise
        raw.execute("COMMIT")
        return result
    finally:
        pooled.close()


class Prepared:
    """One statement compiled once for SQLite and run on its raw connection (`rows`, `rowcount`);
    `many` also runs it through SQLAlchemy on PostgreSQL (the intake's job rows)."""

    def __init__(self, statement: Select[Any] | Update | Insert, column_keys: Sequence[str] | None = None):
        self.statement = statement
        compiled = statement.compile(dialect=_SQLITE, column_keys=list(column_keys or ()) or None)
        self.sql = str(compiled)
        self.defaults = dict(compiled.params)  # LIMIT values and other literals; ours are None here

    def rows(self, conn: sqlite3.Connection, params: Mapping[str, Any]) -> Sequence[Sequence[Any]]:
        return conn.execute(self.sql, {**self.defaults, **params}).fetchall()

    def rowcount(self, conn: sqlite3.Connection, params: Mapping[str, Any]) -> int:
        return int(conn.execute(self.sql, {**self.defaults, **params}).rowcount)

    def many(self, conn: HotConnection, rows: Sequence[Mapping[str, Any]]) -> None:
        if isinstance(conn, sqlite3.Connection):
            conn.executemany(self.sql, [{**self.defaults, **row} for row in rows])
        else:
            conn.execute(self.statement, [dict(row) for row in rows])


@dataclass(frozen=True, slots=True)
class ClaimStatements:
    """The claim's statements besides the choice of a job, which fairness.py makes."""

    take: Prepared  # mark job `b_id` running for `b_owner` -> the row, JOB_COLUMNS
    bury: Prepared
    complete: Prepared
    delivery: Prepared  # -> (event, action, payload)

    @classmethod
    def build(cls) -> ClaimStatements:
        now: BindParameter[float] = bindparam("b_now", type_=Double())
        held = (
            jobs.c.id == bindparam("b_id"),
            jobs.c.state == _RUNNING,
            jobs.c.lease_owner == bindparam("b_owner"),
            jobs.c.attempts == bindparam("b_attempts"),
        )
        return cls(
            take=Prepared(
                update(jobs)
                .where(jobs.c.id == bindparam("b_id"))
                .values(
                    state="running",
                    attempts=jobs.c.attempts + 1,
                    lease_owner=bindparam("b_owner"),
                    lease_expires_at=bindparam("b_expires"),
                    updated_at=now,
                )
                .returning(*jobs.c)
            ),
            bury=Prepared(
                update(jobs)
                .where(jobs.c.id == bindparam("b_id"))
                .values(
                    state="dead",
                    attempts=jobs.c.max_attempts,
                    lease_owner=None,
                    lease_expires_at=None,
                    last_error=bindparam("b_error"),
                    updated_at=now,
                )
            ),
            complete=Prepared(
                update(jobs)
                .where(*held)
                .values(
                    state="done", lease_owner=None, lease_expires_at=None, last_error=None, updated_at=now
                )
            ),
            delivery=Prepared(
                select(deliveries.c.event, deliveries.c.action, deliveries.c.payload).where(
                    deliveries.c.delivery_id == bindparam("b_delivery")
                )
            ),
        )


CLAIM_STATEMENTS = ClaimStatements.build()

_JOB_INSERT_COLUMNS = (
    "kind",
    "delivery_id",
    "key",
    "state",
    "attempts",
    "max_attempts",
    "run_after",
    "created_at",
    "updated_at",
    "installation_id",
)
_DELIVERY_COLUMNS = ("delivery_id", "event", "action", "received_at", "payload")
# Intake on SQLite: one `INSERT OR IGNORE` per delivery (its rowcount says whether it was new),
# then the jobs in one executemany. PostgreSQL keeps the batched SQLAlchemy insert in store.py.
INSERT_DELIVERY = Prepared(sqlite.insert(deliveries).on_conflict_do_nothing(), _DELIVERY_COLUMNS)
INSERT_JOB = Prepared(insert(jobs), _JOB_INSERT_COLUMNS)
