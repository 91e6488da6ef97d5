"""Builds the job handler from a running app's resources: the one place that wires the app together.

Called by the web layer once the App has credentials (at start, or after setup mode without a
restart), so nothing here runs in setup mode.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from bot.app.approvals.flow import WATCH, Approvals, PollTiming
from bot.app.effects.crash import CrashPoints
from bot.app.git.checkout import Checkouts
from bot.app.github.client import GitHubApi, GitHubApp
from bot.app.jobs.queue import Job, JobQueue
from bot.app.runs.run import RunDeps
from bot.app.runs.sweep import finish_abandoned_runs
from bot.app.webhooks.handlers import AppServices
from bot.beam.completion import CompletionClient, EchoClient
from bot.beam.openai_client import OpenAiCompatible

if TYPE_CHECKING:
    from bot.app.web.app import AppRuntime, JobHandler

# A run stops this long before the worker's hard job timeout, so it can still write its final comment.
FINAL_COMMENT_MARGIN = 60.0


def llm_client() -> CompletionClient:
    """A live model when the seed's API key variables are set; the echo client otherwise."""
    client = OpenAiCompatible.from_env()
    return client if client is not None else EchoClient()


def build_services(runtime: AppRuntime) -> AppServices:
    settings, credentials = runtime.settings, runtime.credentials
    assert runtime.github is not None and runtime.store is not None and credentials is not None
    api = GitHubApi(runtime.github, base_url=settings.github_api_url)
    github = GitHubApp(api, credentials.app_id, credentials.private_key)

    async def installation_token(installation_id: int) -> str:
        return (await github.installation_token(installation_id)).get_secret_value()

    async def refresh_token(installation_id: int) -> str:
        github.invalidate_token(installation_id)  # git was refused the cached one (a 401)
        return await installation_token(installation_id)

    deps = RunDeps(
        store=runtime.store,
        checkouts=Checkouts(settings.work_dir, settings.runs_dir),
        llm=llm_client(),
        installation_token=installation_token,
        run_timeout=max(30.0, settings.job_timeout - FINAL_COMMENT_MARGIN),
        bot_login=settings.bot_login,
        crash=CrashPoints.from_env(os.environ),  # a test hook; unset outside tests
        refresh_token=refresh_token,
    )
    services = AppServices(github=github, deps=deps, bot_login=settings.bot_login)
    timing = PollTiming(
        minimum=min(settings.poll_min_interval, settings.poll_interval), maximum=settings.poll_interval
    )
    approvals = Approvals(
        github, deps, JobQueue(runtime.store), timing=timing, bot_login=lambda: services.bot_login
    )
    services.approvals = approvals
    services.job_handlers[WATCH] = approvals.watch
    return services


class JobHandlers:
    """The job handler the worker pool calls, with the pool's two hooks (issue 8): `gave_up` when a
    job ends failed or dead, and `periodic`, the sweep that finishes tracking comments left open."""

    def __init__(self, services: AppServices) -> None:
        self.services = services

    async def __call__(self, job: Job) -> None:
        await self.services.handle_job(job)

    async def gave_up(self, job: Job, error: str) -> None:
        await finish_abandoned_runs(self.services.deps, self.services.github, job.id)

    async def periodic(self) -> None:
        await finish_abandoned_runs(self.services.deps, self.services.github)


def build_handler(runtime: AppRuntime) -> JobHandler:
    return JobHandlers(build_services(runtime))
