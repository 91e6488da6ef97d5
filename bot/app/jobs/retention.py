"""Retention: what is older than `BEAM_RETENTION_DAYS` leaves the database; held pushes never do.

Pruned, in this order, each only when older than the cutoff: finished runs, finished jobs, deliveries
no job refers to any more, and the payload (the webhook body) of deliveries that must stay as a row.
A row another table still refers to is kept (found from the schema's foreign keys, so a table added
later is respected without changes here): held pushes refer to their run, which keeps it, its job and
its delivery row, the audit trail of every push. Jobs still queued or running are never touched.

`prune` is idempotent and safe to run from several processes at once; the server and `beam-bot
worker` run it every `BEAM_PRUNE_INTERVAL` seconds, and `beam-bot prune` runs it on demand.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import anyio
from sqlalchemy import ColumnElement, Table, and_, delete, exists, update

from bot.app.jobs.schema import deliveries, jobs, metadata, runs
from bot.app.jobs.store import Store

log = logging.getLogger("beam.retention")

FINISHED_JOB_STATES = ("done", "failed", "dead")
FINISHED_RUN_STATUSES = ("succeeded", "failed", "interrupted")
DAY = 86400.0
FIRST_PRUNE_DELAY = 60.0


@dataclass(frozen=True, slots=True)
class Pruned:
    runs: int = 0
    jobs: int = 0
    deliveries: int = 0
    payloads: int = 0

    @property
    def total(self) -> int:
        return self.runs + self.jobs + self.deliveries + self.payloads

    def describe(self) -> str:
        return (
            f"{self.runs} runs, {self.jobs} jobs, {self.deliveries} deliveries and "
            f"{self.payloads} delivery payloads"
        )


def _unreferenced(table: Table) -> list[ColumnElement[bool]]:
    """`NOT EXISTS` for every foreign key that points at `table`, from any table of the schema."""
    conditions: list[ColumnElement[bool]] = []
    for other in metadata.sorted_tables:
        for fk in other.foreign_keys:
            if fk.column.table is table:
                conditions.append(~exists().where(fk.parent == fk.column))
    return conditions


async def prune(store: Store, days: float) -> Pruned:
    """Removes what is older than `days` days (one transaction); returns how many rows it changed."""
    if days <= 0:
        return Pruned()
    cutoff = store.clock() - days * DAY
    async with store.write() as conn:
        gone_runs = await conn.execute(
            delete(runs).where(
                runs.c.status.in_(FINISHED_RUN_STATUSES),
                runs.c.created_at < cutoff,
                runs.c.finished_at.is_(None) | (runs.c.finished_at < cutoff),
                *_unreferenced(runs),
            )
        )
        gone_jobs = await conn.execute(
            delete(jobs).where(
                jobs.c.state.in_(FINISHED_JOB_STATES), jobs.c.updated_at < cutoff, *_unreferenced(jobs)
            )
        )
        gone_deliveries = await conn.execute(
            delete(deliveries).where(deliveries.c.received_at < cutoff, *_unreferenced(deliveries))
        )
        # Rows that stay (a held push's delivery, a job still waiting): only their body goes, unless a
        # job that has not finished may still read it.
        unfinished = exists().where(
            and_(jobs.c.delivery_id == deliveries.c.delivery_id, jobs.c.state.not_in(FINISHED_JOB_STATES))
        )
        blanked = await conn.execute(
            update(deliveries)
            .where(deliveries.c.received_at < cutoff, deliveries.c.payload != "", ~unfinished)
            .values(payload="")
        )
    return Pruned(
        runs=gone_runs.rowcount or 0,
        jobs=gone_jobs.rowcount or 0,
        deliveries=gone_deliveries.rowcount or 0,
        payloads=blanked.rowcount or 0,
    )


async def prune_periodically(store: Store, days: float, interval: float) -> None:
    """Runs `prune` shortly after start and then every `interval` seconds, until cancelled."""
    if days <= 0:
        return
    await anyio.sleep(min(FIRST_PRUNE_DELAY, interval))
    while True:
        try:
            pruned = await prune(store, days)
        except Exception:
            log.exception("retention: pruning failed; trying again in %g s", interval)
        else:
            if pruned.total:
                log.info("retention: pruned %s older than %g days", pruned.describe(), days)
        await anyio.sleep(interval)
