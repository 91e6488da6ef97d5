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


def test_the_backoff_starts_at_the_read_back_time_doubles_and_is_capped() -> None:
    """Issue 29: the first retry comes once nothing begun can still land (12 s), not after a minute."""
    delays = [outage_delay(n, 1800.0, 12.0) for n in range(1, 9)]
    assert delays == [12.0, 24.0, 48.0, 96.0, 192.0, 384.0, 450.0, 450.0]
    # A short outage wait (the tests' 60 s) starts sooner: a thirtieth of it.
    assert [outage_delay(n, 60.0, 12.0) for n in range(1, 5)] == [2.0, 4.0, 8.0, 15.0]


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
        at = await OutageWait(Journal(clocked_store), RUN, 1800.0, 12.0).next_try("POST /reviews")
        if at is None:
            break
        tries.append(at - start)
        fake_clock.now = at
    assert tries == [12.0, 36.0, 84.0, 180.0, 372.0, 756.0, 1206.0, 1656.0, 1800.0]
    assert fake_clock.now - start == 1800.0  # the try at the end failed too: the run stops waiting


async def test_no_wait_fails_at_once(clocked_store: Store) -> None:
    assert await OutageWait(Journal(clocked_store), RUN, 0.0).next_try() is None


async def test_502_500_502_on_three_writes_cost_seconds_not_minutes(
    clocked_store: Store, fake_clock: FakeClock
) -> None:
    """Issue 29: each write's first failure waits only the read-back time; the three hiccups of a
    `/beam review` (reaction, tracking comment, review) are over well within a minute."""
    start = fake_clock.now
    for write in ("POST /repos/o/r/issues/comments/1/reactions", "POST /repos/o/r/issues/7/comments"):
        at = await OutageWait(Journal(clocked_store), RUN, 1800.0, 12.0).next_try(write)
        assert at is not None and at - fake_clock.now == 12.0
        fake_clock.now = at
    at = await OutageWait(Journal(clocked_store), RUN, 1800.0, 12.0).next_try(
        "POST /repos/o/r/pulls/7/reviews"
    )
    assert at is not None and at - start == 36.0 < 60.0
    # The same write failing again doubles its own wait.
    fake_clock.now = at
    again = await OutageWait(Journal(clocked_store), RUN, 1800.0, 12.0).next_try(
        "POST /repos/o/r/pulls/7/reviews"
    )
    assert again is not None and again - at == 24.0
