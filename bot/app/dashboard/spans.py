"""A span of days up to now, its weeks, and how a sum over it is read: from the daily roll-ups kept
by triggers (jobs/rollups.py), and from the raw rows for the days an edge cuts in two.

A span and its weeks end at the time of the request, so their edges cut days in two: `run_days` and
`finding_days` give every whole day inside the span, and the days holding an edge are summed from
the raw rows instead, by the same expression of the day, so each row is counted once, from one side
or the other. Both pages' queries (`repo_queries`, `installation_queries`) read their spans through
these helpers; they are apart so the edge arithmetic is written once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from sqlalchemy import BigInteger, Integer, Subquery, and_, cast, func, literal, select, union_all
from sqlalchemy.sql.elements import ColumnElement

from bot.app.jobs.rollups import DAY, day_of

SPANS = (7, 30, 90)
WEEK = 7 * 86400.0


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
        return and_(bounds, day_expr(column, dialect) == self.day)


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


def day_expr(column: Any, dialect: str) -> ColumnElement[Any]:
    """The roll-up day of a time column, by the expression the triggers use (jobs/rollups.py)."""
    if dialect == "postgresql":
        return cast(func.floor(column / DAY), BigInteger)
    return cast(column / DAY, Integer)


def in_first_day(column: Any, span: Span, dialect: str) -> ColumnElement[bool]:
    """The rows of the day `since` falls in (those the roll-ups hold for it): a range for the index, a
    second wider each way for a time a float division puts on the next day, then the day's expression."""
    day = span.first_day
    return and_(column >= day * DAY - 1, column < (day + 1) * DAY + 1, day_expr(column, dialect) == day)


def edge_rows(
    columns: list[Any], where: list[ColumnElement[bool]], column: Any, span: Span, dialect: str
) -> Subquery:
    """The raw rows of every edge's side read, tagged with the edge's index (`part`): one range of the
    index per edge (UNION ALL), since with the ranges OR-ed SQLite reads the span from the first on."""
    parts = [
        select(literal(i).label("part"), *columns).where(*where, edge.rows(column, dialect))
        for i, edge in enumerate(span.edges)
    ]
    return union_all(*parts).subquery()


def rolled_week(day: int, span: Span) -> int:
    """The week of a day's roll-up: the week it lies in, or for a day an edge cuts, that edge's choice."""
    for edge in span.edges:
        if edge.day == day:
            return edge.rolled_week
    return span.week_of_day(day)


def after_first_day(day: Any, span: Span) -> ColumnElement[bool]:
    """Roll-up days wholly inside the span (the totals that need no edge but `since`)."""
    return and_(day > span.first_day)
