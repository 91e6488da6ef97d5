"""Builds the job handler from a running app's resources: the one place that wires the app together.

Called by the web layer once the App has credentials (at start, or after setup mode without a
restart), so nothing here runs in setup mode.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Protocol

import httpx

from bot.app.approvals.flow import WATCH, Approvals, PollTiming
from bot.app.checks.flow import Checker, jail_state
from bot.app.credentials.files import AppCredentials
from bot.app.effects.crash import CrashPoints
from bot.app.git.checkout import Checkouts
from bot.app.github.api import GitHubStats
from bot.app.github.client import GitHubApi, GitHubApp
from bot.app.github.identity import BotIdentity
from bot.app.github.timeouts import in_flight_seconds
from bot.app.jobs.queue import Job, JobQueue
from bot.app.jobs.store import Store
from bot.app.limits.ledger import RUN_KIND
from bot.app.limits.policy import Policy
from bot.app.reviews.abandoned import AbandonedReviews
from bot.app.reviews.auto_review_job import KIND as AUTO_REVIEW
from bot.app.reviews.auto_review_job import ReviewJob
from bot.app.reviews.state import ReviewStates
from bot.app.reviews.threads import ThreadReplies
from bot.app.reviews.trigger import ReviewTrigger
from bot.app.runs.deps import run_timeout
from bot.app.runs.run import RunDeps
from bot.app.runs.sweep import finish_abandoned_runs
from bot.app.settings import Settings
from bot.app.webhooks.dispatch import JobDispatcher, Sweeper
from bot.app.webhooks.handlers import Webhooks
from bot.beam.completion import CompletionClient, EchoClient
from bot.beam.openai_client import OpenAiCompatible

log = logging.getLogger("beam.checks")

# How a way in other than the App authenticates its client (github/auth.py's `TokenAuth`).
AuthFactory = Callable[[GitHubApi], GitHubApp]


class RunMetrics(Protocol):
    """The part of the web layer's metrics the job handler feeds (`web.metrics.Metrics` has it)."""

    github_stats: GitHubStats

    def observe_skill_run(
        self, skill: str, status: str, seconds: float, prompt_tokens: int = 0, completion_tokens: int = 0
    ) -> None: ...


class Resources(Protocol):
    """What a running app owns that the job handler needs (`web.app.AppRuntime` has it)."""

    settings: Settings
    credentials: AppCredentials | None
    github: httpx.AsyncClient | None
    store: Store | None

    @property
    def metrics(self) -> RunMetrics: ...


def llm_client(settings: Settings | None = None) -> CompletionClient:
    """A live model when the seed's API key variables are set; the echo client otherwise."""
    client = OpenAiCompatible.from_env()
    if client is None:
        return EchoClient()
    if settings is not None:
        client.tools_mode = settings.model_tools
    return client


def checker(settings: Settings, checkouts: Checkouts) -> Checker:
    """The checks runner; says once, at start, when this machine cannot build the jail."""
    state = jail_state()
    if not state.available:
        log.warning(
            "checks are off: the jail cannot be built here (%s); docs/checks.md says what the jail "
            "needs (bubblewrap, user namespaces, a memory cgroup)",
            state.reason,
        )
    else:  # how the jail is built here (mode, memory cgroup) is said once, at start
        log.info("%s", state.reason)
    cache = settings.checks_cache_dir or settings.work_dir / "check-cache"
    return Checker(settings, cache_root=cache, scratch_root=checkouts.runs_dir / ".checks")


