"""The repository page's reads: a repository's runs, costs, pull requests, findings, held pushes and
failures over a span.

Sums over the span come from the roll-ups and the edges' raw rows (`spans`). The pull requests come
from `pull_totals`, and from their runs only for those that also had runs before the span. The short
lists (last failures, held pushes) are read from the raw tables. Raw reads go through indexes
(`runs_repo_created`, `runs_repo_number`, `review_findings_repo_created`,
`review_findings_repo_state_updated`, `pending_pushes_repo_number`). Everything is grouped in the
database; only the groups come back (bench/dashboard.py times a repository with 100,000 runs).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import anyio
from sqlalchemy import BigInteger, and_, cast, func, or_, select
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.elements import ColumnElement

from bot.app.dashboard.spans import Span, after_first_day, edge_rows, in_first_day, rolled_week
from bot.app.jobs.schema import (
    finding_days,
    pending_pushes,
    pull_totals,
    review_findings,
    run_days,
    runs,
)
from bot.app.jobs.store import Store

FINDING_STATES = ("open", "fixed", "dismissed")
RECENT_FAILURES = 20
HELD_PUSHES = 50
TOP_PULLS = 20
FEW_PULLS = 200  # pull requests straddling the span's start read by number; more read the whole span


@dataclass(frozen=True, slots=True)
class RunGroup:
    skill: str
    status: str
    runs: int
    seconds: float  # total duration of the runs that finished
    timed: int  # how many of them had a start and an end
    input_tokens: int
    output_tokens: int


@dataclass(frozen=True, slots=True)
class PullCost:
    number: int | None
    runs: int
    input_tokens: int
    output_tokens: int


@dataclass(frozen=True, slots=True)
class WeekTokens:
    week: int
    runs: int
    input_tokens: int
    output_tokens: int


@dataclass(frozen=True, slots=True)
class WeekFindings:
    week: int
    fixed: int
    dismissed: int


@dataclass(frozen=True, slots=True)
class HeldPush:
    id: str
    number: int | None
    requester: str | None
    branch: str | None
    commit_sha: str | None
    approval_comment_id: int | None
    created_at: float
    expires_at: float | None


@dataclass(frozen=True, slots=True)
class Failure:
    run_id: str
    skill: str
    number: int | None
    error_code: str | None
    error_message: str | None
    created_at: float
    command_url: str | None


@dataclass(frozen=True, slots=True)
class RepoFigures:
    """Everything the repository page shows, read in one snapshot."""

    repo: str
    span: Span
    runs: list[RunGroup]
    pulls: list[PullCost]  # the most expensive pull requests first, at most TOP_PULLS
    pull_count: int  # pull requests (and issues) with runs in the span
    weekly_tokens: list[WeekTokens]  # one per week of the span, the oldest first
    findings: dict[str, int]  # posted in the span, by state
    weekly_findings: list[WeekFindings]  # findings that left `open` per week
    held: list[HeldPush]
    failures: list[Failure]


def _milliseconds(started: Any, finished: Any) -> ColumnElement[Any]:
    """A run's duration in whole milliseconds, rounded as the roll-ups round it; NULL without both ends."""
    return cast(func.round((finished - started) * 1000), BigInteger)


async def repo_figures(store: Store, repo: str, span: Span) -> RepoFigures:
    """The runs' figures and the findings' figures, read at once on two connections: each part
    scans its own index, so on two cores the page waits for the slower part instead of the sum."""
    found: dict[str, Any] = {}

    async def read_runs() -> None:
        async with store.read() as conn:
            found["runs"] = await _run_figures(conn, repo, span)

    async def read_findings() -> None:
        async with store.read() as conn:
            found["findings"] = await _finding_figures(conn, repo, span)

    async with anyio.create_task_group() as tg:
        tg.start_soon(read_runs)
        tg.start_soon(read_findings)
    groups, pulls, weekly_tokens, failures = found["runs"]
    findings, weekly_findings, held = found["findings"]
    return RepoFigures(
        repo,
        span,
        groups,
        pulls[:TOP_PULLS],
        len(pulls),
        weekly_tokens,
        findings,
        weekly_findings,
        held,
        failures,
    )


