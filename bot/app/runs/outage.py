"""A run that GitHub fails only by being down waits for it, instead of failing (issue 23).

GitHub answering 5xx, or not answering at all (a timeout, a refused connection), says nothing about
the run: the same call will work once GitHub is back. So such a failure defers the run (`Reschedule`,
which the worker pool turns into the same job row queued again, its attempt not counted), for up to
`BEAM_GITHUB_OUTAGE_WAIT` counted from the run's first such failure. A brief hiccup costs seconds
(issue 29): the first retry of a write comes as soon as nothing it began can still land (the read-back
time, `in_flight_seconds`: the client's timeout or GitHub's 10 s, plus 2 s), and each next failure of
the same write waits twice as long, capped; a different write that fails starts at the first wait
again, so 502, 500 and 502 on three writes cost three short waits, not a minute and then two.
Sleeping in the worker would hold a worker slot for the whole outage; counting attempts would bury a
job in a 30-minute outage after five tries. Past the wait the run fails with BEM-380.

The wait is kept in the effects journal under `<run id>:outage` (when it began, how many tries), so
every attempt, on any worker, counts from the same moment. A rate limit is not an outage: GitHub
says when to come back, and the run retries then as before (`RetryableError`).

A review that the model finished but GitHub could not take is kept in the journal too
(reviews/drafts.py): the retry posts it from there, without asking the model again.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import anyio

from bot.app.effects.journal import Journal
from bot.app.effects.writer import IN_FLIGHT_SECONDS
from bot.app.github.api import GitHubError
from bot.app.jobs.queue import Job
from bot.app.jobs.signals import PermanentError, Reschedule, RetryableError, seconds_until
from bot.app.runs import render
from bot.app.runs.context import JobContext
from bot.app.runs.deps import RunDeps, run_id_for
from bot.app.runs.tracking_comment import TrackingComment
from bot.app.runs.usage import RunUsage
from bot.beam.errors import CATALOG

log = logging.getLogger("beam.runs")

GAVE_UP_CODE = "BEM-380"
# The first wait is the read-back time (about 12 s), or this share of a short BEAM_GITHUB_OUTAGE_WAIT
# when that is sooner; each next one of the same write twice the last, none longer than CAP_SHARE of
# the wait (7.5 minutes of the default 30), the last try at the wait's end.
FIRST_SHARE = 1 / 30
CAP_SHARE = 1 / 4


def first_wait(wait: float, read_back: float = IN_FLIGHT_SECONDS) -> float:
    """The first retry's delay: once nothing begun can still land, sooner only under a short wait."""
    return min(read_back, wait * FIRST_SHARE)


def outage_delay(tries: int, wait: float, read_back: float = IN_FLIGHT_SECONDS) -> float:
    """Seconds before the next try of a write, after `tries` failed ones of it (1 = the first)."""
    return float(min(first_wait(wait, read_back) * 2 ** (tries - 1), wait * CAP_SHARE))


def write_of(error: GitHubError) -> str:
    """Which call failed, so that its own failures double the wait and another's do not."""
    return f"{error.method} {error.path}"


def github_down(error: GitHubError) -> bool:
    """GitHub failed by being down or slow (5xx, or no answer), not by refusing the call or by a rate
    limit: the same call can succeed later, and GitHub did not say when."""
    return (error.status >= 500 or error.status == 0) and not error.rate_limited


@dataclass(frozen=True, slots=True)
class OutageWait:
    """How long one run has waited for GitHub, in the journal; `next_try` counts one more failure."""

    journal: Journal
    run_id: str
    wait: float
    read_back: float = IN_FLIGHT_SECONDS  # RunDeps.in_flight: how long a write may still land

    @property
    def key(self) -> str:
        return f"{self.run_id}:outage"

    async def next_try(self, write: str = "") -> float | None:
        """When to try again (epoch seconds) after one more failure of `write` (`write_of`), or None
        once the run has waited `wait` seconds since its first failure (then it fails: BEM-380)."""
        entry = await self.journal.lookup(self.key)
        now = self.journal.store.clock()
        result = entry.result if entry is not None else {}
        since = float(result.get("since", now))
        tries = int(result.get("tries", 0)) + 1
        by_write = {str(k): int(v) for k, v in dict(result.get("by_write") or {}).items()}
        by_write[write] = by_write.get(write, 0) + 1
        if now - since >= self.wait:
            log.warning("run %s: GitHub has failed it for %.0f s; it stops waiting", self.run_id, now - since)
            return None
        delay = outage_delay(by_write[write], self.wait, self.read_back)
        at = min(now + delay, since + self.wait)
        await self.journal.note(self.key, "outage", {"since": since, "tries": tries, "by_write": by_write})
        log.info("run %s: GitHub is down (try %d); trying again in %.0f s", self.run_id, tries, at - now)
        return at


