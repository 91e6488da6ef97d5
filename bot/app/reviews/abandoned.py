"""Never half-done: an automatic review whose job was given up gets its check run, summary line and
run row ended here.

A review job that ends `failed` or `dead` may leave the `beam / review` check run of the head it was
at queued or in progress (GitHub keeps it so for ever: only we can complete it) and that head's run
row `running`: its worker died on the last attempt (the claim that finds it buries it, and no hook
hears of that), or the job died before its own error handling ran. Here the check run is completed,
neutral as always, titled "The review failed" (or superseded / cancelled when the pull request moved
on or was closed meanwhile); the summary comment gets the head's failed line (the state's merge rules
apply, and a head whose range was already dealt with keeps its line); the run row becomes `failed`.

Which head: each attempt notes its generation and head in the journal (auto_review_job.py `attempt_key`). A
job that died before noting one is taken to be at the pull request's newest generation, unless a
later review job of the pull request was queued (only a newer push queues one): that one has it.

Called by the worker pool when a job ends that way (assembly's `gave_up`) and by the periodic sweep
over every such job, which also covers a buried job and a crash during the hook. Exactly once: the
job's end is marked in the journal (`gave_up_key`) after it was shown, and every step before that is
safe to repeat (a completed check run is left alone; the summary does not take the same line twice;
the run row moves only from queued or running). SQLite may give a pruned job's id to a new job, so a
journal row counts for a job only when it is younger than the job.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, Text, cast, delete, exists, literal, select, update

from bot.app.effects.journal import Journal
from bot.app.github.api import GitHubError
from bot.app.github.client import GitHubApp, InstallationClient
from bot.app.jobs.queue import LOST_ON_LAST_ATTEMPT
from bot.app.jobs.schema import effects, jobs
from bot.app.jobs.signals import Reschedule
from bot.app.reviews import render
from bot.app.reviews.admission import end_abandoned
from bot.app.reviews.auto_review_job import KIND, attempt_key, held_check
from bot.app.reviews.auto_review_run import Target
from bot.app.reviews.publish import finish_check, publish_summary
from bot.app.reviews.state import Entry, ReviewState, ReviewStates
from bot.app.runs.run import RunDeps
from bot.beam.errors import CATALOG

log = logging.getLogger("beam.reviews")

GAVE_UP_JOB_STATES = ("failed", "dead")
GAVE_UP = "review_gave_up"  # the journal's kind for "this job's end was shown"
# The worker that buried a job and the periodic sweep (often in two processes) may both set out to
# show its end at once: both then found no summary comment and each posted one. The first to claim
# the job shows it; a claim older than this is a dead shower's, and the sweep takes it over.
SHOWING = "review_gave_up_showing"
CLAIM_SECONDS = 60.0


def _showing_key(job_id: int) -> str:
    return f"job:{job_id}:review-gave-up-showing"


def gave_up_key(job_id: int) -> str:
    return f"job:{job_id}:review-gave-up"


def _gave_up_key_of_row() -> ColumnElement[str]:
    """`gave_up_key(jobs.id)` in SQL, so the sweep reads only the jobs not seen to yet."""
    return literal("job:", Text) + cast(jobs.c.id, Text) + literal(":review-gave-up", Text)


@dataclass(frozen=True, slots=True)
class GaveUpJob:
    id: int
    key: str | None
    payload: dict[str, Any] | None
    state: str
    last_error: str
    created_at: float

    @property
    def code(self) -> str:
        """BEM-339 when its worker was lost on the last attempt, the code the job's error starts with
        when it is catalogued (BEM-380: it waited for GitHub as long as it may, auto_review_job.py; BEM-395:
        the Action's job was cancelled, action/finish.py), BEM-340 for any other end."""
        if self.last_error.startswith(LOST_ON_LAST_ATTEMPT):
            return "BEM-339"
        named = self.last_error.split(":", 1)[0].strip()
        return named if named in CATALOG else "BEM-340"


@dataclass(frozen=True, slots=True)
class _At:
    """The generation and head a job was at, and the pull request's base then (when noted)."""

    generation: int
    head: str
    base: str | None


class _NotYet(Exception):
    """What the job's end needs is not known yet (the App's login); the next sweep tries again."""


class AbandonedReviews:
    def __init__(self, github: GitHubApp, deps: RunDeps, states: ReviewStates) -> None:
        self.github = github
        self.deps = deps
        self.states = states
        self.journal = Journal(states.store)

    async def finish(self, job_id: int | None = None) -> int:
        """Show the end of every review job that gave up and was not seen to (or of `job_id`'s only);
        return how many were. One that fails now (GitHub down) is left to the next sweep."""
        seen = exists().where(
            effects.c.key == _gave_up_key_of_row(), effects.c.created_at >= jobs.c.created_at
        )
        query = select(
            jobs.c.id, jobs.c.key, jobs.c.payload, jobs.c.state, jobs.c.last_error, jobs.c.created_at
        ).where(jobs.c.kind == KIND, jobs.c.state.in_(GAVE_UP_JOB_STATES), ~seen)
        if job_id is not None:
            query = query.where(jobs.c.id == job_id)
        async with self.states.store.read() as conn:
            found = [
                GaveUpJob(r.id, r.key, r.payload, r.state, r.last_error or "", float(r.created_at))
                for r in await conn.execute(query.order_by(jobs.c.id))
            ]
        finished = 0
        for job in found:
            if not await self._claim(job):
                continue  # another process is showing it right now
            shown = await self.journal.lookup(gave_up_key(job.id))
            if shown is not None and shown.created_at >= job.created_at:
                continue  # it was, by the process that held the claim before this one
            try:
                await self._finish(job)
                finished += 1
            except (GitHubError, _NotYet, Reschedule) as error:
                log.warning("review job %s gave up; its end cannot be shown yet: %s", job.id, error)
                await self._release(job)
            except Exception:  # one job's surprise must not keep the others' ends hidden
                log.exception("review job %s gave up; showing its end failed", job.id)
                await self._release(job)
        return finished

    async def _release(self, job: GaveUpJob) -> None:
        """The next sweep may try at once: showing failed, and nobody is at it."""
        async with self.states.store.write() as conn:
            await conn.execute(delete(effects).where(effects.c.key == _showing_key(job.id)))

    async def _claim(self, job: GaveUpJob) -> bool:
        """True for the one caller that may show `job`'s end now (see SHOWING)."""
        store = self.states.store
        key, now = _showing_key(job.id), store.clock()
        row = {"key": key, "kind": SHOWING, "state": "intent", "created_at": now, "updated_at": now}
        async with store.write() as conn:
            if (await conn.execute(store.insert_ignore(effects).values(row))).rowcount == 1:
                return True
            stale = (effects.c.updated_at < now - CLAIM_SECONDS) | (effects.c.created_at < job.created_at)
            taken = await conn.execute(
                update(effects).where(effects.c.key == key, stale).values(created_at=now, updated_at=now)
            )
            return bool(taken.rowcount == 1)

    async def _finish(self, job: GaveUpJob) -> None:
        if job.payload is not None:
            target = Target.of(job.payload)
            state = await self.states.get(target.repo, target.number)
            at = await self._where(job, state)
            if at is not None:
                try:
                    if state is not None:
                        await self._show(job, target, state, at)
                except GitHubError as error:
                    if error.transient:
                        raise
                    # The repository or the App's access is gone: nothing more can be shown there.
                    log.warning(
                        "review job %s: its check run and summary stay as they are: %s", job.id, error
                    )
                await end_abandoned(self.states.store, target.repo, target.number, at.head, job.code)
        await self.journal.note(gave_up_key(job.id), GAVE_UP, {"state": job.state, "code": job.code})
        log.info(
            "review job %s ended %s; its check run, summary and run say so (%s)", job.id, job.state, job.code
        )

    async def _where(self, job: GaveUpJob, state: ReviewState | None) -> _At | None:
        """Where the job was; None when it never got to a head, or when a later review job of the pull
        request has that generation (its check run and its run are that job's)."""
        later = await self._later_job(job)
        noted = await self.journal.lookup(attempt_key(job.id))
        if noted is not None and noted.created_at >= job.created_at:
            base = noted.result.get("base")
            at = _At(int(noted.result["generation"]), str(noted.result["head"]), str(base) if base else None)
            return None if later and state is not None and state.generation == at.generation else at
        # Not noted (it died before it read the pull request): the newest generation is the job's
        # unless a later job was queued, which only a newer push does.
        if later or state is None or state.target_head is None:
            return None
        return _At(state.generation, state.target_head, None)

    async def _later_job(self, job: GaveUpJob) -> bool:
        after = (jobs.c.created_at > job.created_at) | (
            (jobs.c.created_at == job.created_at) & (jobs.c.id > job.id)
        )
        query = select(jobs.c.id).where(
            jobs.c.kind == KIND, jobs.c.key == job.key, jobs.c.id != job.id, after
        )
        async with self.states.store.read() as conn:
            return (await conn.execute(query.limit(1))).first() is not None

    async def _show(self, job: GaveUpJob, target: Target, state: ReviewState, at: _At) -> None:
        generation, head = at.generation, at.head
        moved = state.generation != generation
        repo, number = target.repo, target.number
        current = not moved and not state.closed
        gh = InstallationClient(self.github, target.installation_id)
        check_id = await self.states.take_check(repo, number, head) if current else None
        if check_id is None:
            held = await held_check(gh, target, generation, head)
            check_id = held.id if held is not None and held.status != "completed" else None
        if state.closed:
            entry = Entry("cancelled", head, note=render.CLOSED)
        elif moved:
            entry = Entry("superseded", head)
        else:
            # Its range as the review would have named it: since the last reviewed head, or the base.
            since = state.reviewed_head or at.base
            entry = Entry("failed", head, since, state.reviewed_head is None, note=render.gave_up(job.code))
            said = [e for e in state.entries if e.head == head]
            if state.reviewed_head == head and said:
                entry = said[-1]  # the range was dealt with before the job died: its line stands
            else:
                state, _ = await self.states.record(repo, number, entry)
            await publish_summary(self.deps.effects(gh), self.states, state, await self._login())
        await finish_check(self.deps.effects(gh), repo, check_id, entry)

    async def _login(self) -> str:
        login = await self.deps.identity.login()
        if login is None:
            raise _NotYet("the App's login is unknown for now")
        return login
