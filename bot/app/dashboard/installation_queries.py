"""The installation page's reads, for the operator: every repository's runs, findings and held pushes
over a span, and the workers' queue.

Sums come from the roll-ups and the first day's raw rows (`spans`); the held pushes and the queue
from the raw tables (`jobs_state_run_after`). Everything is grouped in the database.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import anyio
from sqlalchemy import case, func, select

from bot.app.dashboard.spans import Span, after_first_day, in_first_day
from bot.app.jobs.schema import finding_days, jobs, pending_pushes, review_findings, run_days, runs
from bot.app.jobs.store import Store


@dataclass(frozen=True, slots=True)
class RepoSummary:
    repo: str
    installation_id: int | None
    runs: int
    failed: int
    input_tokens: int
    output_tokens: int
    findings: int
    fixed: int
    dismissed: int
    held: int


@dataclass(frozen=True, slots=True)
class InstallationFigures:
    span: Span
    repos: list[RepoSummary]
    queue: dict[str, int]  # jobs by state: queued, running (the workers' queue depth)
    oldest_queued: float | None  # when the longest-waiting job became due


async def installation_figures(store: Store, span: Span) -> InstallationFigures:
    """Every repository's runs, and their findings, held pushes and the queue, read at once on two
    connections (as `repo_figures` does)."""
    read: dict[str, list[Any]] = {}

    async def read_runs() -> None:
        async with store.read() as conn:
            # The first day raw (runs_created_at), the days after it from the roll-ups.
            raw = (
                await conn.execute(
                    select(
                        runs.c.repo,
                        func.max(runs.c.installation_id),
                        func.count(),
                        func.coalesce(func.sum(case((runs.c.status == "failed", 1), else_=0)), 0),
                        func.coalesce(func.sum(runs.c.input_tokens), 0),
                        func.coalesce(func.sum(runs.c.output_tokens), 0),
                    )
                    .where(
                        runs.c.created_at >= span.since,
                        in_first_day(runs.c.created_at, span, conn.dialect.name),
                    )
                    .group_by(runs.c.repo)
                )
            ).all()
            d = run_days.c
            rolled = (
                await conn.execute(
                    select(
                        d.repo,
                        func.max(func.nullif(d.installation_id, 0)),  # 0 stands for none
                        func.sum(d.runs),
                        func.sum(case((d.status == "failed", d.runs), else_=0)),
                        func.sum(d.input_tokens),
                        func.sum(d.output_tokens),
                    )
                    .where(after_first_day(d.day, span))
                    .group_by(d.repo)
                )
            ).all()
            read["runs"] = [*raw, *rolled]

    async def read_rest() -> None:
        async with store.read() as conn:
            f, d = review_findings.c, finding_days.c
            rolled = (
                await conn.execute(
                    select(d.repo, d.state, func.sum(d.posted))
                    .where(after_first_day(d.day, span))
                    .group_by(d.repo, d.state)
                )
            ).all()
            # The first day raw, only for the repositories that had findings then: each is a range
            # of review_findings_repo_created (no index has created_at first).
            repos = (
                (await conn.execute(select(d.repo).distinct().where(d.day == span.first_day, d.posted > 0)))
                .scalars()
                .all()
            )
            state = func.lower(f.state).label("state")  # the covering index, as in repo_queries
            raw = (
                (
                    await conn.execute(
                        select(f.repo, state, func.count())
                        .where(
                            f.repo.in_(repos),
                            f.created_at >= span.since,
                            in_first_day(f.created_at, span, conn.dialect.name),
                        )
                        .group_by(f.repo, state)
                    )
                ).all()
                if repos
                else []
            )
            finding_rows = [*raw, *rolled]
            p = pending_pushes.c
            held_rows = (
                await conn.execute(select(p.repo, func.count()).where(p.state == "pending").group_by(p.repo))
            ).all()
            queue_rows = (
                await conn.execute(
                    select(jobs.c.state, func.count(), func.min(jobs.c.run_after))
                    .where(jobs.c.state.in_(("queued", "running")))
                    .group_by(jobs.c.state)
                )
            ).all()
            read["findings"], read["held"], read["queue"] = (
                list(finding_rows),
                list(held_rows),
                list(queue_rows),
            )

    async with anyio.create_task_group() as tg:
        tg.start_soon(read_runs)
        tg.start_soon(read_rest)
    run_rows, finding_rows, held_rows, queue_rows = (
        read["runs"],
        read["findings"],
        read["held"],
        read["queue"],
    )
    found: dict[str, dict[str, Any]] = {}

    def entry(repo: str) -> dict[str, Any]:
        return found.setdefault(
            repo,
            {"installation_id": None, "runs": 0, "failed": 0, "input_tokens": 0, "output_tokens": 0}
            | {"findings": 0, "fixed": 0, "dismissed": 0, "held": 0},
        )

    for repo, installation, n, failed, i, o in run_rows:
        if not n:
            continue
        item = entry(str(repo))
        if installation is not None:
            item["installation_id"] = max(int(installation), item["installation_id"] or 0)
        for key, value in (("runs", n), ("failed", failed), ("input_tokens", i), ("output_tokens", o)):
            item[key] += int(value)
    for repo, state, n in finding_rows:
        if not n:
            continue
        item = entry(str(repo))
        item["findings"] += int(n)
        if state in ("fixed", "dismissed"):
            item[str(state)] += int(n)
    for repo, n in held_rows:
        entry(str(repo))["held"] = int(n)
    summaries = [RepoSummary(repo, **values) for repo, values in sorted(found.items())]
    queue = {"queued": 0, "running": 0}
    oldest = None
    for state, n, first in queue_rows:
        queue[str(state)] = int(n)
        if state == "queued" and first is not None:
            oldest = float(first)
    return InstallationFigures(span, summaries, queue, oldest)
