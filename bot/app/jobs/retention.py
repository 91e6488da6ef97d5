"""Retention: what is older than `BEAM_RETENTION_DAYS` leaves the database; held pushes never do.

Pruned, in this order, each only when older than the cutoff: finished runs, finished jobs, deliveries
no job refers to any more, and the payload (the webhook body) of deliveries that must stay as a row.
A row another table still refers to is kept (found from the schema's foreign keys, so a table added
later is respected without changes here): held pushes refer to their run, which keeps it, its job and
its delivery row, the audit trail of every push. A push's stored commit (`held_commits`, issue 23)
refers to its push row and goes only with it (ON DELETE CASCADE), so it is kept as long as the push.
Jobs still queued or running are never touched.

The effects journal (`effects`) and the runs' conversation checkpoints (`run_checkpoints`) go by age
too, but their keys name runs, deliveries, pull requests and jobs in many shapes, none of them a
foreign key. What reads a row is the job that wrote it (its retries), or a job queued right after by
the same work (a delivery's job hands a run or a review to the job it queues). So a row goes when it
was last written before the cutoff AND more than `HAND_OVER_MARGIN` before the oldest job still
queued or running was created: no job that may still run could have written it or been handed it.
(A delivery redelivered after that is new work anyway: its delivery row is gone too.) A row that
marks a job's end (reviews/abandoned.py) is written after the job finished, so it never goes before
the job's own row does.

`usage_counters` hold the daily run counts and monthly token totals of the limits (limits/ledger.py),
which read only the current day and month (`beam-bot usage` reads the runs): a day's counters go when
the day is more than `DAY_COUNTERS_KEPT` days old, a month's when it began more than
`MONTH_COUNTERS_KEPT` months before the current one (never sooner than the cutoff).

`prune` is idempotent and safe to run from several processes at once; the server and `beam-bot
worker` run it every `BEAM_PRUNE_INTERVAL` seconds, and `beam-bot prune` runs it on demand.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from datetime import UTC, datetime

import anyio
from sqlalchemy import ColumnElement, Table, and_, delete, exists, func, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from bot.app.jobs.schema import deliveries, effects, jobs, metadata, run_checkpoints, runs, usage_counters
from bot.app.jobs.store import Store

log = logging.getLogger("beam.retention")

FINISHED_JOB_STATES = ("done", "failed", "dead")
FINISHED_RUN_STATUSES = ("succeeded", "failed", "interrupted", "cancelled")
DAY = 86400.0
FIRST_PRUNE_DELAY = 60.0
# Far longer than any hand-over from one job to the job it queues (seconds, or a debounce).
HAND_OVER_MARGIN = DAY
DAY_COUNTERS_KEPT = 90
MONTH_COUNTERS_KEPT = 13


@dataclass(frozen=True, slots=True)
class Pruned:
    runs: int = 0
    jobs: int = 0
    deliveries: int = 0
    payloads: int = 0
    journal: int = 0  # effects-journal rows and run checkpoints
    counters: int = 0  # usage counters of periods long past

    @property
    def total(self) -> int:
        return self.runs + self.jobs + self.deliveries + self.payloads + self.journal + self.counters

    def describe(self) -> str:
        return (
            f"{self.runs} runs, {self.jobs} jobs, {self.deliveries} deliveries, {self.payloads} "
            f"delivery payloads, {self.journal} journal rows and {self.counters} usage counters"
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
        horizon = await _journal_horizon(conn, cutoff)
        journal = 0
        for table in (effects, run_checkpoints):
            journal += (await conn.execute(delete(table).where(table.c.updated_at < horizon))).rowcount or 0
        gone_counters = await conn.execute(delete(usage_counters).where(_past_periods(store.clock(), days)))
    return Pruned(
        runs=gone_runs.rowcount or 0,
        jobs=gone_jobs.rowcount or 0,
        deliveries=gone_deliveries.rowcount or 0,
        payloads=blanked.rowcount or 0,
        journal=journal,
        counters=gone_counters.rowcount or 0,
    )


async def _journal_horizon(conn: AsyncConnection, cutoff: float) -> float:
    """Journal rows last written before this go: the cutoff, or earlier while an older job may still
    run (the module's docstring says why)."""
    oldest = select(func.min(jobs.c.created_at)).where(jobs.c.state.not_in(FINISHED_JOB_STATES))
    created = (await conn.execute(oldest)).scalar()
    return cutoff if created is None else min(cutoff, float(created) - HAND_OVER_MARGIN)


def _past_periods(now: float, days: float) -> ColumnElement[bool]:
    """The usage counters of days and months long past (periods are "2026-11-30" and "2026-11")."""
    moment = datetime.fromtimestamp(now, UTC)
    first_day = datetime.fromtimestamp(now - max(days, DAY_COUNTERS_KEPT) * DAY, UTC).strftime("%Y-%m-%d")
    back = max(MONTH_COUNTERS_KEPT, math.ceil(days / 28) + 1)  # a month is 28 days or more
    index = moment.year * 12 + moment.month - 1 - back
    first_month = f"{index // 12:04d}-{index % 12 + 1:02d}"
    period, size = usage_counters.c.period, func.length(usage_counters.c.period)
    return ((size == len(first_day)) & (period < first_day)) | (
        (size == len(first_month)) & (period < first_month)
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