def build_dispatcher(runtime: Resources, auth: AuthFactory | None = None) -> JobDispatcher:
    """Every part built once, in order (each from the ones before it), and never changed after.

    `auth` is the one seam between the ways in (ARCHITECTURE section 14): the App (default) signs
    with its JWT; `beam-bot action` and `beam-bot review --post` pass a token's client instead."""
    settings, credentials = runtime.settings, runtime.credentials
    if runtime.github is None or runtime.store is None or (credentials is None and auth is None):
        raise RuntimeError("the job handler is built only once the app has its store and credentials")
    api = GitHubApi(runtime.github, base_url=settings.github_api_url, stats=runtime.metrics.github_stats)
    if auth is not None:
        github = auth(api)
    else:
        assert credentials is not None
        github = GitHubApp(api, credentials.app_id, credentials.private_key)

    async def installation_token(installation_id: int) -> str:
        return (await github.installation_token(installation_id)).get_secret_value()

    async def refresh_token(installation_id: int) -> str:
        github.invalidate_token(installation_id)  # git was refused the cached one (a 401)
        return await installation_token(installation_id)

    checkouts = Checkouts(settings.work_dir, settings.runs_dir, max_repo_bytes=settings.max_repo_bytes)
    deps = RunDeps(
        store=runtime.store,
        checkouts=checkouts,
        llm=llm_client(settings),
        installation_token=installation_token,
        identity=BotIdentity(github, settings.bot_login),
        run_timeout=run_timeout(settings.job_timeout),
        policy=Policy.from_settings(settings),
        observe=runtime.metrics.observe_skill_run,
        crash=CrashPoints.from_env(os.environ),  # a test hook; unset outside tests
        in_flight=in_flight_seconds(settings.github_timeout),
        outage_wait=settings.github_outage_wait,
        refresh_token=refresh_token,
        checks=checker(settings, checkouts),
        max_fetch_bytes=settings.max_fetch_bytes,
    )
    timing = PollTiming(
        minimum=min(settings.poll_min_interval, settings.poll_interval), maximum=settings.poll_interval
    )
    queue = JobQueue(runtime.store)
    approvals = Approvals(
        github,
        deps,
        queue,
        timing=timing,
        max_held_bytes=settings.max_held_push_bytes,
        by_reaction=settings.approve_by_reaction,
    )
    states = ReviewStates(runtime.store)
    trigger = ReviewTrigger(
        github,
        queue,
        states,
        enabled_by_default=settings.auto_review,
        crash=deps.crash,
        in_flight=deps.in_flight,
    )
    reviews = ReviewJob(github, deps, states, enabled_by_default=settings.auto_review)
    webhooks = Webhooks(github, deps, approvals, trigger, ThreadReplies(deps))
    sweep = Sweeper(deps.checkouts, max(3600.0, 2 * deps.run_timeout))
    return JobDispatcher(
        webhooks, {WATCH: approvals.watch, AUTO_REVIEW: reviews, RUN_KIND: webhooks.on_run}, sweep
    )


class JobHandlers:
    """The job handler the worker pool calls, with the pool's two hooks (issue 8): `gave_up` when a
    job ends failed or dead, and `periodic`, the sweep that finishes what such jobs left open (a
    command's tracking comment; an automatic review's check run, summary line and run row)."""

    def __init__(self, dispatcher: JobDispatcher, deps: RunDeps, github: GitHubApp) -> None:
        self.dispatcher = dispatcher
        self.deps = deps
        self.github = github
        self.reviews = AbandonedReviews(github, deps, ReviewStates(deps.store))

    async def __call__(self, job: Job) -> None:
        await self.dispatcher.handle_job(job)

    async def gave_up(self, job: Job, error: str) -> None:
        if job.kind == AUTO_REVIEW:
            await self.reviews.finish(job.id)
        else:
            await finish_abandoned_runs(self.deps, self.github, job.id)

    async def periodic(self) -> None:
        await finish_abandoned_runs(self.deps, self.github)
        await self.reviews.finish()


def build_handler(runtime: Resources, auth: AuthFactory | None = None) -> JobHandlers:
    dispatcher = build_dispatcher(runtime, auth)
    return JobHandlers(dispatcher, dispatcher.webhooks.deps, dispatcher.webhooks.github)
