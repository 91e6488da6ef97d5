"""Fair claims: which installation gets the next job, so one busy installation cannot starve another.

A claim first chooses an installation, then takes that installation's oldest due job through the
queue's ordinary claim (with one more filter). The installation chosen is the one served least
recently among those with a due job; `installation_turns` keeps a turn number per installation (a
counter, not a clock, so equal clocks still take turns). The concurrency cap counts the running jobs
of the capped kinds (the app caps skill runs, not the quick command deliveries, so a `/beam cancel`
is read even while an installation's runs fill its cap): an installation at its cap is offered only
its jobs of other kinds.

Across processes: on PostgreSQL the chosen turn row is locked (`FOR UPDATE`) for the claim's
transaction, so claims of one installation go one after the other, and the running count is read
again after the lock is held (a fresh snapshot), so the cap holds however many workers claim at once.
On SQLite the claim's `BEGIN IMMEDIATE` serialises all of it. Installation 0 (jobs of the app itself,
such as the approval poller) takes turns like any other but has no cap.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import Connection, and_, false, func, or_, select, true, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection

from bot.app.jobs.schema import installation_turns, jobs

SYSTEM_INSTALLATION = 0
# How many installations one claim looks at before it gives up for this round (all at their cap).
MAX_CHOICES = 32


def add_turns(conn: Connection, is_sqlite: bool, installation_ids: Iterable[int]) -> None:
    """Give every installation that just got a job its row of turns (kept if it exists)."""
    rows = [{"installation_id": i, "last_turn": 0} for i in sorted(set(installation_ids))]
    if rows:
        dialect = sqlite if is_sqlite else postgresql
        conn.execute(dialect.insert(installation_turns).on_conflict_do_nothing(), rows)


def claimable(table: Any, now: float) -> Any:
    """Queued and due, or running with an expired lease (its worker died)."""
    return or_(
        and_(table.c.state == "queued", table.c.run_after <= now),
        and_(table.c.state == "running", table.c.lease_expires_at < now),
    )


def key_free(table: Any) -> Any:
    """No other job with this job's key is running (one job at a time per key)."""
    other = jobs.alias("fair_other")
    busy = (
        select(other.c.id)
        .where(other.c.key == table.c.key, other.c.state == "running", other.c.id != table.c.id)
        .exists()
    )
    return or_(table.c.key.is_(None), ~busy)


class FairTurns:
    """Chooses installations in turn; one instance per queue. `capped_kinds` None caps every kind."""

    def __init__(self, *, cap: int | None, capped_kinds: frozenset[str] | None = None) -> None:
        self.cap = cap
        self.capped_kinds = capped_kinds

    def allowed(self, table: Any, room: bool) -> Any:
        """The jobs an installation may be given now: all with room under its cap, else the uncapped."""
        if room:
            return true()
        if self.capped_kinds is None:
            return false()
        return table.c.kind.not_in(sorted(self.capped_kinds))

    async def choose(self, conn: AsyncConnection, now: float, passed: set[int]) -> tuple[int, bool] | None:
        """The installation to serve next inside the claim's transaction and whether it has room
        under its cap, or None when there is none. The caller adds what it tried to `passed`."""
        if len(passed) < MAX_CHOICES:
            cand = jobs.alias("fair_cand")
            due = (
                select(cand.c.id)
                .where(cand.c.installation_id == installation_turns.c.installation_id)
                .where(claimable(cand, now), key_free(cand))
                .exists()
            )
            pick = select(installation_turns.c.installation_id).where(due)
            if passed:
                pick = pick.where(installation_turns.c.installation_id.not_in(sorted(passed)))
            pick = pick.order_by(installation_turns.c.last_turn, installation_turns.c.installation_id).limit(
                1
            )
            if conn.dialect.name != "sqlite":
                # The first choice waits for a claim in flight on the same installation (milliseconds)
                # rather than skip it: with one installation, skipping would send every other claimer
                # to sleep with jobs due. Later choices skip locked rows, so no claim ever waits while
                # holding a lock (no deadlock between two claimers).
                pick = pick.with_for_update(skip_locked=bool(passed))
            chosen = (await conn.execute(pick)).scalar()
            if chosen is not None:
                return int(chosen), await self._has_room(conn, int(chosen), now)
        return None

    async def _has_room(self, conn: AsyncConnection, installation: int, now: float) -> bool:
        if self.cap is None or installation == SYSTEM_INSTALLATION:
            return True
        # A separate statement: on PostgreSQL it sees every claim committed before our lock was granted.
        running = select(func.count()).where(
            jobs.c.installation_id == installation,
            jobs.c.state == "running",
            jobs.c.lease_expires_at >= now,
        )
        if self.capped_kinds is not None:
            running = running.where(jobs.c.kind.in_(sorted(self.capped_kinds)))
        return int((await conn.execute(running)).scalar_one()) < self.cap

    async def served(self, conn: AsyncConnection, installation: int) -> None:
        """Move the installation to the back of the line."""
        latest = select(func.coalesce(func.max(installation_turns.c.last_turn), 0)).scalar_subquery()
        stmt = (
            update(installation_turns)
            .where(installation_turns.c.installation_id == installation)
            .values(last_turn=latest + 1)
        )
        await conn.execute(stmt)
