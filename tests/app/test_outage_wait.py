"""Issue 23: how long a run waits for GitHub (bot/app/runs/outage.py), on the real journal tables.

The end-to-end cases (a review posted once after 502s, a timeout, the give-up, a 422) are in
tests/e2e/test_github_outage.py; here, the schedule itself and what counts as GitHub being down.
"""

from __future__ import annotations

import pytest

from bot.app.effects.journal import Journal
from bot.app.github.api import GitHubError
from bot.app.jobs.store import Store
from bot.app.runs.outage import OutageWait, github_down, outage_delay
from bot.app.settings import Settings
from tests.support.db import FakeClock

pytestmark = pytest.mark.anyio
RUN = "5b0e3a52-0000-4000-8000-000000000001"


def error(status: int, *, retry_at: float | None = None) -> GitHubError:
    return GitHubError(status, "x", method="POST", path="/repos/o/r/pulls/7/reviews", retry_at=retry_at)


def test_down_means_a_5xx_or_no_answer_not_a_refusal_or_a_rate_limit() -> None:
    assert github_down(error(502)) and github_down(error(500)) and github_down(error(0))
    assert not github_down(error(422)) and not github_down(error(404))
    assert not github_down(error(429, retry_at=1.0)) and not github_down(error(403, retry_at=1.0))


def test_the_backoff_is_minutes_growing_and_capped() -> None:
    assert [outage_delay(n, 1800.0) for n in range(1, 7)] == [60.0, 120.0, 240.0, 450.0, 450.0, 450.0]


def test_the_setting_is_seconds_with_a_30_minute_default() -> None:
    assert Settings(_env_file=None).github_outage_wait == 1800.0
    assert Settings(_env_file=None, github_outage_wait="90").github_outage_wait == 90.0


async def test_every_attempt_counts_from_the_first_failure_and_the_last_try_is_at_the_end(
    clocked_store: Store, fake_clock: FakeClock
) -> None:
    start = fake_clock.now
    tries: list[float] = []
    while True:
        # A new OutageWait each time, as each attempt (on any worker) makes its own.
        at = await OutageWait(Journal(clocked_store), RUN, 1800.0).next_try()
        if at is None:
            break
        tries.append(at - start)
        fake_clock.now = at
    assert tries == [60.0, 180.0, 420.0, 870.0, 1320.0, 1770.0, 1800.0]
    assert fake_clock.now - start == 1800.0  # the try at the end failed too: the run stops waiting


async def test_no_wait_fails_at_once(clocked_store: Store) -> None:
    assert await OutageWait(Journal(clocked_store), RUN, 0.0).next_try() is None