def gave_up_reason(wait: float) -> str:
    """The failure comment's reason past the wait, from the catalogue's words for BEM-380."""
    entry = CATALOG[GAVE_UP_CODE]
    detail = f"it failed with a 5xx or no answer for {_span(wait)}"
    return render.beam_failure(entry.message, detail, entry.hint)


def waiting(progress: render.Progress, error: GitHubError, at: float) -> str:
    """The tracking comment while the run waits for GitHub: why, and until when at the latest."""
    answered = f"answered {error.status}" if error.status else "did not answer"
    when = datetime.fromtimestamp(at, UTC).strftime("%H:%M:%S UTC")
    return (
        f"⏳ `{progress.command}` is waiting for GitHub, which {answered}; retrying at {when}, "
        f"run `{progress.run_id[:8]}`. Nothing is lost: the run goes on where it stopped.\n\n"
        f"{render.MARKER.format(run_id=progress.run_id)}"
    )


async def run_job_waits(deps: RunDeps, job: Job, error: GitHubError) -> Exception | None:
    """A run job's GitHub failure outside the run's own steps (its token, its config, its tracking
    comment before the run starts): GitHub down, the job waits as the run does (`Reschedule`); past
    the wait it fails, its run row saying BEM-380 for the sweep to write. None: not an outage."""
    if not github_down(error):
        return None
    run_id = run_id_for(job)
    at = await OutageWait(Journal(deps.store), run_id, deps.outage_wait, deps.in_flight).next_try(
        write_of(error)
    )
    if at is not None:
        return Reschedule(at)
    reason = gave_up_reason(deps.outage_wait)
    await deps.store.update_run(run_id, error_code=GAVE_UP_CODE, error_message=reason)
    return PermanentError(f"{GAVE_UP_CODE}: {error}")


class GitHubWaits:
    """How one run meets a GitHub failure (`SkillRun`'s): it waits, retries or fails, and says so on
    its tracking comment."""

    def __init__(
        self,
        deps: RunDeps,
        ctx: JobContext,
        tracking: TrackingComment,
        progress: render.Progress,
        usage: RunUsage,
    ) -> None:
        self.deps = deps
        self.ctx = ctx
        self.tracking = tracking
        self.progress = progress
        self.usage = usage
        self.run_id = tracking.run_id

    async def failure(self, error: GitHubError) -> tuple[str, str | None]:
        """GitHub down: the run waits (raises `Reschedule`) until the wait is over (its failure, BEM-380).
        A rate limit or another transient answer: a retry, as the job's attempts allow
        (`RetryableError`). Anything else is the run's failure: its reason and code, returned."""
        job = self.ctx.job
        if github_down(error):
            at = await self.outage().next_try(write_of(error))
            if at is None:
                return gave_up_reason(self.deps.outage_wait), GAVE_UP_CODE
            await self.tracking.safe_publish(waiting(self.progress, error, at))  # GitHub may refuse it too
            await self._not_now(error)
            raise Reschedule(at) from error
        if error.transient and job.attempts < job.max_attempts:
            trouble = render.github_trouble(error.status)
            await self.tracking.safe_publish(
                render.retrying(self.progress, trouble, job.attempts, job.max_attempts)
            )
            await self._not_now(error)
            raise RetryableError(str(error), retry_after=seconds_until(error.retry_at)) from error
        return render.github_refused(error.status, error.message), None

    async def write_final(self, body: str, values: dict[str, Any]) -> None:
        """Write the recorded final state on the tracking comment, and with GitHub down wait for it as for
        any step, in the same wait: a review posted after an outage is not buried by the edit that
        says so. Past the wait, and on a rate limit, the job's retries write it (`RetryableError`)."""
        with anyio.CancelScope(shield=True):
            try:
                await self.tracking.publish(body, kind="final")
            except GitHubError as error:
                if not error.transient:  # refused for good (the comment is gone): a retry cannot mend it
                    log.warning("run %s: could not write its final state: %s", self.run_id, error)
                else:
                    at = await self.outage().next_try(write_of(error)) if github_down(error) else None
                    if at is not None:
                        raise Reschedule(at) from error
                    raise RetryableError(
                        f"run {self.run_id}: the final state could not be written yet"
                    ) from error
        await self.deps.store.update_run(self.run_id, **values)

    def outage(self) -> OutageWait:
        journal = self.tracking.effects.journal
        return OutageWait(journal, self.run_id, self.deps.outage_wait, self.deps.in_flight)

    async def _not_now(self, error: GitHubError) -> None:
        """The run is queued again: its row says why, and what it used so far is counted."""
        await self.deps.store.update_run(self.run_id, status="queued", error_message=str(error))
        await self.usage.record()


def _span(seconds: float) -> str:
    return f"{seconds / 60:g} min" if seconds >= 60 else f"{seconds:g} s"
