"""Issue 10 with issue 8's crash tests: kill every bot process around the `beam / review` check run of
an automatic review (its creation by the trigger before, during and after GitHub made it; the job's
update to in progress and to completed, during), start them again, and find exactly one check run on
the head, completed and neutral, beside one review and one summary comment."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from bot.app.jobs.schema import jobs
from tests.e2e.review_support import CONFIG, Story
from tests.support.bot_process import bot_stack, wait_for
from tests.support.db import pg_database_url_fixture  # noqa: F401 - the fixture, by its name
from tests.support.fake_github import Call
from tests.support.fleet import Fleet, fleet_on

LINE_F2 = 5


def _patch_to(status: str) -> Callable[[Call], bool]:
    return lambda c: (
        c.method == "PATCH"
        and "/check-runs/" in c.path
        and isinstance(c.body, dict)
        and c.body.get("status") == status
    )


CALLS: dict[str, Callable[[Call], bool]] = {
    "create": lambda c: c.method == "POST" and c.path.endswith("/check-runs"),
    "start": _patch_to("in_progress"),
    "finish": _patch_to("completed"),
}
POINTS = [
    ("create", "before"),
    ("create", "during"),
    ("create", "after"),
    ("start", "during"),
    ("finish", "during"),
]


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def fleet(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Fleet]:
    with bot_stack(tmp_path, BEAM_CONCURRENCY="1") as bot:
        bot.llm.fallback_text = "Done."
        Story(bot).seed(CONFIG)
        with fleet_on(request, bot) as fleet:
            yield fleet


def every_job_done(fleet: Fleet) -> bool:
    states = [row["state"] for row in fleet.rows(jobs)]
    return any(row["kind"] == "auto_review" for row in fleet.rows(jobs)) and all(s == "done" for s in states)


@pytest.mark.parametrize(("write", "phase"), POINTS)
def test_a_review_killed_around_its_check_run_ends_with_one_neutral_check_run(
    fleet: Fleet, write: str, phase: str
) -> None:
    bot = fleet.bot
    story = Story(bot)
    story.script_review([{"path": "src/calc.py", "line": LINE_F2, "body": "f2 subtracts."}])
    if phase == "during":
        fleet.kill_during(CALLS[write])
        fleet.start(None)
    else:
        fleet.start(f"check_run:{phase}")  # the trigger's creation is the first check_run effect
    story.send("opened")
    fleet.crash_and_restart()
    wait_for(lambda: every_job_done(fleet), timeout=60, what=f"every job done\n{fleet.log()[-4000:]}")

    head = story.pull.head_sha
    checks = [c for c in bot.fake.check_runs.values() if c.head_sha == head and c.name == "beam / review"]
    assert len(checks) == 1, [(c.id, c.status, c.external_id) for c in checks]
    [check] = checks
    assert check.status == "completed" and check.conclusion == "neutral", check.history
    assert check.output is not None and check.output["title"] == "1 finding"
    assert len(story.reviews()) == 1
    assert "1 finding" in story.summary()  # one summary comment (summary() asserts at most one)
