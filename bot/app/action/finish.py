"""`beam-bot action --finish`: the job's `if: always()` step, which makes final what a cancelled or
timed-out `beam-bot action` left working.

A cancelled job's step gets SIGINT, then SIGTERM, then SIGKILL; whatever the step was doing, its
tracking comment may still say "⏳ Working on …" for ever. The step after it runs anyway
(`if: always()`), in the same job, with the same RUNNER_TEMP: the killed run's SQLite database is
still there (run.py names its directory after the workflow run and attempt). What is open in it is
what this run left: its jobs are marked dead with why (how the job ended, `job.status`, and the
workflow run's link), and the App's own sweep does the rest (runs/sweep.py for a command's tracking
comment, reviews/abandoned.py for an automatic review's check run and summary line). So the comment
is found by the id the run recorded, or by the effect marker of its key (only a run this database
knows), never by reading words in comments; and a run that had recorded its final state gets that
state written, not "cancelled".
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

import httpx
from sqlalchemy import select, update

from bot.app.action import render
from bot.app.action.environment import ActionEnvironment, read_environment
from bot.app.action.outcome import CANCELLED, FAILURE, write_outputs, write_summary
from bot.app.action.run import action_handler, action_settings, run_link, work_dir_prefix
from bot.app.approvals.flow import WATCH
from bot.app.github.api import GitHubError
from bot.app.jobs.schema import jobs, runs
from bot.app.jobs.store import Store, build_url
from bot.app.logs import configure_logging
from bot.app.runs.sweep import finish_abandoned_runs
from bot.app.settings import Settings, SettingsError
from bot.beam.errors import BeamError

OPEN_STATES = ("queued", "running")
JOB_STATUS = "BEAM_JOB_STATUS"  # action.yml passes `job.status` here: success, failure or cancelled


def left_behind(environment: ActionEnvironment) -> list[Path]:
    """The databases of this run attempt's `beam-bot action` steps, oldest first."""
    parent = environment.temp_dir
    if parent is None or not parent.is_dir():
        return []
    found = [p for p in parent.glob(f"{work_dir_prefix(environment)}*") if (p / "beam.db").is_file()]
    return sorted(found, key=lambda p: p.stat().st_mtime)


async def finish_action(env: Mapping[str, str], out: TextIO, err: TextIO) -> int:
    """0 when nothing is left working (or all of it was made final), 1 when some of it could not be
    (GitHub refused or was down: the line says so), 2 on bad set-up."""
    try:
        environment = read_environment(env)
    except BeamError as error:
        err.write(f"{render.PREFIX}{render.one_line(error)}\n")
        return 2
    status = (env.get(JOB_STATUS) or "").strip().lower()
    link = run_link(environment)
    dirs = left_behind(environment)
    if not dirs:
        out.write(f"{render.PREFIX}nothing to finish: no run of this job was started\n")
        return 0
    left = finished = 0
    try:
        for work_dir in dirs:
            settings = action_settings(environment, work_dir)
            if work_dir == dirs[0]:
                configure_logging(settings.log_level, settings.log_format, stream=err)
            done, still = await _finish_one(environment, settings, work_dir, render.job_ended(status, link))
            finished, left = finished + done, left + still
    except SettingsError as error:
        err.write(f"{render.PREFIX}{error}\n")
        return 2
    except (GitHubError, httpx.HTTPError, OSError) as error:
        err.write(f"{render.PREFIX}{render.github_unreachable(str(error) or type(error).__name__)}\n")
        return 1
    if finished:
        write_outputs(env, {"outcome": CANCELLED if status == "cancelled" else FAILURE})
        write_summary(env, render.finish_summary(finished, status, link))
    if left:
        err.write(f"{render.PREFIX}{render.finish_incomplete(finished, left)}\n")
        return 1
    out.write(f"{render.PREFIX}{render.finish_done(finished)}\n")
    return 0


async def _finish_one(
    environment: ActionEnvironment, settings: Settings, work_dir: Path, why: str
) -> tuple[int, int]:
    """(made final, still open) for one left-behind database."""
    store = await Store.open(build_url(None, work_dir))
    try:
        async with store.write() as conn:
            # Not the approval poller's later looks: a held push waits for its `/beam approve` run.
            stopped = jobs.c.state.in_(OPEN_STATES) & (jobs.c.kind != WATCH)
            open_jobs = select(jobs.c.id).where(stopped)
            # The run's own reason, shown by the sweep in place of "the job was given up".
            await conn.execute(
                update(runs)
                .where(runs.c.status.in_(OPEN_STATES), runs.c.job_id.in_(open_jobs))
                .values(error_code=render.JOB_ENDED, error_message=why)
            )
            await conn.execute(
                update(jobs)
                .where(stopped)
                .values(state="dead", last_error=f"{render.JOB_ENDED}: {why}", lease_owner=None)
            )
        async with action_handler(environment, settings, store) as handler:
            done = await finish_abandoned_runs(handler.deps, handler.github)
            done += await handler.reviews.finish()
        async with store.read() as conn:
            still = await conn.execute(
                select(runs.c.id).where(
                    runs.c.status.in_(OPEN_STATES),
                    runs.c.job_id.in_(select(jobs.c.id).where(jobs.c.state == "dead")),
                )
            )
            return done, len(still.all())
    finally:
        await store.close()
