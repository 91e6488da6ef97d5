"""From `pull_request` deliveries to review jobs: a new head gets a queued check run and a job due
after the debounce; `closed` cancels what is queued or running.

Cheap decisions happen here on the payload (disabled, draft, ignored author or label, an event the
repository did not choose, a head already reviewed); the job decides again on fresh data when it runs.
An invalid `.github/beam.yml` queues no check run: the job only says so in the summary (settings.py),
once per head and file.

A delivery's hand-over (a new generation, its check run, the job) survives a crash: the generation
it pushed is kept in the effects journal under the delivery's id, so the delivery's retry finishes
that generation (adopting its check run by `external_id`) instead of taking itself for a redelivery
of a head already queued and stopping with no job scheduled.
"""

from __future__ import annotations

import logging
from typing import Any

from bot.app.effects.crash import NO_CRASH, CrashPoints
from bot.app.effects.journal import Journal
from bot.app.effects.writer import IN_FLIGHT_SECONDS, GitHubEffects
from bot.app.github.api import GitHubError
from bot.app.github.client import GitHubApp, InstallationClient, event_client
from bot.app.github.payloads import PullRequestEvent
from bot.app.jobs.queue import JobQueue
from bot.app.reviews import render
from bot.app.reviews.auto_review_job import KIND, check_key, job_key
from bot.app.reviews.auto_review_run import Target
from bot.app.reviews.publish import finish_check
from bot.app.reviews.scope import is_ignore_label, skip_reason
from bot.app.reviews.settings import load_review_settings
from bot.app.reviews.state import Entry, ReviewState, ReviewStates

log = logging.getLogger("beam.reviews")

LABEL_ACTIONS = frozenset({"labeled", "unlabeled"})
HAND_OVER = "review_hand_over"  # the journal's kind for a delivery's step (not a GitHub write)


def _said(state: ReviewState | None, entry: Entry) -> bool:
    return state is not None and entry in state.entries


