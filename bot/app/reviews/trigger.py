"""From `pull_request` deliveries to review jobs: a new head gets a queued check run and a job due
after the debounce; `closed` cancels what is queued or running.

Cheap decisions happen here on the payload (disabled, draft, ignored author or label, an event the
repository did not choose, a head already reviewed); the job decides again on fresh data when it runs.
"""

from __future__ import annotations

import logging

from bot.app.effects.journal import Journal
from bot.app.effects.writer import GitHubEffects
from bot.app.github.api import GitHubError
from bot.app.github.client import GitHubApp, event_client
from bot.app.github.payloads import PullRequestEvent
from bot.app.jobs.queue import JobQueue
from bot.app.repo_config import load_repo_config
from bot.app.reviews import render
from bot.app.reviews.agent import Target
from bot.app.reviews.publish import finish_check
from bot.app.reviews.review import KIND, check_key, job_key
from bot.app.reviews.scope import is_ignore_label, skip_reason
from bot.app.reviews.state import Entry, ReviewStates

log = logging.getLogger("beam.reviews")

LABEL_ACTIONS = frozenset({"labeled", "unlabeled"})


class ReviewTrigger:
    def __init__(
        self, github: GitHubApp, queue: JobQueue, states: ReviewStates, *, enabled_by_default: bool
    ) -> None:
        self.github = github
        self.queue = queue
        self.states = states
        self.enabled_by_default = enabled_by_default

    async def on_pull_event(self, event: PullRequestEvent) -> None:
        """opened, reopened, ready_for_review, synchronize, labeled, unlabeled."""
        pull, repo = event.pull_request, event.repository
        if pull.state != "open":
            return
        gh, installation_id = await event_client(self.github, event)
        config = (
            await load_repo_config(gh.get_file, repo.owner.login, repo.name, repo.default_branch)
        ).config
        settings = config.auto_review
        if not settings.is_enabled(self.enabled_by_default):
            return
        if event.action in LABEL_ACTIONS:
            # Only an ignore label matters: adding one stops what is queued or running, removing the
            # last one reviews the head now.
            if not is_ignore_label(event.label.name if event.label else None, settings):
                return
        elif event.action not in settings.events:
            return
        head = pull.head.sha
        state = await self.states.get(repo.full_name, pull.number)
        if state is not None and state.reviewed_head == head:
            log.info("%s#%s: head %s is already reviewed", repo.full_name, pull.number, head[:7])
            return
        redelivery = event.action in ("opened", "synchronize")
        if state is not None and not state.closed and state.target_head == head and redelivery:
            log.info("%s#%s: head %s is already queued (a redelivery)", repo.full_name, pull.number, head[:7])
            return
        skipped = skip_reason(pull, settings)
        if skipped is not None and event.action not in LABEL_ACTIONS:
            log.info("%s#%s: no automatic review (%s)", repo.full_name, pull.number, skipped)
            return
        debounce = settings.debounce_s if event.action == "synchronize" else 0
        due = self.states.store.clock() + debounce
        queued = await self.states.push(repo.full_name, pull.number, head, due)
        if queued.stale_check is not None:
            stale = Entry("superseded", state.target_head or "" if state else "")
            await finish_check(gh, repo.full_name, queued.stale_check, stale, quiet=True)
        if skipped is None:
            # Through the journal (issue 8): a redelivery adopts the check run an earlier one made.
            effects = GitHubEffects(gh, Journal(self.states.store))
            key = check_key(repo.full_name, pull.number, queued.generation, head, "check")
            check = await effects.check_run(key, repo.owner.login, repo.name, head, render.CHECK_NAME)
            if not await self.states.set_check(
                repo.full_name, pull.number, queued.generation, head, check.id
            ):
                await finish_check(gh, repo.full_name, check.id, Entry("superseded", head), quiet=True)
        target = Target(
            repo.full_name, pull.number, installation_id, repo.clone_url, repo.default_branch, repo.html_url
        )
        key = job_key(repo.full_name, pull.number)
        # Its installation, so automatic reviews take turns with other installations' jobs (issue 11).
        await self.queue.schedule(KIND, key, target.payload(), due, installation_id=installation_id)

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
                await finish_check(gh, repo.full_name, check_id, entry)
            except GitHubError as error:
                log.warning("%s: could not complete check run %s: %s", repo.full_name, check_id, error)
