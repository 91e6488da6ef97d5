"""Fair claims: which installation gets the next job, so one busy installation cannot starve another.

A claim first chooses an installation, then takes that installation's oldest due job through the
queue's ordinary claim statements (with one more filter, on the `(installation_id, state, id)` index).
The installation chosen is the one served least recently among those with a due job;
`installation_turns` keeps a turn number per installation (a counter, not a clock, so equal clocks
still take turns). The concurrency cap counts the running jobs of the capped kinds (the app caps skill
runs and automatic reviews, not the quick command deliveries, so a `/beam cancel` is read even while
an installation's runs fill its cap): an installation at its cap is offered only its jobs of other
kinds. Installation 0 (jobs of the app itself, such as the approval poller) takes turns like any
other but has no cap.

Across processes: on SQLite the claim's `BEGIN IMMEDIATE` serialises all of it; every statement
is built and compiled once (`fastpath.Prepared`). On PostgreSQL the same steps run inside the server,
in one call of the claim function (pg_claims.py), with the locking there described: only a job that
counts against the cap takes its installation's turn row lock, so uncapped jobs are claimed by any
number of processes at once.
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Iterable, Mapping
from typing import Any

from sqlalchemy import (
    BigInteger,
    Connection,
    Double,
    and_,
    bindparam,
    func,
    literal_column,
    or_,
    select,
    union_all,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.sql.expression import BindParameter, ColumnClause, Select

from bot.app.jobs.fastpath import JOB_COLUMNS, ClaimStatements, HotConnection, Prepared
from bot.app.jobs.schema import installation_turns, jobs

SYSTEM_INSTALLATION = 0
# How many installations one claim looks at, least recently served first.
MAX_CHOICES = 16

_RUNNING: ColumnClause[str] = literal_column("'running'")
_QUEUED: ColumnClause[str] = literal_column("'queued'")
_TURNS_SQLITE = (
    "INSERT OR IGNORE INTO installation_turns (installation_id, last_turn) VALUES (:installation_id, 0)"
)


def add_turns(conn: Connection, is_sqlite: bool, installation_ids: Iterable[int]) -> None:
    """Give every installation that just got a job its row of turns (kept if it exists)."""
    rows = [{"installation_id": i, "last_turn": 0} for i in sorted(set(installation_ids))]
    if rows:
        dialect = sqlite if is_sqlite else postgresql
        conn.execute(dialect.insert(installation_turns).on_conflict_do_nothing(), rows)


def insert_turns(conn: HotConnection, installation_ids: Iterable[int]) -> None:
    """`add_turns` on the hot path's connection (the raw sqlite3 one on SQLite)."""
    if isinstance(conn, sqlite3.Connection):
        conn.executemany(_TURNS_SQLITE, [{"installation_id": i} for i in sorted(set(installation_ids))])
    else:
        add_turns(conn, False, installation_ids)


class FairStatements:
    """The fair claim's statements for one database kind and one set of capped kinds."""

    def __init__(self, *, capped_kinds: frozenset[str] | None) -> None:
        turns, later = installation_turns, installation_turns.alias("later")
        cand, other = jobs.alias("fcand"), jobs.alias("fother")
        now: BindParameter[float] = bindparam("b_now", type_=Double())
        inst: BindParameter[int] = bindparam("b_inst", type_=BigInteger())
        mine = cand.c.installation_id == turns.c.installation_id

        def first(*claimable: Any) -> Any:
            # A correlated `LIMIT 1` scalar, not EXISTS: PostgreSQL may turn an EXISTS into a hashed
            # subplan over every due job (12 ms per claim at 50,000 queued on a fresh table); a
            # scalar with a LIMIT stays one probe of the (installation_id, state, id) index per
            # installation, however many jobs are queued.
            return select(cand.c.id).where(mine, *claimable).limit(1).scalar_subquery().is_not(None)

        has_due = or_(
            first(cand.c.state == _QUEUED, cand.c.run_after <= now),
            first(cand.c.state == _RUNNING, cand.c.lease_expires_at < now),
        )
        self.candidates = Prepared(
            select(turns.c.installation_id)
            .where(has_due)
            .order_by(turns.c.last_turn, turns.c.installation_id)
            .limit(MAX_CHOICES)
        )
        running = select(func.count()).select_from(jobs)
        running = running.where(jobs.c.installation_id == inst, jobs.c.state == _RUNNING)
        running = running.where(jobs.c.lease_expires_at >= now)
        if capped_kinds is not None:
            running = running.where(or_(*(jobs.c.kind == k for k in sorted(capped_kinds))))
        self.running = Prepared(running)
        key_free = or_(
            cand.c.key.is_(None),
            ~select(other.c.id)
            .where(other.c.key == cand.c.key, other.c.state == _RUNNING, other.c.id != cand.c.id)
            .exists(),
        )

        def pick(room: bool, *claimable: Any) -> Select[Any]:
            stmt = select(cand.c.id, cand.c.kind).where(cand.c.installation_id == inst, *claimable, key_free)
            if not room and capped_kinds is not None:
                stmt = stmt.where(and_(*(cand.c.kind != k for k in sorted(capped_kinds))))
            return stmt.order_by(cand.c.id).limit(1)

        # As in fastpath: two picks, and `run_after + 0` so the index walk stays in id order.
        expired = {r: pick(r, cand.c.state == _RUNNING, cand.c.lease_expires_at < now) for r in (True, False)}
        queued = {r: pick(r, cand.c.state == _QUEUED, cand.c.run_after + 0 <= now) for r in (True, False)}
        # Both picks in one statement (one round trip): each keeps its own ordered index probe and
        # row lock, and the older of the two wins.
        self.oldest = {r: _oldest_of(expired[r], queued[r]) for r in (True, False)}
        latest = select(func.coalesce(func.max(later.c.last_turn), 0) + 1).scalar_subquery()
        self.served = Prepared(update(turns).where(turns.c.installation_id == inst).values(last_turn=latest))


