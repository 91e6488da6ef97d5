"""Costs and limits decided without I/O: a repository may only lower the server's limits, periods are
UTC days and months, prices make a cost, and the run guard stops at a cap or a cancel."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from bot.app.commands import Command, CommandError, help_text, parse
from bot.app.limits.policy import Limits, Policy, Prices, day_of, effective, month_of, next_day, next_month
from bot.app.repo_config import RepoLimits, parse_repo_config
from bot.app.runs.usage import Meter, RunGuard
from bot.app.settings import Settings
from bot.beam.completion import Completion, ScriptedClient
from bot.beam.types import TokenUsage

SERVER = Limits(
    max_tokens_per_run=1000,
    max_minutes_per_run=10.0,
    runs_per_user_per_day=5,
    runs_per_repo_per_day=50,
    tokens_per_installation_per_month=10_000,
)


def test_the_repository_config_cannot_raise_a_server_limit() -> None:
    higher = parse_repo_config(
        "limits:\n  max_tokens_per_run: 999999\n  max_minutes_per_run: 600\n"
        "  runs_per_user_per_day: 100\n  runs_per_repo_per_day: 1000\n"
    )
    assert higher.ok
    assert effective(SERVER, higher.config.limits) == SERVER


def test_the_repository_config_lowers_a_server_limit() -> None:
    lower = parse_repo_config("limits:\n  max_tokens_per_run: 200\n  runs_per_user_per_day: 2\n")
    limits = effective(SERVER, lower.config.limits)
    assert limits.max_tokens_per_run == 200
    assert limits.runs_per_user_per_day == 2
    assert limits.runs_per_repo_per_day == 50  # not set: the server's
    # The monthly budget is the server's alone: beam.yml has no such key.
    assert "tokens_per_installation_per_month" not in RepoLimits.model_fields
    assert not parse_repo_config("limits:\n  tokens_per_installation_per_month: 1\n").ok


def test_a_server_without_a_limit_takes_the_repositorys() -> None:
    assert effective(Limits(), RepoLimits(max_minutes_per_run=3)).max_minutes_per_run == 3.0


def test_limits_in_beam_yml_are_checked() -> None:
    assert parse_repo_config("limits:\n  runs_per_user_per_day: 0\n").errors == [
        "limits.runs_per_user_per_day: 0 is outside the allowed range; the minimum is 1"
    ]
    assert (
        parse_repo_config("limits:\n  colour: 3\n")
        .errors[0]
        .startswith("limits.colour: unknown setting; valid settings are max_tokens_per_run,")
    )


def test_settings_make_the_policy_and_zero_turns_a_limit_off() -> None:
    settings = Settings(
        _env_file=None,  # type: ignore[call-arg]
        price_input_per_mtok=3.0,
        price_output_per_mtok=15.0,
        max_tokens_per_run=0,
        runs_per_user_per_day=7,
        max_concurrency_per_installation=3,
    )
    policy = Policy.from_settings(settings)
    assert policy.limits.max_tokens_per_run is None
    assert policy.limits.runs_per_user_per_day == 7
    assert policy.max_per_installation == 3
    assert policy.prices.cost(1_000_000, 100_000) == pytest.approx(4.5)
    assert Prices().cost(10, 10) is None


def test_a_reviews_calls_and_tokens_per_call_come_from_the_settings_and_the_repo_may_lower_calls() -> None:
    default = Policy.from_settings(Settings(_env_file=None))  # type: ignore[call-arg]
    assert (default.limits.review_max_calls, default.limits.review_tokens_per_call) == (3, 24_000)
    settings = Settings(_env_file=None, review_max_calls=5, review_tokens_per_call=8_000)  # type: ignore[call-arg]
    limits = Policy.from_settings(settings).limits
    assert (limits.review_max_calls, limits.review_tokens_per_call) == (5, 8_000)
    rules = parse_repo_config("review:\n  max_calls: 2\n").config.review
    assert rules.calls_limit(limits.review_max_calls) == 2
    assert parse_repo_config("review:\n  max_calls: 9\n").config.review.calls_limit(5) == 5  # never raised
    with pytest.raises(ValidationError):
        Settings(_env_file=None, review_max_calls=0)  # type: ignore[call-arg]


def test_periods_are_utc_days_and_months() -> None:
    late = datetime(2026, 12, 31, 23, 59, 30, tzinfo=UTC).timestamp()
    assert (day_of(late), month_of(late)) == ("2026-12-31", "2026-12")
    assert next_day(late) == datetime(2027, 1, 1, tzinfo=UTC)
    assert next_month(late) == datetime(2027, 1, 1, tzinfo=UTC)
    assert next_month(datetime(2026, 2, 10, tzinfo=UTC).timestamp()) == datetime(2026, 3, 1, tzinfo=UTC)


def test_cancel_commands_parse() -> None:
    assert parse("/beam cancel") == Command(name="cancel")
    assert parse("/beam cancel 1A2B3C4D") == Command(name="cancel", arg="1a2b3c4d")
    assert isinstance(parse("/beam cancel everything now"), CommandError)
    assert isinstance(parse("/beam cancel <script>"), CommandError)
    assert "/beam cancel" in help_text()


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.anyio
async def test_the_guard_stops_at_the_token_cap_the_budget_the_time_cap_and_a_cancel() -> None:
    usage = TokenUsage(prompt_tokens=300, completion_tokens=100, total_tokens=400)
    meter = Meter(ScriptedClient([Completion.of_text("a", usage=usage, model="m1")] * 3))
    cancelled: list[str] = []

    async def cancelled_by() -> str | None:
        return cancelled[0] if cancelled else None

    clock = Clock()
    limits = Limits(max_tokens_per_run=1000, max_minutes_per_run=1.0, tokens_per_installation_per_month=5000)
    guard = RunGuard(meter, limits, month_used=3900, cancelled_by=cancelled_by, clock=clock)
    assert await guard() is None
    await meter.complete([], [])
    await meter.complete([], [])
    assert (meter.calls, meter.input_tokens, meter.output_tokens, meter.model) == (2, 600, 200, "m1")
    assert await guard() is None  # 800 < 1000; 3900 + 800 < 5000
    await meter.complete([], [])
    assert await guard() == "limit max_tokens_per_run"
    assert guard.stop is not None and (guard.stop.limit, guard.stop.value) == ("max_tokens_per_run", 1000)

    budget = RunGuard(
        meter, Limits(tokens_per_installation_per_month=5000), month_used=3800, cancelled_by=cancelled_by
    )
    assert await budget() == "limit tokens_per_installation_per_month"

    timed = RunGuard(Meter(ScriptedClient([])), limits, month_used=0, cancelled_by=cancelled_by, clock=clock)
    clock.now += 59
    assert await timed() is None
    clock.now += 1
    assert await timed() == "limit max_minutes_per_run"

    cancelled.append("maintainer")
    assert await timed() == "cancelled by maintainer"
    assert timed.stop is not None and timed.stop.by == "maintainer"
