"""Never silent at the end: a run whose job ended `failed` or `dead` without writing its final state
(the worker died on the last attempt, a lease was lost for the last time) gets its tracking comment
made final here, with the run id and a code (BEM-339 lost, BEM-340 failed, or the one the job
recorded: BEM-380 after a GitHub outage). A run that recorded its final state but could not write it
(GitHub down past its retries) gets that state written, not a failure over a review it did post.
An answer in one of the bot's review threads has no tracking comment: its end is a reply in the thread
it answers, where the question was asked.

Called by the worker pool when a job ends that way, and periodically as a sweep over every such run;
both are safe to repeat (the edit sets the whole body; the comment is created through the effects
journal, so an earlier attempt's comment is adopted, never doubled).
"""

from __future__ import annotations

import json
import logging
import time

from sqlalchemy import select

from bot.app.github.api import GitHubError
from bot.app.github.client import GitHubApp, InstallationClient
from bot.app.jobs.schema import deliveries, jobs, runs
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
        select(runs, jobs.c.state.label("job_state"), deliveries.c.payload.label("delivery"))
        .select_from(
            runs.join(jobs, runs.c.job_id == jobs.c.id).outerjoin(
                deliveries, jobs.c.delivery_id == deliveries.c.delivery_id
            )
        )
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
    question = _thread_question(row)
    thread = question[1] if question is not None else None
    recorded = await effects.journal.lookup(f"{run_id}:final")
    if recorded is not None:  # the run recorded its end; its job gave up writing it (GitHub down)
        body = str(recorded.result.get("body", ""))
        values: dict[str, object] = dict(recorded.result.get("values") or {})
        answered = recorded.result.get("thread")  # a thread answer records the thread it answers
        thread = answered if isinstance(answered, int) else thread
    else:
        code = "BEM-339" if row["job_state"] == "dead" else "BEM-340"
        reason = CATALOG[code].message[0].lower() + CATALOG[code].message[1:].rstrip(".")
        if row["error_code"] in CATALOG and row["error_message"]:  # the job said why (runs/outage.py)
            code, reason = str(row["error_code"]), str(row["error_message"])
        if question is not None:
            body = render.thread_gave_up(question[0], run_id, reason, code)
        else:
            progress = render.Progress(command=f"/beam {row['skill']}", run_id=run_id)
            body = render.failed(progress, reason, code)
        values = {"status": "failed", "error_code": code, "error_message": reason, "finished_at": time.time()}
    if thread is not None and isinstance(row["number"], int):
        # An answer in a review thread has no tracking comment: its end is its reply in the thread, under
        # the key its run writes that reply with (reviews/threads.py), so a reply begun there is adopted.
        await effects.reply(f"{run_id}:answer", owner, name, row["number"], thread, body)
        await deps.store.update_run(run_id, **values)
        log.info("run %s: its job gave up; its review thread now says so (%s)", run_id, values.get("status"))
        return
    key = f"{run_id}:tracking"
    comment_id = row["tracking_comment_id"]
    if isinstance(comment_id, int):
        await effects.edit(key, owner, name, comment_id, body, kind="final")
    elif isinstance(row["number"], int):
        comment_id = (await effects.comment(key, owner, name, row["number"], body)).id
    await deps.store.update_run(run_id, tracking_comment_id=comment_id, **values)
    log.info("run %s: its job gave up; the tracking comment now says so (%s)", run_id, values.get("status"))


def _thread_question(row: dict[str, object]) -> tuple[int, int] | None:
    """For an answer in one of the bot's review threads: the review comment it answers and the
    thread's first comment, from its delivery (as the run job reads them); None for any other run,
    or when the delivery can no longer be read (then a comment on the pull request says it)."""
    if row["skill"] != render.THREAD_SKILL or not isinstance(row["delivery"], str):
        return None
    try:
        comment = json.loads(row["delivery"]).get("comment") or {}
        asked, root = comment.get("id"), comment.get("in_reply_to_id")
    except (ValueError, AttributeError):
        return None
    if isinstance(asked, int) and isinstance(root, int):
        return asked, root
    return None
