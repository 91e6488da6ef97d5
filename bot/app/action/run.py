"""`run_action`: one workflow run's event through the App's own parts, then the workers until the
queue is drained (bounded), and an exit code.

The event file is stored as the webhook's delivery would be (same triage, same job key), and the
same job handler the App builds (`assembly.build_handler`) takes it, under a client that sends the
workflow's GITHUB_TOKEN. The database is SQLite in the runner's temporary directory: what must
outlive the run lives on GitHub (the tracking comment, the summary comment, the review itself).
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

import anyio
import httpx
from sqlalchemy import select, update

from bot.app.action.carry import Carried, restore, save
from bot.app.action.environment import MISSING_ENVIRONMENT, ActionEnvironment, read_environment
from bot.app.action.state_ref import StateRef
from bot.app.approvals.flow import WATCH
from bot.app.assembly import build_handler
from bot.app.credentials.files import AppCredentials
from bot.app.git.plumbing import CheckoutError
from bot.app.github.api import GitHubApi
from bot.app.github.auth import ACTIONS_LOGIN, GitHubApp, TokenAuth
from bot.app.github.timeouts import CONNECT_TIMEOUT
from bot.app.jobs.queue import JobQueue
from bot.app.jobs.schema import auto_reviews, jobs, runs
from bot.app.jobs.store import Store, build_url
from bot.app.jobs.workers import WorkerPool
from bot.app.logs import configure_logging
from bot.app.reviews.review import KIND as AUTO_REVIEW
from bot.app.settings import Settings, SettingsError, load_settings
from bot.app.web.app import GITHUB_HEADERS
from bot.app.web.intake import installation_of, job_key_for
from bot.app.web.metrics import Metrics
from bot.app.webhooks.triage import can_lead_to_work
from bot.beam.errors import BeamError

log = logging.getLogger("beam.action")

UNFINISHED = "BEM-393"
NO_STATE = "BEM-394"
OPEN_STATES = ("queued", "running")
FAILED_STATES = ("failed", "dead")
DRAIN_POLL = 0.2  # seconds between looks at the queue; the workers are woken at once anyway


@dataclass
class ActionResources:
    """What `assembly.build_handler` needs of a running app (its `Resources`), for one run."""

    settings: Settings
    github: httpx.AsyncClient | None
    store: Store | None
    credentials: AppCredentials | None = None
    _metrics: Metrics = field(default_factory=Metrics)

    @property
    def metrics(self) -> Metrics:
        return self._metrics


@dataclass(frozen=True, slots=True)
class Outcome:
    """What the run did: its runs (skill, status, BEM code) and the jobs that failed for good."""

    runs: list[tuple[str, str, str | None, str | None]]
    failed: list[str]
    unfinished: int

    @property
    def ok(self) -> bool:
        return not self.failed and not self.unfinished and all(r[1] != "failed" for r in self.runs)


def action_settings(environment: ActionEnvironment, work_dir: Path) -> Settings:
    """The server's settings (BEAM_*: model, limits, checks) with what the Action fixes: the
    database and the work directory in the runner's temporary directory, GitHub's API as the runner
    names it, and the login of the workflow's token."""
    settings = load_settings()
    return settings.model_copy(
        update={
            "work_dir": work_dir,
            "runs_dir": work_dir / "runs",
            "database_url": None,
            "github_api_url": environment.api_url,
            "bot_login": settings.bot_login or ACTIONS_LOGIN,
            "approve_by_reaction": False,
            "concurrency": 1,
        }
    )


async def run_action(env: Mapping[str, str], out: TextIO, err: TextIO) -> int:
    """0 when the event's work is done (or there is none), 1 when it failed, 2 on bad set-up."""
    try:
        environment = read_environment(env)
        parent = environment.temp_dir
        work_dir = Path(
            tempfile.mkdtemp(prefix="beam-action-", dir=parent if parent and parent.is_dir() else None)
        )
        settings = action_settings(environment, work_dir)
    except BeamError as error:
        err.write(f"beam-bot action: {error}\n")
        return 2
    except SettingsError as error:
        err.write(f"beam-bot action: {error}\n")
        return 2
    if not settings.has_llm_key:
        # The echo model would post the prompt as an answer on a public pull request.
        missing = BeamError(
            MISSING_ENVIRONMENT, "no model key: set the action's `api-key` input (BEAM_API_KEY)"
        )
        err.write(f"beam-bot action: {missing}\n")
        return 2
    configure_logging(settings.log_level, settings.log_format, stream=err)
    payload = environment.payload
    if not can_lead_to_work(environment.event, payload):
        out.write(f"beam-bot action: nothing to do for this {environment.event} event\n")
        return 0
    try:
        outcome = await _run(environment, settings)
    except BeamError as error:
        err.write(f"beam-bot action: {error}\n")
        return 1
    for skill, status, code, message in outcome.runs:
        line = f"beam-bot action: {skill} {status}"
        if code:
            line += f" ({code}{': ' + message if message else ''})"
        out.write(line + "\n")
    if outcome.ok:
        out.write("beam-bot action: done\n")
        return 0
    detail = "; ".join(outcome.failed) or f"{outcome.unfinished} job(s) still queued when time ran out"
    err.write(f"beam-bot action: {BeamError(UNFINISHED, detail)}\n")
    return 1