async def _run_figures(
    conn: AsyncConnection, repo: str, span: Span
) -> tuple[list[RunGroup], list[PullCost], list[WeekTokens], list[Failure]]:
    dialect = conn.dialect.name
    in_span = and_(runs.c.repo == repo, runs.c.created_at >= span.since)
    # Every day of the span from the roll-ups, by day (each lies in one week, or an edge says which).
    d = run_days.c
    rolled_rows = (
        await conn.execute(
            select(
                d.skill,
                d.status,
                d.day,
                func.sum(d.runs),
                func.sum(d.duration_ms),
                func.sum(d.timed),
                func.sum(d.input_tokens),
                func.sum(d.output_tokens),
            )
            .where(d.repo == repo, d.day >= span.first_day)
            .group_by(d.skill, d.status, d.day)
        )
    ).all()
    # The raw runs of the edges' sides (covering index runs_repo_created), moved across the edges.
    r = runs.c
    cut = edge_rows(
        [r.skill, r.status, r.started_at, r.finished_at, r.input_tokens, r.output_tokens],
        [r.repo == repo],
        r.created_at,
        span,
        dialect,
    ).c
    milliseconds = _milliseconds(cut.started_at, cut.finished_at)
    raw_rows = (
        await conn.execute(
            select(
                cut.part,
                cut.skill,
                cut.status,
                func.count(),
                # NULL when a run has no start or no end: SUM and COUNT skip it.
                func.coalesce(func.sum(milliseconds), 0),
                func.count(milliseconds),
                func.coalesce(func.sum(cut.input_tokens), 0),
                func.coalesce(func.sum(cut.output_tokens), 0),
            ).group_by(cut.part, cut.skill, cut.status)
        )
    ).all()
    sums: dict[tuple[str, str, int], list[int]] = {}

    def add(skill: Any, status: Any, week: int, values: Any, sign: int = 1) -> None:
        totals = sums.setdefault((str(skill), str(status), week), [0, 0, 0, 0, 0])
        for index, value in enumerate(values):
            totals[index] += sign * int(value or 0)

    for skill, status, day, *values in rolled_rows:
        add(skill, status, rolled_week(int(day), span), values)
    for part, skill, status, *values in raw_rows:
        out_of, into = span.edges[int(part)].moved()
        add(skill, status, out_of, values, -1)
        add(skill, status, into, values)
    by_group: dict[tuple[str, str], list[int]] = {}
    by_week: dict[int, list[int]] = {}
    for (skill, status, w), (n, ms, timed_n, i, o) in sums.items():
        if w < 0 or not n:  # before the span
            continue
        totals = by_group.setdefault((skill, status), [0, 0, 0, 0, 0])
        for index, value in enumerate((n, ms, timed_n, i, o)):
            totals[index] += value
        weekly = by_week.setdefault(w, [0, 0, 0])
        for index, value in enumerate((n, i, o)):
            weekly[index] += value
    groups = [
        RunGroup(skill, status, t[0], t[1] / 1000, t[2], t[3], t[4])
        for (skill, status), t in sorted(by_group.items())
    ]
    weekly_tokens = [WeekTokens(w, *by_week.get(w, [0, 0, 0])) for w in range(span.weeks)]

    pulls = await _pull_costs(conn, repo, span)

    failure_rows = (
        await conn.execute(
            select(
                runs.c.id,
                runs.c.skill,
                runs.c.number,
                runs.c.error_code,
                runs.c.error_message,
                runs.c.created_at,
                runs.c.command_url,
            )
            .where(in_span, runs.c.status == "failed")
            .order_by(runs.c.created_at.desc())
            .limit(RECENT_FAILURES)
        )
    ).all()
    failures = [Failure(*row) for row in failure_rows]
    return groups, pulls, weekly_tokens, failures


