"""What runs used and how many were started, in the database, so limits hold across processes.

`admit` is one write transaction: it refuses a duplicate of a queued or running command, checks the
monthly token budget, counts the run against the daily limits (a compare-and-set `amount < limit` on
a counter row, so two processes admitting at once cannot both take the last run), records the run as
`queued` and queues its job (an automatic review, which has its own job already, is only recorded).
A refusal rolls all of it back. Counters are rows of `usage_counters`
keyed by scope and UTC period; tokens are added when a run ends.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, insert, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection

from bot.app.jobs.fairness import add_turns
from bot.app.jobs.schema import jobs, queued_job, runs, usage_counters
from bot.app.jobs.store import Store
from bot.app.limits.policy import Limits, day_of, month_of, next_day, next_month

RUN_KIND = "run"
ACTIVE = ("queued", "running")


@dataclass(frozen=True, slots=True)
class RunRequest:
    """A command that passed its permission checks and asks to run, or an automatic review about to
    run (`queue_job=False`: its own `auto_review` job runs it, so no `run` job is queued and the run
    is not linked to a job, which keeps it out of duplicate checks, `/beam cancel` and the sweep of
    abandoned tracking comments: an automatic review has a summary comment, not a tracking comment)."""

    run_id: str
    repo: str
    number: int
    skill: str
    requester: str
    installation_id: int
    command_key: str
    command_url: str
    delivery_id: str | None
    issue_url: str  # the issue or pull request page, for links to a tracking comment
    queue_job: bool = True
    config_version: str = ""  # the `.github/beam.yml` it was admitted under (repo_config)


@dataclass(frozen=True, slots=True)
class Admitted:
    run_id: str
    job_id: int | None  # None: an earlier attempt of this delivery admitted it already, or no job


@dataclass(frozen=True, slots=True)
class Duplicate:
    run_id: str
    status: str
    link: str


@dataclass(frozen=True, slots=True)
class OverLimit:
    limit: str  # the setting's name, e.g. runs_per_user_per_day
    value: int
    resets_at: datetime


@dataclass(frozen=True, slots=True)
class ActiveRun:
    run_id: str
    skill: str
    status: str


class _Refused(Exception):
    def __init__(self, over: OverLimit) -> None:
        super().__init__(over.limit)
        self.over = over


def run_job_key(repo: str, number: int) -> str:
    """Runs of one pull request go one at a time, beside (not behind) its command deliveries."""
    return f"{repo}#{number}:run"


def tracking_link(issue_url: str, comment_id: int | None, fallback: str) -> str:
    return f"{issue_url}#issuecomment-{comment_id}" if comment_id else fallback


class Ledger:
    def __init__(self, store: Store) -> None:
        self.store = store

    async def admit(self, request: RunRequest, limits: Limits) -> Admitted | Duplicate | OverLimit:
        now = self.store.clock()
        try:
            async with self.store.write() as conn:
                return await self._admit(conn, request, limits, now)
        except _Refused as refused:
            return refused.over

    async def _admit(
        self, conn: AsyncConnection, request: RunRequest, limits: Limits, now: float
    ) -> Admitted | Duplicate:
        known = select(runs.c.id).where(runs.c.id == request.run_id)
        if (await conn.execute(known)).first() is not None:
            return Admitted(request.run_id, None)
        same = (
            select(runs.c.id, runs.c.status, runs.c.tracking_comment_id, runs.c.command_url)
            .where(
                runs.c.repo == request.repo,
                runs.c.number == request.number,
                runs.c.command_key == request.command_key,
                runs.c.status.in_(ACTIVE),
                _job_alive(),
            )
            .order_by(runs.c.created_at)
            .limit(1)
        )
        twin = (await conn.execute(same)).first()
        if twin is not None:
            link = tracking_link(request.issue_url, twin.tracking_comment_id, twin.command_url or "")
            return Duplicate(twin.id, twin.status, link)
        budget = limits.tokens_per_installation_per_month
        if budget is not None:
            used = await _amount(conn, f"installation:{request.installation_id}", month_of(now))
            if used >= budget:
                raise _Refused(OverLimit("tokens_per_installation_per_month", budget, next_month(now)))
        day = day_of(now)
        for limit, scope, value in (
            (
                "runs_per_user_per_day",
                f"user:{request.repo}:{request.requester}",
                limits.runs_per_user_per_day,
            ),
            ("runs_per_repo_per_day", f"repo:{request.repo}", limits.runs_per_repo_per_day),
        ):
            if not await self._count(conn, scope, day, value):
                assert value is not None
                raise _Refused(OverLimit(limit, value, next_day(now)))
        await conn.execute(
            insert(runs).values(
                id=request.run_id,
                repo=request.repo,
                number=request.number,
                skill=request.skill,
                requester=request.requester,
                status="queued",
                created_at=now,
                installation_id=request.installation_id,
                command_key=request.command_key,
                command_url=request.command_url,
            )
        )
        if not request.queue_job:
            return Admitted(request.run_id, None)
        job = queued_job(
            RUN_KIND,
            run_job_key(request.repo, request.number),
            now,
            installation_id=request.installation_id,
            delivery_id=request.delivery_id,
            payload={"run_id": request.run_id, "config_version": request.config_version},
        )
        job_id = int((await conn.execute(insert(jobs).values(job).returning(jobs.c.id))).scalar_one())
        await conn.run_sync(add_turns, conn.dialect.name == "sqlite", [request.installation_id])
        await conn.execute(update(runs).where(runs.c.id == request.run_id).values(job_id=job_id))
        return Admitted(request.run_id, job_id)

    async def _count(self, conn: AsyncConnection, scope: str, period: str, limit: int | None) -> bool:
        """Add one to the counter if it is under `limit`; False (nothing added) when it is not."""
        dialect = sqlite if conn.dialect.name == "sqlite" else postgresql
        row = {"scope": scope, "period": period, "amount": 0}
        await conn.execute(dialect.insert(usage_counters).on_conflict_do_nothing(), row)
        stmt = update(usage_counters).where(
            usage_counters.c.scope == scope, usage_counters.c.period == period
        )
        if limit is not None:
            stmt = stmt.where(usage_counters.c.amount < limit)
        return (await conn.execute(stmt.values(amount=usage_counters.c.amount + 1))).rowcount == 1

    async def record_usage(
        self, run_id: str, installation_id: int, input_tokens: int, output_tokens: int
    ) -> None:
        """An attempt's tokens, added to its run's row and to its installation's month."""
        now = self.store.clock()
        async with self.store.write() as conn:
            await conn.execute(
                update(runs)
                .where(runs.c.id == run_id)
                .values(
                    # Added, not set: every attempt of a retried run used tokens.
                    input_tokens=func.coalesce(runs.c.input_tokens, 0) + input_tokens,
                    output_tokens=func.coalesce(runs.c.output_tokens, 0) + output_tokens,
                    installation_id=installation_id,
                )
            )
            scope, period = f"installation:{installation_id}", month_of(now)
            dialect = sqlite if conn.dialect.name == "sqlite" else postgresql
            row = {"scope": scope, "period": period, "amount": 0}
            await conn.execute(dialect.insert(usage_counters).on_conflict_do_nothing(), row)
            await conn.execute(
                update(usage_counters)
                .where(usage_counters.c.scope == scope, usage_counters.c.period == period)
                .values(amount=usage_counters.c.amount + input_tokens + output_tokens)
            )

    async def month_tokens(self, installation_id: int) -> int:
        async with self.store.read() as conn:
            return await _amount(conn, f"installation:{installation_id}", month_of(self.store.clock()))

    async def request_cancel(self, repo: str, number: int, prefix: str | None, by: str) -> list[ActiveRun]:
        """Mark the queued or running runs of this pull request (or the one `prefix` names) cancelled
        by `by`; each stops at its next step. Returns the runs marked."""
        where = [runs.c.repo == repo, runs.c.number == number, runs.c.status.in_(ACTIVE), _job_alive()]
        where.append(runs.c.cancelled_by.is_(None))
        if prefix is not None:
            where.append(runs.c.id.startswith(prefix, autoescape=True))
        async with self.store.write() as conn:
            found = (await conn.execute(select(runs.c.id, runs.c.skill, runs.c.status).where(*where))).all()
            ids = [row.id for row in found]
            if ids:
                await conn.execute(update(runs).where(runs.c.id.in_(ids)).values(cancelled_by=by))
        return [ActiveRun(row.id, row.skill, row.status) for row in found]

    async def cancelled_by(self, run_id: str) -> str | None:
        async with self.store.read() as conn:
            found = (await conn.execute(select(runs.c.cancelled_by).where(runs.c.id == run_id))).scalar()
        return str(found) if found is not None else None


def _job_alive() -> Any:
    """The run's job may still run it: a run whose job ended for good is not queued any more, whatever
    its row says (e.g. its job failed before the run began)."""
    alive = select(jobs.c.id).where(jobs.c.id == runs.c.job_id, jobs.c.state.in_(ACTIVE)).exists()
    return alive


async def _amount(conn: AsyncConnection, scope: str, period: str) -> int:
    stmt = select(func.coalesce(func.sum(usage_counters.c.amount), 0)).where(
        usage_counters.c.scope == scope, usage_counters.c.period == period
    )
    value: Any = (await conn.execute(stmt)).scalar_one()
    return int(value)
