"""A bot process stopped (SIGSTOP) past its job's lease, then continued (SIGCONT): the write fence
(bot/app/fence.py) keeps it from writing for a job another process finished meanwhile, and lets it
go on when nobody took the job.

The process stops itself at the boundary where a retry is most exposed: the tracking comment's intent
is recorded and the call is not made (`comment:before:pause`, bot/app/effects/crash.py). On PostgreSQL
another process claims the job once the lease is over, finds no comment on GitHub, posts it and
finishes the review; the stopped one, continued, would post a second one without the fence. On
SQLite `serve` runs alone: continued, it finds its job still its own, renews the lease and finishes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.app.jobs.schema import jobs
from tests.e2e.crash_support import BOT, NUMBER, REPO, bot_comments, seed_review_pull, send
from tests.e2e.test_crash_effects import script_review
from tests.support.bot_process import bot_stack, wait_for
from tests.support.db import pg_database_url_fixture  # noqa: F401 - the fixture, by its name
from tests.support.fleet import Fleet, fleet_on

LEASE = 2.0


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def fleet(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Fleet]:
    with bot_stack(
        tmp_path,
        BEAM_CONCURRENCY="1",
        BEAM_LEASE_SECONDS=str(LEASE),
        BEAM_TEST_PAUSE_ONCE=str(tmp_path / "paused-once"),
    ) as bot:
        bot.llm.fallback_text = "Reviewed: `src/calc.py:2` now adds."
        seed_review_pull(bot)
        with fleet_on(request, bot) as fleet:
            try:
                yield fleet
            finally:
                continue_all(fleet)  # a stopped process would hold up the fleet's teardown


def stopped(proc: subprocess.Popen[bytes]) -> bool:
    try:
        stat = Path(f"/proc/{proc.pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] == "T"


def continue_all(fleet: Fleet) -> None:
    for proc in fleet.all_procs():
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGCONT)


def lease_expired(fleet: Fleet) -> bool:
    """Every running job's lease is over by the database's clock (the stopped process's included)."""
    running = [row for row in fleet.rows(jobs) if row["state"] == "running"]
    return all(row["lease_expires_at"] < time.time() for row in running)


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process states from /proc")
def test_a_process_stopped_past_its_lease_writes_nothing_for_a_job_it_lost(fleet: Fleet) -> None:
    bot = fleet.bot
    script_review(bot)
    fleet.start("comment:before:pause")
    command_id = send(bot, "/beam review")

    paused = wait_for(
        lambda: next((p for p in fleet.all_procs() if stopped(p)), None),
        timeout=30,
        what=f"a process to stop at its pause point\n{fleet.log()[-3000:]}",
    )
    if fleet.database_url is not None:
        # Another process takes the job over once the lease is over, and finishes the review.
        wait_for(fleet.jobs_done, timeout=60, what=f"another process to finish\n{fleet.log()[-4000:]}")
        assert stopped(paused)  # all of it happened while the first one stood still
    else:
        wait_for(lambda: lease_expired(fleet), timeout=LEASE * 5, what="the stopped job's lease to end")
    os.kill(paused.pid, signal.SIGCONT)

    if fleet.database_url is not None:
        # The continued process's attempt ends as a lost lease (with the fence, at its next write).
        wait_for(
            lambda: "lease lost, another worker owns it now" in fleet.log(),
            timeout=30,
            what=f"the continued process to end its attempt\n{fleet.log()[-4000:]}",
        )
    wait_for(fleet.jobs_done, timeout=60, what=f"every job done\n{fleet.log()[-4000:]}")

    comments = bot_comments(bot)
    assert len(comments) == 1, [c.body for c in comments]  # one tracking comment, never a second
    final = comments[0].body
    assert "Working on" not in final and "Posted a review" in final  # and not overwritten since
    assert len(bot.fake.reviews_on(REPO, NUMBER)) == 1
    eyes = [r for r in bot.fake.reactions_on(command_id) if r.user == BOT and r.content == "eyes"]
    assert len(eyes) == 1
    runs = fleet.run_rows()
    assert [r["status"] for r in runs] == ["succeeded"]
    assert runs[0]["tracking_comment_id"] == comments[0].id
    # It went on from the very point where its comment was to be made (the fence, or the heartbeat
    # that runs beside it once the process is continued, finds the lease lost first: no write either way).
    assert "test pause point comment:before: continued" in fleet.log()
    run_jobs = [row for row in fleet.rows(jobs) if row["kind"] == "run"]
    # SQLite: the continued process kept its job (one attempt); PostgreSQL: the job was taken over.
    assert [row["attempts"] for row in run_jobs] == [1 if fleet.database_url is None else 2]