async def _pull_costs(conn: AsyncConnection, repo: str, span: Span) -> list[PullCost]:
    """Every pull request with runs in the span, the most expensive first. One whose runs all came
    after `since` (its first-run bound says so) counts with its totals; the others, which had runs
    before the span too, are summed from their runs in it."""
    t = pull_totals.c
    totals = (
        await conn.execute(
            select(t.number, t.runs, t.input_tokens, t.output_tokens, t.first_at).where(
                t.repo == repo, t.last_at >= span.since
            )
        )
    ).all()
    found = {
        int(n): PullCost(int(n) or None, int(c), int(i), int(o))
        for n, c, i, o, first in totals
        if first >= span.since
    }
    straddling = [int(n) for n, _, _, _, first in totals if first < span.since]
    if straddling:
        # Grouped by an expression, not the column: SQLite would otherwise walk runs_repo_number to
        # save the GROUP BY's sort, reading every run of the repository row by row instead of the span
        # from the covering index. Pull request numbers start at 1; 0 is "none".
        number = func.coalesce(runs.c.number, 0).label("number")
        query = (
            select(number, func.count(), func.sum(runs.c.input_tokens), func.sum(runs.c.output_tokens))
            .where(runs.c.repo == repo, runs.c.created_at >= span.since)
            .group_by(number)
        )
        if len(straddling) <= FEW_PULLS:
            # A few: their own runs through runs_repo_number, instead of the whole span.
            named = [n for n in straddling if n]
            picked = runs.c.number.in_(named)
            query = query.where(or_(picked, runs.c.number.is_(None)) if 0 in straddling else picked)
        for n, c, i, o in (await conn.execute(query)).all():
            if c:
                found[int(n)] = PullCost(int(n) or None, int(c), int(i or 0), int(o or 0))
    return sorted(found.values(), key=lambda p: (-(p.input_tokens + p.output_tokens), p.number or 0))


async def _finding_figures(
    conn: AsyncConnection, repo: str, span: Span
) -> tuple[dict[str, int], list[WeekFindings], list[HeldPush]]:
    dialect = conn.dialect.name
    f, d = review_findings.c, finding_days.c
    # Posted in the span, by state now: the first day raw (review_findings_repo_created covers it;
    # lower(state) keeps SQLite on that index), the days after it from the roll-ups.
    state = func.lower(f.state).label("state")
    state_rows = (
        await conn.execute(
            select(state, func.count())
            .where(f.repo == repo, f.created_at >= span.since, in_first_day(f.created_at, span, dialect))
            .group_by(state)
        )
    ).all()
    rolled_states = (
        await conn.execute(
            select(d.state, func.sum(d.posted))
            .where(d.repo == repo, after_first_day(d.day, span))
            .group_by(d.state)
        )
    ).all()
    findings = dict.fromkeys(FINDING_STATES, 0)
    for s, n in [*state_rows, *rolled_states]:
        if n:
            findings[str(s)] = findings.get(str(s), 0) + int(n)

    # Left `open` per week: the roll-ups by day, and the edges' sides raw
    # (review_findings_repo_state_updated) moved across them.
    rolled = (
        await conn.execute(
            select(d.day, d.state, func.sum(d.left_open))
            .where(d.repo == repo, d.state.in_(("fixed", "dismissed")), d.day >= span.first_day)
            .group_by(d.day, d.state)
        )
    ).all()
    cut = edge_rows(
        [f.state], [f.repo == repo, f.state.in_(("fixed", "dismissed"))], f.updated_at, span, dialect
    ).c
    left_rows = (
        await conn.execute(select(cut.part, cut.state, func.count()).group_by(cut.part, cut.state))
    ).all()
    moved: dict[tuple[int, str], int] = {}
    for day, state, n in rolled:
        key = (rolled_week(int(day), span), str(state))
        moved[key] = moved.get(key, 0) + int(n or 0)
    for part, state, n in left_rows:
        out_of, into = span.edges[int(part)].moved()
        moved[(out_of, str(state))] = moved.get((out_of, str(state)), 0) - int(n)
        moved[(into, str(state))] = moved.get((into, str(state)), 0) + int(n)
    weekly_findings = [
        WeekFindings(w, moved.get((w, "fixed"), 0), moved.get((w, "dismissed"), 0)) for w in range(span.weeks)
    ]

    p = pending_pushes.c
    held_rows = (
        await conn.execute(
            select(
                p.id,
                p.number,
                p.requester,
                p.branch,
                p.commit_sha,
                p.approval_comment_id,
                p.created_at,
                p.expires_at,
            )
            .where(p.repo == repo, p.state == "pending")
            .order_by(p.created_at.desc())
            .limit(HELD_PUSHES)
        )
    ).all()
    held = [HeldPush(*row) for row in held_rows]
    return findings, weekly_findings, held
