"""Issue 10 with issue 8's crash tests: kill every bot process around the `beam / review` check run of
an automatic review (its creation by the trigger before, during and after GitHub made it; the job's
update to in progress and to completed, during), start them again, and find exactly one check run on
the head, completed and neutral, beside one review and one summary comment. Killed on every attempt,
the review still ends with one check run, completed and neutral: "The review failed"."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from bot.app.jobs.schema import DEFAULT_MAX_ATTEMPTS as MAX_ATTEMPTS
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


def test_a_review_killed_on_its_last_attempt_ends_with_a_failed_check_run_and_summary_line(
    fleet: Fleet,
) -> None:
    """Every attempt dies once its check run is in progress; after the last one the job is buried at
    a claim, and the sweep completes the check run, says so in the summary and fails the run row."""
    bot = fleet.bot
    bot.extra_env["BEAM_SWEEP_INTERVAL"] = "0.5"
    story = Story(bot)
    kills: list[Call] = []

    def kill_each_start(call: Call) -> None:
        if len(kills) < MAX_ATTEMPTS and 200 <= call.status < 300 and CALLS["start"](call):
            fleet.kill_all()
            kills.append(call)  # only now: the test starts the fleet again once every process is dead

    bot.fake.on_answered.append(kill_each_start)
    fleet.start(None)
    story.send("opened")
    for attempt in range(1, MAX_ATTEMPTS + 1):
        wait_for(
            lambda n=attempt: len(kills) >= n,
            timeout=60,
            what=f"attempt {attempt} killed\n{fleet.log()[-3000:]}",
        )
        fleet.start(None)

    head = story.pull.head_sha

    def ended() -> bool:
        runs = [r for r in fleet.run_rows() if r["skill"] == "auto_review"]
        return (
            bool(runs)
            and all(r["status"] == "failed" for r in runs)
            and "the review failed" in story.summary()
        )

    wait_for(ended, timeout=60, what=f"the review's end shown\n{fleet.log()[-4000:]}")
    checks = [c for c in bot.fake.check_runs.values() if c.head_sha == head and c.name == "beam / review"]
    assert len(checks) == 1, [(c.id, c.status, c.external_id) for c in checks]
    [check] = checks
    assert check.status == "completed" and check.conclusion == "neutral", check.history
    assert check.output is not None and check.output["title"] == "The review failed"
    assert "the review failed (BEM-339: the job was given up" in story.summary()
    assert [r["error_code"] for r in fleet.run_rows() if r["skill"] == "auto_review"] == ["BEM-339"]
    assert [r["state"] for r in fleet.rows(jobs) if r["kind"] == "auto_review"] == ["dead"]
    assert story.reviews() == []
