"""The job handler: from a claimed job to the right action, with permission and repository config checks.

`AppServices` is built once by the app's lifespan; each job gets a `JobScope` that the event router
calls back into, so handlers stay short (parse, decide, act) and everything they touch is explicit.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from bot.app.commands import Command
from bot.app.github.api import GitHubError
from bot.app.github.client import GitHubApp, InstallationClient
from bot.app.github.payloads import CommentEvent
from bot.app.jobs.queue import Job
from bot.app.jobs.workers import PermanentError, RetryableError
from bot.app.repo_config import ConfigResult, load_repo_config, permission_at_least, render_config_errors
from bot.app.runs import render
from bot.app.runs.run import RunDeps, RunRequest, SkillRun, run_id_for
from bot.app.webhooks import routing as events
from bot.app.webhooks.routing import Act, Ignore, Reply, decide

log = logging.getLogger("beam.jobs")

READ_ONLY_PR_SKILLS = {"review", "summarize", "commit-notes"}
SWEEP_EVERY = 3600.0  # seconds between sweeps of run trees left by jobs that died for good


class CommandHandler(Protocol):
    """Handles `/beam author`, `/beam approve` and `/beam reject` (the approvals module)."""

    async def author(self, scope: JobScope, command: Command, config: ConfigResult) -> None: ...

    async def decide_command(self, scope: JobScope, command: Command, config: ConfigResult) -> None: ...


@dataclass
class AppServices:
    github: GitHubApp
    deps: RunDeps
    bot_login: str | None = None
    approvals: CommandHandler | None = None
    job_handlers: dict[str, Callable[[Job], Awaitable[None]]] = field(default_factory=dict)
    last_sweep: float = float("-inf")

    async def login(self) -> str | None:
        """The App's bot login, asked of GitHub once, so our own comments are never commands."""
        if self.bot_login is None:
            try:
                self.bot_login = (await self.github.get_app()).bot_login
            except GitHubError as error:
                log.warning("could not read the App's login: %s", error)
        if self.bot_login is not None and self.deps.bot_login is None:
            self.deps.bot_login = self.bot_login  # commits made by runs carry the App's identity
        return self.bot_login

    async def sweep(self) -> None:
        """Remove run trees older than two run timeouts: a retried run cleans its own, this the rest."""
        now = time.monotonic()
        if now - self.last_sweep < SWEEP_EVERY:
            return
        self.last_sweep = now
        removed = await self.deps.checkouts.cleanup_stale(max(3600.0, 2 * self.deps.run_timeout))
        if removed:
            log.info("removed %d stale run trees", len(removed))

    async def handle_job(self, job: Job) -> None:
        await self.sweep()
        if job.kind == "delivery":
            if job.delivery_payload is None or job.event is None:
                raise PermanentError(f"job {job.id} has no delivery")
            try:
                data = json.loads(job.delivery_payload)
            except ValueError as error:
                raise PermanentError(f"delivery {job.delivery_id} is not JSON") from error
            await events.dispatch(job.event, job.delivery_id or "", data, JobScope(self, job))
            return
        handler = self.job_handlers.get(job.kind)
        if handler is None:
            raise PermanentError(f"unknown job kind {job.kind!r}")
        await handler(job)


class JobScope:
    """One job's view of the services; the event router calls its `handle_*` methods."""

    log = log

    def __init__(self, services: AppServices, job: Job) -> None:
        self.services = services
        self.job = job
        self.event: CommentEvent | None = None
        self.gh: InstallationClient | None = None
        self.installation_id = 0
        self.replies = 0  # issue 8: numbers this job's replies, the step of their effects-journal keys

    async def client_for(self, event: CommentEvent) -> InstallationClient:
        if event.installation is not None:
            self.installation_id = event.installation.id
        else:
            repo = event.repository
            self.installation_id = (
                await self.services.github.installation_for_repo(repo.owner.login, repo.name)
            ).id
        return InstallationClient(self.services.github, self.installation_id)

    async def reply(self, text: str) -> None:
        assert self.event is not None and self.gh is not None
        repo = self.event.repository
        self.replies += 1  # issue 8: exactly once, through the effects journal
        key = f"{run_id_for(self.job)}:reply-{self.replies}"
        effects = self.services.deps.effects(self.gh)
        await effects.comment(key, repo.owner.login, repo.name, self.event.number, text, kind="reply")

    async def handle_comment(self, event: CommentEvent) -> None:
        decision = decide(event, await self.services.login())
        if isinstance(decision, Ignore):
            log.info("delivery %s ignored: %s", self.job.delivery_id, decision.reason)
            return
        self.event = event
        try:
            self.gh = await self.client_for(event)
            if isinstance(decision, Reply):
                await self.reply(decision.text)
                return
            await self._act(event, decision)
        except GitHubError as error:
            if error.transient:
                raise RetryableError(str(error)) from error
            raise PermanentError(str(error)) from error

    async def _act(self, event: CommentEvent, decision: Act) -> None:
        assert self.gh is not None
        command = decision.command
        repo = event.repository
        config = await load_repo_config(self.gh.get_file, repo.owner.login, repo.name, repo.default_branch)
        login = event.comment.user.login
        permission = await self.gh.get_permission(repo.owner.login, repo.name, login)
        if command.name in ("approve", "reject"):
            if self.services.approvals is None:
                await self.reply(f"There is no held push `{command.arg}` on this repository.")
            else:
                await self.services.approvals.decide_command(self, command, config)
            return
        needed = config.config.trigger_permission
        if not permission_at_least(permission, needed):
            await self.reply(render.refusal(login, needed))
            return
        if config.errors:
            await self.reply(render_config_errors(config.errors, repo.default_branch))
        if not config.config.skill_enabled(command.name):
            await self.reply(
                f"`/beam {command.name}` is turned off for this repository in `.github/beam.yml`."
            )
            return
        if command.skill in READ_ONLY_PR_SKILLS and not event.on_pull_request:
            await self.reply(render.needs_pull_request(f"/beam {command.name}"))
            return
        if command.name == "author":
            if self.services.approvals is None:
                await self.reply("`/beam author` is not enabled on this installation.")
            else:
                await self.services.approvals.author(self, command, config)
            return
        deps = self.services.deps.with_blocked_paths(config.config.blocked_paths)
        await SkillRun(deps, RunRequest(event, command, self.job, self.gh, self.installation_id)).run()

    async def handle_pull_closed(self, data: dict[str, Any]) -> None:
        handler = getattr(self.services.approvals, "pull_closed", None)
        if handler is not None:
            await handler(self, data)
