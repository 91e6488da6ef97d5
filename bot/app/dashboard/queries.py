"""The dashboard's reads: a repository's runs, costs, findings, held pushes and failures over a span,
and every repository at once for the operator.

Sums over a span come from the roll-ups kept by triggers (jobs/rollups.py): `run_days` and
`finding_days` for every whole day inside it. A span and its weeks end at the time of the request, so
their edges cut days in two: the days holding an edge are summed from the raw rows instead, by the
same expression of the day, so each row is counted once, from one side or the other. The pull requests
come from `pull_totals`, and from their runs only for those that also had runs before the span. The
short lists (last failures, held pushes) are read from the raw tables. Raw reads go through indexes
(`runs_repo_created`, `runs_repo_number`, `review_findings_repo_created`,
`review_findings_repo_state_updated`, `pending_pushes_repo_number`, `jobs_state_run_after`).
Everything is grouped in the database; only the groups come back (bench/dashboard.py times a
repository with 100,000 runs).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import anyio
from sqlalchemy import BigInteger, Integer, Subquery, and_, case, cast, func, literal, or_, select, union_all
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.elements import ColumnElement

from bot.app.jobs.rollups import DAY, day_of
from bot.app.jobs.schema import (
    finding_days,
    jobs,
    pending_pushes,
    pull_totals,
    review_findings,
    run_days,
    runs,
)
from bot.app.jobs.store import Store

SPANS = (7, 30, 90)
WEEK = 7 * 86400.0
FINDING_STATES = ("open", "fixed", "dismissed")
RECENT_FAILURES = 20
HELD_PUSHES = 50
TOP_PULLS = 20
FEW_PULLS = 200  # pull requests straddling the span's start read by number; more read the whole span


@dataclass(frozen=True, slots=True)
class Edge:
    """An instant that cuts its day between two weeks (`before`, `after`; -1 is outside the span).

    The day's roll-up is given whole to one side, and the raw rows of the other side are moved across:
    the shorter side, so at most half a day is read raw (after `now` nothing is, as a rule)."""

    at: float
    before: int
    after: int
    short_after: bool = False

    @property
    def day(self) -> int:
        return day_of(self.at)

    @property
    def read_after(self) -> bool:
        """Whether the raw rows read are those from the edge to the day's end (else its start to the edge)."""
        return self.short_after or self.at - self.day * DAY > DAY / 2

    @property
    def rolled_week(self) -> int:
        """The week the day's roll-up goes to: the side not read raw."""
        return self.before if self.read_after else self.after

    def moved(self) -> tuple[int, int]:
        """The raw rows' move: out of the week the roll-up went to, into their own."""
        return (self.before, self.after) if self.read_after else (self.after, self.before)

    def rows(self, column: Any, dialect: str) -> ColumnElement[bool]:
        """The raw rows of the side read: by a range for the index, and the day's expression, so they
        are exactly rows the day's roll-up holds."""
        if self.read_after:
            bounds = and_(column >= self.at, column < (self.day + 1) * DAY + 1)
        else:
            bounds = and_(column >= self.day * DAY - 1, column < self.at)
        return and_(bounds, _day_expr(column, dialect) == self.day)


@dataclass(frozen=True, slots=True)
class Span:
    """The last `days` days up to `now`; weeks are counted back from `now`, the newest last."""

    days: int
    now: float

    @property
    def since(self) -> float:
        return self.now - self.days * 86400.0

    @property
    def weeks(self) -> int:
        return -(-self.days // 7)

    def week_start(self, index: int) -> float:
        """The start of week `index` (0 the oldest): weeks end at `now`, so the last one is whole."""
        return self.now - (self.weeks - index) * WEEK

    @property
    def first_day(self) -> int:
        """The day `since` falls in: read raw (it is cut), the roll-ups only after it."""
        return day_of(self.since)

    @property
    def edges(self) -> list[Edge]:
        """Each instant that cuts a day in two: the span's start (what is before it is out, week -1),
        each week's start, and `now` (what is after it, a clock behind the database's, counts in the
        span but in none of its weeks: week `weeks`). At most one falls in a day."""
        edges = [Edge(self.since, -1, 0)]
        edges += [Edge(self.week_start(w), w - 1, w) for w in range(1, self.weeks)]
        edges.append(Edge(self.now, self.weeks - 1, self.weeks, short_after=True))
        return edges

    def week_of_day(self, day: int) -> int:
        """The week a whole day inside the span belongs to (no week starts within it)."""
        return math.floor(((day + 0.5) * DAY - self.week_start(0)) / WEEK)


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


def _day_expr(column: Any, dialect: str) -> ColumnElement[Any]:
    """The roll-up day of a time column, by the expression the triggers use (jobs/rollups.py)."""
    if dialect == "postgresql":
        return cast(func.floor(column / DAY), BigInteger)
    return cast(column / DAY, Integer)


def _in_first_day(column: Any, span: Span, dialect: str) -> ColumnElement[bool]:
    """The rows of the day `since` falls in (those the roll-ups hold for it): a range for the index, a
    second wider each way for a time a float division puts on the next day, then the day's expression."""
    day = span.first_day
    return and_(column >= day * DAY - 1, column < (day + 1) * DAY + 1, _day_expr(column, dialect) == day)


def _edge_rows(
    columns: list[Any], where: list[ColumnElement[bool]], column: Any, span: Span, dialect: str
) -> Subquery:
    """The raw rows of every edge's side read, tagged with the edge's index (`part`): one range of the
    index per edge (UNION ALL), since with the ranges OR-ed SQLite reads the span from the first on."""
    parts = [
        select(literal(i).label("part"), *columns).where(*where, edge.rows(column, dialect))
        for i, edge in enumerate(span.edges)
    ]
    return union_all(*parts).subquery()


def _rolled_week(day: int, span: Span) -> int:
    """The week of a day's roll-up: the week it lies in, or for a day an edge cuts, that edge's choice."""
    for edge in span.edges:
        if edge.day == day:
            return edge.rolled_week
    return span.week_of_day(day)


def _after_first_day(day: Any, span: Span) -> ColumnElement[bool]:
    """Roll-up days wholly inside the span (the totals that need no edge but `since`)."""
    return and_(day > span.first_day)


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
    cut = _edge_rows(
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
        add(skill, status, _rolled_week(int(day), span), values)
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
            .where(f.repo == repo, f.created_at >= span.since, _in_first_day(f.created_at, span, dialect))
            .group_by(state)
        )
    ).all()
    rolled_states = (
        await conn.execute(
            select(d.state, func.sum(d.posted))
            .where(d.repo == repo, _after_first_day(d.day, span))
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
    cut = _edge_rows(
        [f.state], [f.repo == repo, f.state.in_(("fixed", "dismissed"))], f.updated_at, span, dialect
    ).c
    left_rows = (
        await conn.execute(select(cut.part, cut.state, func.count()).group_by(cut.part, cut.state))
    ).all()
    moved: dict[tuple[int, str], int] = {}
    for day, state, n in rolled:
        key = (_rolled_week(int(day), span), str(state))
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
                        _in_first_day(runs.c.created_at, span, conn.dialect.name),
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
                    .where(_after_first_day(d.day, span))
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
                    .where(_after_first_day(d.day, span))
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
            state = func.lower(f.state).label("state")  # the covering index, as in _finding_figures
            raw = (
                (
                    await conn.execute(
                        select(f.repo, state, func.count())
                        .where(
                            f.repo.in_(repos),
                            f.created_at >= span.since,
                            _in_first_day(f.created_at, span, conn.dialect.name),
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