def _oldest_of(*picks: Select[Any]) -> Prepared:
    both = union_all(*(select(pick.subquery()) for pick in picks)).subquery("picks")
    return Prepared(select(both.c.id, both.c.kind).order_by(both.c.id).limit(1))


@functools.lru_cache(maxsize=16)
def fair_statements(capped_kinds: frozenset[str] | None) -> FairStatements:
    return FairStatements(capped_kinds=capped_kinds)


class FairTurns:
    """Chooses installations in turn; one instance per queue. `capped_kinds` None caps every kind."""

    def __init__(self, *, cap: int | None, capped_kinds: frozenset[str] | None = None) -> None:
        self.cap = cap
        self.capped_kinds = capped_kinds

    def take(
        self, conn: sqlite3.Connection, claims: ClaimStatements, params: Mapping[str, Any]
    ) -> dict[str, Any] | None:
        """Inside the claim's transaction: mark the oldest due job of the installation served least
        recently (with room under its cap) running, and return its row; None when there is none."""
        sql = fair_statements(self.capped_kinds)
        candidates = [int(row[0]) for row in sql.candidates.rows(conn, params)]
        for installation in candidates:
            where = {"b_inst": installation}
            found = self._oldest(conn, sql, {**params, **where}, room=True)
            if found is None:
                continue
            if self._counts(installation, found[1]) and not self._has_room(conn, sql, installation, params):
                if self.capped_kinds is None:
                    continue
                found = self._oldest(conn, sql, {**params, **where}, room=False)
                if found is None:
                    continue
            taken = claims.take.rows(conn, {**params, "b_id": found[0]})
            if not taken:
                continue
            if len(candidates) > 1:
                # Alone with due jobs, it keeps its place: no write, and when another installation
                # turns up it gets at most one job ahead before the turns alternate.
                sql.served.rowcount(conn, where)
            return dict(zip(JOB_COLUMNS, taken[0], strict=True))
        return None

    @staticmethod
    def _oldest(
        conn: sqlite3.Connection, sql: FairStatements, params: Mapping[str, Any], *, room: bool
    ) -> tuple[int, str] | None:
        """The oldest of the two picks (expired lease, due queued): (id, kind), or None."""
        rows = sql.oldest[room].rows(conn, params)
        return (int(rows[0][0]), str(rows[0][1])) if rows else None

    def _counts(self, installation: int, kind: str) -> bool:
        """Whether a job of `kind` counts against this installation's cap."""
        if self.cap is None or installation == SYSTEM_INSTALLATION:
            return False
        return self.capped_kinds is None or kind in self.capped_kinds

    def _has_room(
        self, conn: sqlite3.Connection, sql: FairStatements, installation: int, params: Mapping[str, Any]
    ) -> bool:
        if self.cap is None or installation == SYSTEM_INSTALLATION:
            return True
        count = sql.running.rows(conn, {"b_inst": installation, "b_now": params["b_now"]})
        return int(count[0][0]) < self.cap
