"""Named leases in the database: one process on any host holds one at a time (issue 32).

A lease is a row (name, owner, expires_at). `acquire` takes it when it is free, expired, or already
the caller's, by one compare-and-set UPDATE (and an INSERT that does nothing on conflict for the
first taker): two processes racing both send it, the database applies one. A holder that dies
stops renewing, and its lease passes to the next taker once it expires; `release` hands it over
at once. The job queue has leases per job; this is for work that is no job, such as the
redelivery sweep, which every process could run but only one should.
"""

from __future__ import annotations

from sqlalchemy import or_, update

from bot.app.jobs.schema import leases
from bot.app.jobs.store import Store


class Leases:
    """The `leases` table of one store."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def acquire(self, name: str, owner: str, seconds: float) -> bool:
        """True when `owner` holds `name` for the next `seconds` (taken now or renewed)."""
        now = self.store.clock()
        async with self.store.write() as conn:
            first = self.store.insert_ignore(leases).values(name=name, owner=owner, expires_at=now + seconds)
            if (await conn.execute(first)).rowcount == 1:
                return True
            taken = await conn.execute(
                update(leases)
                .where(leases.c.name == name, or_(leases.c.owner == owner, leases.c.expires_at <= now))
                .values(owner=owner, expires_at=now + seconds)
            )
            return bool(taken.rowcount == 1)

    async def release(self, name: str, owner: str) -> None:
        """Give `name` up now, if `owner` still holds it."""
        async with self.store.write() as conn:
            await conn.execute(
                update(leases)
                .where(leases.c.name == name, leases.c.owner == owner)
                .values(expires_at=self.store.clock())
            )
