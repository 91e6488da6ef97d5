"""The limits a run is held to, decided without I/O: the server's, lowered (never raised) by the repo's.

Periods are UTC: a day is "2026-11-30" and resets at the next midnight UTC; a month is "2026-11" and
resets on the first of the next month. Prices turn tokens into an estimated cost.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import TypeVar

from bot.app.repo_config import RepoLimits
from bot.app.settings import Settings


@dataclass(frozen=True, slots=True)
class Limits:
    """None means no limit."""

    max_tokens_per_run: int | None = None
    max_minutes_per_run: float | None = None
    runs_per_user_per_day: int | None = None
    runs_per_repo_per_day: int | None = None
    tokens_per_installation_per_month: int | None = None
    check_runs_per_run: int | None = None  # `run_checks` calls by the author skill (docs/checks.md)
    # A review over one call's diff budget is read in chunks, one model call each, at most this many.
    review_max_calls: int = 3
    review_max_passes: int = 3  # votes one review may run (`review.passes` lowers it)
    review_tokens_per_call: int = 24_000


@dataclass(frozen=True, slots=True)
class Prices:
    """Dollars per million tokens; None when the operator did not configure prices."""

    input_per_mtok: float | None = None
    output_per_mtok: float | None = None

    def cost(self, input_tokens: int, output_tokens: int) -> float | None:
        if self.input_per_mtok is None and self.output_per_mtok is None:
            return None
        return (
            input_tokens * (self.input_per_mtok or 0.0) + output_tokens * (self.output_per_mtok or 0.0)
        ) / 1_000_000


@dataclass(frozen=True, slots=True)
class Policy:
    """The server side of costs and limits, built once from the settings."""

    limits: Limits = Limits()
    prices: Prices = Prices()
    max_per_installation: int | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> Policy:
        def cap(value: float) -> float | None:
            return value if value > 0 else None

        def whole(value: int) -> int | None:
            return value if value > 0 else None

        return cls(
            limits=Limits(
                max_tokens_per_run=whole(settings.max_tokens_per_run),
                max_minutes_per_run=cap(settings.max_minutes_per_run),
                runs_per_user_per_day=whole(settings.runs_per_user_per_day),
                runs_per_repo_per_day=whole(settings.runs_per_repo_per_day),
                tokens_per_installation_per_month=whole(settings.tokens_per_installation_per_month),
                check_runs_per_run=whole(settings.check_runs_per_run),
                review_max_calls=settings.review_max_calls,
                review_max_passes=settings.review_max_passes,
                review_tokens_per_call=settings.review_tokens_per_call,
            ),
            prices=Prices(settings.price_input_per_mtok, settings.price_output_per_mtok),
            max_per_installation=whole(settings.max_concurrency_per_installation),
        )


_N = TypeVar("_N", int, float)


def _lower(server: _N | None, repo: _N | None) -> _N | None:
    if repo is None:
        return server
    return repo if server is None else min(server, repo)


def effective(server: Limits, repo: RepoLimits) -> Limits:
    """The server's limits, each lowered by the repository's when it sets a smaller one."""
    return replace(
        server,
        max_tokens_per_run=_lower(server.max_tokens_per_run, repo.max_tokens_per_run),
        max_minutes_per_run=_lower(
            server.max_minutes_per_run,
            float(repo.max_minutes_per_run) if repo.max_minutes_per_run is not None else None,
        ),
        runs_per_user_per_day=_lower(server.runs_per_user_per_day, repo.runs_per_user_per_day),
        runs_per_repo_per_day=_lower(server.runs_per_repo_per_day, repo.runs_per_repo_per_day),
    )


def _utc(now: float) -> datetime:
    return datetime.fromtimestamp(now, UTC)


def day_of(now: float) -> str:
    return _utc(now).strftime("%Y-%m-%d")


def month_of(now: float) -> str:
    return _utc(now).strftime("%Y-%m")


def next_day(now: float) -> datetime:
    """Midnight UTC after `now`: when the daily counts start again."""
    start = _utc(now).replace(hour=0, minute=0, second=0, microsecond=0)
    return start + timedelta(days=1)


def next_month(now: float) -> datetime:
    """The first of the next month, 00:00 UTC: when the monthly budget starts again."""
    moment = _utc(now)
    year, month = (moment.year + 1, 1) if moment.month == 12 else (moment.year, moment.month + 1)
    return datetime(year, month, 1, tzinfo=UTC)
