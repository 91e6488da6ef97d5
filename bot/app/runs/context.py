"""`JobContext`: one command job as every handler sees it, built once by the webhook layer.

It is frozen and whole before any handler runs: the job, the comment event and its command, the
installation and its client, and the repository config the command runs under. A skill run,
`/beam author`, `/beam approve` and `/beam reject` each take it as it is.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.app.commands import Command
from bot.app.github.client import InstallationClient
from bot.app.github.payloads import CommentEvent, Repository
from bot.app.jobs.queue import Job
from bot.app.repo_config import ConfigResult, RepoConfig


@dataclass(frozen=True, slots=True)
class JobContext:
    job: Job
    event: CommentEvent
    command: Command
    gh: InstallationClient
    installation_id: int
    config_result: ConfigResult

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
        """A comment on the issue or pull request the command came from."""
        repo = self.event.repository
        await self.gh.create_comment(repo.owner.login, repo.name, self.event.number, text)
