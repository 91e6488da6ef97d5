"""What the redelivery sweep asked GitHub for, and what a recovered delivery's answer says (issue 32).

One row per failed delivery attempt (GitHub's numeric delivery id) the sweep asked GitHub to
redeliver: recorded before the POST, so a sweep, on any host, never asks twice for the same one
(and for one event, `MAX_ASKS` times at most, when its redeliveries fail too).
A command whose delivery arrives this way is answered with when it was posted and since when the
bot was unavailable (`recovered`, read by the command's handler through the delivery's GUID).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import delete, func, select

from bot.app.jobs.schema import deliveries, redeliveries
from bot.app.jobs.store import Store

# A delivery whose redeliveries fail too (refused for good, or the bot down again) is asked for at
# most this many times, so a sweep does not ask for it forever.
MAX_ASKS = 3


@dataclass(frozen=True, slots=True)
class Missed:
    """A delivery attempt GitHub could not hand over (from `GET /app/hook/deliveries`)."""

    delivery_id: int
    guid: str
    event: str
    delivered_at: float


@dataclass(frozen=True, slots=True)
class Recovered:
    """A delivery that arrived because the sweep asked for it: when GitHub first tried it, and the
    oldest failure the sweep saw (since when the bot was unavailable)."""

    delivered_at: float
    outage_since: float


class Redeliveries:
    """The `redeliveries` table, and the intake's dedupe table read for the GUIDs it knows."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def unknown(self, missed: Iterable[Missed]) -> list[Missed]:
        """Those of `missed` the bot has no record of: neither stored by intake (its GUID) nor
        asked for already (its delivery id)."""
        missed = list(missed)
        if not missed:
            return []
        guids = sorted({m.guid for m in missed})
        ids = sorted({m.delivery_id for m in missed})
        async with self.store.read() as conn:
            stored = set(
                (
                    await conn.execute(
                        select(deliveries.c.delivery_id).where(deliveries.c.delivery_id.in_(guids))
                    )
                )
                .scalars()
                .all()
            )
            asked = set(
                (
                    await conn.execute(
                        select(redeliveries.c.delivery_id).where(redeliveries.c.delivery_id.in_(ids))
                    )
                )
                .scalars()
                .all()
            )
            tries = select(redeliveries.c.guid).where(redeliveries.c.guid.in_(guids))
            worn = set(
                (await conn.execute(tries.group_by(redeliveries.c.guid).having(func.count() >= MAX_ASKS)))
                .scalars()
                .all()
            )
        return [m for m in missed if m.guid not in stored | worn and m.delivery_id not in asked]

    async def ask(self, missed: Iterable[Missed], outage_since: float) -> list[Missed]:
        """Record that each of `missed` is about to be asked for, in one transaction; returns those
        no other sweep recorded first (the ones this sweep asks for)."""
        now = self.store.clock()
        mine: list[Missed] = []
        async with self.store.write() as conn:
            for one in missed:
                row = {
                    "delivery_id": one.delivery_id,
                    "guid": one.guid,
                    "event": one.event,
                    "delivered_at": one.delivered_at,
                    "outage_since": outage_since,
                    "asked_at": now,
                }
                if (await conn.execute(self.store.insert_ignore(redeliveries).values(row))).rowcount == 1:
                    mine.append(one)
        return mine

    async def forget_before(self, moment: float) -> int:
        """Drop rows of deliveries older than `moment`: GitHub no longer lists them."""
        async with self.store.write() as conn:
            gone = await conn.execute(delete(redeliveries).where(redeliveries.c.delivered_at < moment))
        return int(gone.rowcount or 0)

    async def recovered(self, guid: str) -> Recovered | None:
        """How the delivery `guid` was recovered, or None when it arrived on its own."""
        query = select(func.min(redeliveries.c.delivered_at), func.min(redeliveries.c.outage_since)).where(
            redeliveries.c.guid == guid
        )
        async with self.store.read() as conn:
            row = (await conn.execute(query)).first()
        if row is None or row[0] is None:
            return None
        return Recovered(float(row[0]), float(row[1]))
