"""Never silent at the end: a run whose job ended `failed` or `dead` without writing its final state
(the worker died on the last attempt, a lease was lost for the last time) gets its tracking comment
made final here, with the run id and a code (BEM-339 lost, BEM-340 failed, or the one the job
recorded: BEM-380 after a GitHub outage). A run that recorded its final state but could not write it
(GitHub down past its retries) gets that state written, not a failure over a review it did post.

Called by the worker pool when a job ends that way, and periodically as a sweep over every such run;
both are safe to repeat (the edit sets the whole body; the comment is created through the effects
journal, so an earlier attempt's comment is adopted, never doubled).
"""

from __future__ import annotations

import logging
import time

from sqlalchemy import select

from bot.app.github.api import GitHubError
from bot.app.github.client import GitHubApp, InstallationClient
from bot.app.jobs.schema import jobs, runs
from bot.app.jobs.signals import Reschedule
from bot.app.runs import render
from bot.app.runs.run import RunDeps
from bot.beam.errors import CATALOG

log = logging.getLogger("beam.runs")

OPEN_RUN_STATUSES = ("queued", "running")
GAVE_UP_JOB_STATES = ("failed", "dead")


async def finish_abandoned_runs(deps: RunDeps, github: GitHubApp, job_id: int | None = None) -> int:
    """Make final the tracking comment of every open run whose job gave up; return how many."""
    query = (
        select(runs, jobs.c.state.label("job_state"))
        .select_from(runs.join(jobs, runs.c.job_id == jobs.c.id))
        .where(runs.c.status.in_(OPEN_RUN_STATUSES), jobs.c.state.in_(GAVE_UP_JOB_STATES))
    )
    if job_id is not None:
        query = query.where(jobs.c.id == job_id)
    async with deps.store.read() as conn:
        rows = [dict(r._mapping) for r in await conn.execute(query)]
    finished = 0
    for row in rows:
        try:
            await _finish(deps, github, row)
            finished += 1
        except (GitHubError, Reschedule) as error:
            # Reschedule: a write of an attempt that died may still land; the next sweep looks again.
            log.warning("run %s: could not make its tracking comment final yet: %s", row["id"], error)
    return finished


async def _finish(deps: RunDeps, github: GitHubApp, row: dict[str, object]) -> None:
    run_id, repo = str(row["id"]), str(row["repo"])
    owner, name = repo.split("/", 1)
    installation = await github.installation_for_repo(owner, name)
    effects = deps.effects(InstallationClient(github, installation.id))
    recorded = await effects.journal.lookup(f"{run_id}:final")
    if recorded is not None:  # the run recorded its end; its job gave up writing it (GitHub down)
        body = str(recorded.result.get("body", ""))
        values: dict[str, object] = dict(recorded.result.get("values") or {})
    else:
        code = "BEM-339" if row["job_state"] == "dead" else "BEM-340"
        reason = CATALOG[code].message[0].lower() + CATALOG[code].message[1:].rstrip(".")
        if row["error_code"] in CATALOG and row["error_message"]:  # the job said why (runs/outage.py)
            code, reason = str(row["error_code"]), str(row["error_message"])
        body = render.failed(render.Progress(command=f"/beam {row['skill']}", run_id=run_id), reason, code)
        values = {"status": "failed", "error_code": code, "error_message": reason, "finished_at": time.time()}
    key = f"{run_id}:tracking"
    comment_id = row["tracking_comment_id"]
    if isinstance(comment_id, int):
        await effects.edit(key, owner, name, comment_id, body, kind="final")
    elif isinstance(row["number"], int):
        comment_id = (await effects.comment(key, owner, name, row["number"], body)).id
    await deps.store.update_run(run_id, tracking_comment_id=comment_id, **values)
    log.info("run %s: its job gave up; the tracking comment now says so (%s)", run_id, values.get("status"))
