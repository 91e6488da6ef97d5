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

Across processes: the installation's oldest due job is picked first (`FOR UPDATE SKIP LOCKED` on
PostgreSQL). Only when that job counts against the cap is the chosen turn row locked (`FOR UPDATE`)
for the claim's transaction, so capped claims of one installation go one after the other, and the
running count is read after the lock is held (a fresh snapshot), so the cap holds however many
workers claim at once; uncapped jobs never take the lock, so processes claim them in parallel. The
first choice waits for the lock (a claim in flight takes milliseconds; skipping would send the other
claimers of a lone installation to sleep with jobs due); later choices skip locked rows, so no claim
waits while it holds a lock. On SQLite the claim's `BEGIN IMMEDIATE` serialises all of it. Every
statement is built and compiled once (`fastpath.Prepared`).
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

    def __init__(self, *, for_update: bool, capped_kinds: frozenset[str] | None) -> None:
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
        lock = select(turns.c.installation_id).where(turns.c.installation_id == inst)
        self.lock_wait = Prepared(lock.with_for_update()) if for_update else None
        self.lock_skip = Prepared(lock.with_for_update(skip_locked=True)) if for_update else None
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
            stmt = stmt.order_by(cand.c.id).limit(1)
            return stmt.with_for_update(skip_locked=True) if for_update else stmt

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
def fair_statements(for_update: bool, capped_kinds: frozenset[str] | None) -> FairStatements:
    return FairStatements(for_update=for_update, capped_kinds=capped_kinds)


class FairTurns:
    """Chooses installations in turn; one instance per queue. `capped_kinds` None caps every kind."""

    def __init__(self, *, cap: int | None, capped_kinds: frozenset[str] | None = None) -> None:
        self.cap = cap
        self.capped_kinds = capped_kinds

    def take(
        self, conn: HotConnection, claims: ClaimStatements, params: Mapping[str, Any], *, for_update: bool
    ) -> dict[str, Any] | None:
        """Inside the claim's transaction: mark the oldest due job of the installation served least
        recently (with room under its cap) running, and return its row; None when there is none."""
        sql = fair_statements(for_update, self.capped_kinds)
        candidates = [int(row[0]) for row in sql.candidates.rows(conn, params)]
        for n, installation in enumerate(candidates):
            where = {"b_inst": installation}
            found = self._oldest(conn, sql, {**params, **where}, room=True)
            if found is None:
                continue
            if self._counts(installation, found[1]):
                # Only a job that counts against the cap serialises the installation's claims (the
                # turn row's lock, then the running count); uncapped jobs, such as the deliveries
                # that are most of the traffic, are claimed by any number of processes at once.
                lock = sql.lock_skip if n else sql.lock_wait
                if lock is not None and not lock.rows(conn, where):
                    continue  # another claimer holds it: the next installation
                if not self._has_room(conn, sql, installation, params):
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
        conn: HotConnection, sql: FairStatements, params: Mapping[str, Any], *, room: bool
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
        self, conn: HotConnection, sql: FairStatements, installation: int, params: Mapping[str, Any]
    ) -> bool:
        if self.cap is None or installation == SYSTEM_INSTALLATION:
            return True
        # A statement of its own: on PostgreSQL it sees every claim committed before our lock.
        count = sql.running.rows(conn, {"b_inst": installation, "b_now": params["b_now"]})
        return int(count[0][0]) < self.cap