class ReviewTrigger:
    def __init__(
        self,
        github: GitHubApp,
        queue: JobQueue,
        states: ReviewStates,
        *,
        enabled_by_default: bool,
        crash: CrashPoints = NO_CRASH,
        in_flight: float = IN_FLIGHT_SECONDS,
    ) -> None:
        self.in_flight = in_flight
        self.github = github
        self.queue = queue
        self.states = states
        self.enabled_by_default = enabled_by_default
        self.crash = crash
        self.journal = Journal(states.store)

    def _writes(self, gh: InstallationClient) -> GitHubEffects:
        """The one path of the GitHub writes a delivery makes (effects/writer.py)."""
        return GitHubEffects(gh, self.journal, self.crash, in_flight=self.in_flight)

    async def on_pull_event(self, event: PullRequestEvent, delivery_id: str | None = None) -> None:
        """opened, reopened, ready_for_review, synchronize, labeled, unlabeled."""
        pull, repo = event.pull_request, event.repository
        if pull.state != "open":
            return
        gh, installation_id = await event_client(self.github, event)
        settings = await load_review_settings(
            gh, repo.full_name, repo.default_branch, self.enabled_by_default
        )
        config = settings.config  # the defaults when the file is invalid
        if not settings.enabled:
            return
        if event.action in LABEL_ACTIONS:
            # Only an ignore label matters: adding one stops what is queued or running, removing the
            # last one reviews the head now.
            if not is_ignore_label(event.label.name if event.label else None, config):
                return
        elif event.action not in config.events:
            return
        head = pull.head.sha
        step = f"delivery:{delivery_id}:auto-review" if delivery_id else None
        begun = await self.journal.lookup(step) if step else None
        if begun is not None and begun.result.get("scheduled"):
            return  # this delivery's retry, after it handed everything over
        state = await self.states.get(repo.full_name, pull.number)
        if state is not None and state.reviewed_head == head:
            log.info("%s#%s: head %s is already reviewed", repo.full_name, pull.number, head[:7])
            return
        redelivery = event.action in ("opened", "synchronize")
        # An earlier attempt of this delivery began the hand-over: finish it, whatever the row says now.
        queued = state is not None and not state.closed and state.target_head == head
        if begun is None and queued and redelivery:
            log.info("%s#%s: %s is already queued (a redelivery)", repo.full_name, pull.number, head[:7])
            return
        if begun is None and settings.invalid and _said(state, settings.invalid_entry(head)):
            return  # the summary already says that this head waits for this file to be fixed
        skipped = skip_reason(pull, config)
        if skipped is not None and event.action not in LABEL_ACTIONS:
            log.info("%s#%s: no automatic review (%s)", repo.full_name, pull.number, skipped)
            return
        # Nothing to coalesce when the file is invalid: no review runs, the summary says so at once.
        debounce = config.debounce_s if event.action == "synchronize" and not settings.invalid else 0
        due = self.states.store.clock() + debounce
        handed = await self._push(step, begun, repo.full_name, pull.number, head, due, state)
        generation, stale = int(handed["generation"]), handed.get("stale")
        if isinstance(stale, int):
            entry = Entry("superseded", str(handed.get("stale_head") or ""))
            await finish_check(self._writes(gh), repo.full_name, stale, entry, quiet=True)
        if skipped is None and not settings.invalid:
            await self._queue_check(gh, repo.full_name, pull.number, generation, head)
        target = Target(
            repo.full_name, pull.number, installation_id, repo.clone_url, repo.default_branch, repo.html_url
        )
        key = job_key(repo.full_name, pull.number)
        # Its installation, so automatic reviews take turns with other installations' jobs (issue 11).
        await self.queue.schedule(KIND, key, target.payload(), due, installation_id=installation_id)
        if step is not None:
            await self.journal.record(step, HAND_OVER, {**handed, "scheduled": True})

    async def _push(
        self,
        step: str | None,
        begun: Any,
        repo: str,
        number: int,
        head: str,
        due: float,
        state: ReviewState | None,
    ) -> dict[str, Any]:
        """A new generation for `head`, once per delivery: a retry gets the one its first attempt made."""
        if begun is not None and begun.state == "done":
            return dict(begun.result)
        if step is not None:
            await self.journal.intend(step, HAND_OVER)
        queued = await self.states.push(repo, number, head, due)
        handed = {
            "generation": queued.generation,
            "stale": queued.stale_check,
            "stale_head": state.target_head if state is not None else None,
        }
        if step is not None:
            await self.journal.record(step, HAND_OVER, handed)
        return handed

    async def _queue_check(
        self, gh: InstallationClient, repo: str, number: int, generation: int, head: str
    ) -> None:
        """The queued `beam / review` check run of this generation, through the journal (issue 8): a
        retry or a redelivery adopts the one an earlier attempt made."""
        effects = self._writes(gh)
        key = check_key(repo, number, generation, head, "check")
        attached = await effects.done(key)  # an earlier attempt made it and handed it to the row
        owner, name = repo.split("/", 1)
        check = await effects.check_run(key, owner, name, head, render.CHECK_NAME)
        if attached is None and not await self.states.set_check(repo, number, generation, head, check.id):
            await finish_check(effects, repo, check.id, Entry("superseded", head), quiet=True)

    async def pull_closed(self, event: PullRequestEvent) -> None:
        """Cancel the pull request's queued and running automatic reviews."""
        repo = event.repository
        if await self.states.get(repo.full_name, event.pull_request.number) is None:
            return
        check_id = await self.states.close(repo.full_name, event.pull_request.number)
        if check_id is not None:
            gh, _ = await event_client(self.github, event)
            entry = Entry("cancelled", event.pull_request.head.sha, note=render.CLOSED)
            try:
                await finish_check(self._writes(gh), repo.full_name, check_id, entry)
            except GitHubError as error:
                log.warning("%s: could not complete check run %s: %s", repo.full_name, check_id, error)