async def _run(environment: ActionEnvironment, settings: Settings) -> Outcome:
    store = await Store.open(build_url(None, settings.work_dir))
    try:
        async with httpx.AsyncClient(
            base_url=settings.github_api_url,
            headers=GITHUB_HEADERS,
            timeout=httpx.Timeout(settings.github_timeout, connect=CONNECT_TIMEOUT),
            follow_redirects=False,
        ) as client:
            resources = ActionResources(settings, client, store)
            login = settings.bot_login

            def auth(api: GitHubApi) -> GitHubApp:
                return TokenAuth(api, environment.token, login or ACTIONS_LOGIN)

            handler = build_handler(resources, auth)
            gh_token = environment.token.get_secret_value()
            # The delivery is stored before anything is sent with the token, and the state comes
            # back only from the run's own repository, at the address the runner gave.
            await store.accept_delivery(
                environment.delivery_id,
                environment.event,
                str(environment.payload.get("action") or "") or None,
                environment.body,
                job_key_for(environment.payload),
                with_job=True,
                installation_id=installation_of(environment.payload),
            )
            place = environment.place
            ref = StateRef(settings.work_dir / "state.git", place.clone_url, gh_token)
            about, carried = environment.pull_request, Carried()
            if about is not None:
                try:
                    carried = await restore(store, ref, place, about[1])
                except CheckoutError as error:
                    raise BeamError(
                        NO_STATE, f"the state of the last run could not be read: {error.message}"
                    ) from None
                log.info("carried %d rows of state from the last run", carried.rows)
            pool = WorkerPool(
                JobQueue(store),
                handler,
                concurrency=settings.concurrency,
                lease_seconds=settings.lease_seconds,
                job_timeout=settings.job_timeout,
                poll_interval=DRAIN_POLL,
                worker_id=f"action-{environment.run_id}",
                shutdown_grace=settings.shutdown_grace,
                on_gave_up=handler.gave_up,
                periodic=handler.periodic,
                periodic_interval=settings.sweep_interval,
            )
            unfinished = await _drain(store, pool, settings.job_timeout * 2)
            problem = None
            if about is not None:
                problem = await save(store, ref, place.repo, about[1], carried)
            return await _outcome(store, unfinished, problem)
    finally:
        await store.close()


async def _open_jobs(store: Store) -> int:
    """Jobs still to do. The approval poller's later looks are not (reactions send no event to
    Actions: an approval comes as its own `/beam approve` run), its push after an approval is."""
    due = (jobs.c.kind != WATCH) | (jobs.c.run_after <= store.clock() + DRAIN_POLL)
    async with store.read() as conn:
        rows = await conn.execute(select(jobs.c.id).where(jobs.c.state.in_(OPEN_STATES), due))
        return len(rows.all())


async def _no_debounce(store: Store) -> None:
    """An automatic review is due at once: the debounce waits for more pushes, and in a workflow a
    newer push starts a run of its own (the workflow's `concurrency` group cancels this one)."""
    now = store.clock()
    async with store.write() as conn:
        await conn.execute(
            update(jobs)
            .where(jobs.c.kind == AUTO_REVIEW, jobs.c.state == "queued", jobs.c.run_after > now)
            .values(run_after=now)
        )
        await conn.execute(update(auto_reviews).where(auto_reviews.c.due_at > now).values(due_at=now))


async def _drain(store: Store, pool: WorkerPool, limit: float) -> int:
    """Runs the workers until no job is left (retries and debounces included), at most `limit` seconds."""
    left = 1
    async with anyio.create_task_group() as tg:
        tg.start_soon(pool.run)
        with anyio.move_on_after(limit):
            while left:
                await anyio.sleep(DRAIN_POLL)
                await _no_debounce(store)
                left = await _open_jobs(store)
        pool.stop()
    return left


async def _outcome(store: Store, unfinished: int, problem: str | None) -> Outcome:
    async with store.read() as conn:
        done = await conn.execute(
            select(runs.c.skill, runs.c.status, runs.c.error_code, runs.c.error_message).order_by(
                runs.c.created_at
            )
        )
        run_rows = [(r[0], r[1], r[2], r[3]) for r in done.all()]
        bad = await conn.execute(
            select(jobs.c.kind, jobs.c.last_error).where(jobs.c.state.in_(FAILED_STATES))
        )
        failed = [f"{kind}: {error or 'failed'}" for kind, error in bad.all()]
    if problem is not None:
        failed.append(problem)
    return Outcome(run_rows, failed, unfinished)
