"""`JobContext`: one command job as every handler sees it, built once by the webhook layer.

It is frozen and whole before any handler runs: the job, the comment event and its command, the
installation and its client, and the repository config the command runs under. A skill run,
`/beam author`, `/beam approve` and `/beam reject` each take it as it is, and so does an answer in one
of the bot's review threads (reviews/threads.py), whose replies go to that thread. Its replies go
through the job's effects journal (issue 8), numbered per job, so a retried job never posts one twice.
"""

from __future__ import annotations

import itertools
import logging
from dataclasses import dataclass, field

from bot.app.commands import Command
from bot.app.effects.writer import GitHubEffects
from bot.app.github.api import GitHubError
from bot.app.github.client import InstallationClient
from bot.app.github.payloads import CommentEvent, Repository
from bot.app.jobs.queue import Job
from bot.app.repo_config import ConfigResult, RepoConfig
from bot.app.runs.deps import run_id_for

log = logging.getLogger("beam.runs")


@dataclass(frozen=True, slots=True)
class JobContext:
    job: Job
    event: CommentEvent
    command: Command
    gh: InstallationClient
    installation_id: int
    config_result: ConfigResult
    effects: GitHubEffects
    # Numbers this job's replies: the step of their effects-journal keys (`<run id>:reply-<n>`).
    replies: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    # The review thread (its first comment's id) a reply in one of the bot's threads asked in: its
    # refusals are said there, where the question is; None: on the issue or pull request.
    thread: int | None = None

    @property
    def config(self) -> RepoConfig:
        """The repository's settings (the defaults when `.github/beam.yml` is missing or invalid)."""
        return self.config_result.config

    @property
    def repository(self) -> Repository:
        return self.event.repository

    @property
    def requester(self) -> str:
        return self.event.comment.user.login

    async def reply(self, text: str) -> None:
        """A comment on the issue or pull request the command came from (a reply in its review thread,
        for a question in one of the bot's threads), exactly once."""
        repo = self.event.repository
        key = f"{run_id_for(self.job)}:reply-{next(self.replies)}"
        if self.thread is not None:
            owner, name, number = repo.owner.login, repo.name, self.event.number
            await self.effects.reply(key, owner, name, number, self.thread, text)
            return
        await self.effects.comment(key, repo.owner.login, repo.name, self.event.number, text, kind="reply")

    async def acknowledge(self) -> None:
        """The 👀 on the command, exactly once per run (its journal key is the run's, so the run job
        adopts the one its admission made). A courtesy: a GitHub error here is logged, not raised."""
        event = self.event
        repo = event.repository
        try:
            await self.effects.react(
                f"{run_id_for(self.job)}:eyes",
                repo.owner.login,
                repo.name,
                event.comment.id,
                "eyes",
                review_comment=event.is_review_comment,
            )
        except GitHubError as error:  # the tracking comment is what must land
            log.warning("run %s: could not react to the command: %s", run_id_for(self.job), error)
