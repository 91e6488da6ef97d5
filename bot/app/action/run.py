"""`run_action`: one workflow run's event through the App's own parts, then the workers until the
queue is drained (bounded), and an exit code.

The event file is stored as the webhook's delivery would be (same triage, same job key), and the
same job handler the App builds (`assembly.build_handler`) takes it, under a client that sends the
workflow's GITHUB_TOKEN. The database is SQLite in the runner's temporary directory: what must
outlive the run lives on GitHub (the tracking comment, the summary comment, the review itself).
"""

from __future__ import annotations

import logging
import signal
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import anyio
import httpx
from sqlalchemy import select, update

from bot.app.action import render
from bot.app.action.carry import Carried, restore, save
from bot.app.action.environment import MISSING_ENVIRONMENT, ActionEnvironment, read_environment
from bot.app.action.outcome import FAILURE, SKIPPED, Outcome, read_outcome, write_outputs, write_summary
from bot.app.action.state_ref import StateRef
from bot.app.approvals.flow import WATCH
from bot.app.assembly import JobHandlers, build_handler
from bot.app.credentials.files import AppCredentials
from bot.app.git.plumbing import CheckoutError
from bot.app.github.api import GitHubApi, GitHubError
from bot.app.github.auth import ACTIONS_LOGIN, GitHubApp, TokenAuth
from bot.app.github.timeouts import CONNECT_TIMEOUT
from bot.app.jobs.queue import JobQueue
from bot.app.jobs.schema import auto_reviews, jobs
from bot.app.jobs.store import Store, build_url
from bot.app.jobs.workers import WorkerPool
from bot.app.limits.policy import Prices
from bot.app.logs import configure_logging
from bot.app.reviews.auto_review_job import KIND as AUTO_REVIEW
from bot.app.settings import Settings, SettingsError, load_settings
from bot.app.web.app import GITHUB_HEADERS
from bot.app.web.intake import installation_of, job_key_for
from bot.app.web.metrics import Metrics
from bot.app.webhooks.triage import can_lead_to_work
from bot.beam import providers
from bot.beam.errors import BeamError
from bot.beam.model_check import start_line

log = logging.getLogger("beam.action")

OPEN_STATES = ("queued", "running")
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


def work_dir_prefix(environment: ActionEnvironment) -> str:
    """The run's directory in RUNNER_TEMP starts with this, so the job's `if: always()` step
    (finish.py) finds the database of this run attempt, and only of this one."""
    return f"beam-action-{environment.run_id}-{environment.run_attempt}-"


async def run_action(env: Mapping[str, str], out: TextIO, err: TextIO) -> int:
    """0 when the event's work is done (or there is none), 1 when it failed, 2 on bad set-up,
    128 + the signal's number when SIGINT or SIGTERM stopped it (a cancelled job sends both)."""
    try:
        environment = read_environment(env)
        parent = environment.temp_dir
        work_dir = Path(
            tempfile.mkdtemp(
                prefix=work_dir_prefix(environment), dir=parent if parent and parent.is_dir() else None
            )
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
            MISSING_ENVIRONMENT,
            "no model key: set the action's `api-key` input (with `provider` for a provider's own key), "
            f"or {', '.join(providers.KEY_VARS)}",
        )
        err.write(f"beam-bot action: {missing}\n")
        return 2
    configure_logging(settings.log_level, settings.log_format, stream=err)
    payload = environment.payload
    if not can_lead_to_work(environment.event, payload):
        write_outputs(env, {"outcome": SKIPPED, "review-url": "", "findings": "0"})
        out.write(f"beam-bot action: nothing to do for this {environment.event} event\n")
        return 0
    # The model check in one line, before the work: a wrong key or model is said first, with its fix.
    # Not for a comment of someone GitHub does not call a collaborator: the permission check comes
    # later, and a stranger's `/beam` may not cost the repository's key even a check's two calls.
    if _from_a_collaborator(payload):
        out.write(await start_line(env) + "\n")
    else:
        out.write("model: not checked for a comment of someone who is not a collaborator\n")
    out.flush()
    prices = Prices(settings.price_input_per_mtok, settings.price_output_per_mtok)
    stopped: list[str] = []
    try:
        outcome = await until_signalled(lambda: _run(environment, settings, prices), stopped)
    except BeamError as error:
        outcome = Outcome(state_problem=error)
    except (GitHubError, httpx.HTTPError, OSError) as error:
        # A bad token or GitHub down before any job ran: one line, the job's log has the rest.
        write_outputs(env, {"outcome": FAILURE, "review-url": "", "findings": "0"})
        err.write(render.PREFIX + render.github_unreachable(str(error) or type(error).__name__) + "\n")
        return 1
    if outcome is None:
        write_outputs(env, {"outcome": FAILURE, "review-url": "", "findings": "0"})
        err.write(render.PREFIX + render.stopped(stopped[0]) + "\n")
        return 128 + signal.Signals[stopped[0]].value
    return report(env, environment, outcome, out, err)


def report(
    env: Mapping[str, str], environment: ActionEnvironment, outcome: Outcome, out: TextIO, err: TextIO
) -> int:
    """The run's lines, step summary and outputs; the last line of the log is the first thing that
    failed (its code and message), or `done`."""
    write_outputs(
        env,
        {"outcome": outcome.word, "review-url": outcome.review_url, "findings": str(len(outcome.findings))},
    )
    write_summary(env, render.summary(outcome, what_ran(environment), run_link(environment)))
    for run in outcome.runs:
        out.write(render.PREFIX + render.run_line(run) + "\n")
    out.flush()
    causes = render.causes(outcome)
    if not causes:
        out.write("beam-bot action: done\n")
        return 0
    for cause in causes[1:]:
        err.write(render.PREFIX + cause + "\n")
    err.write(render.PREFIX + (render.failure_line(outcome) or causes[0]) + "\n")
    return 1


def what_ran(environment: ActionEnvironment) -> str:
    about = environment.pull_request
    where = f"{about[0]}#{about[1]}" if about else environment.repository
    return f"{environment.event} on {where}"


def run_link(environment: ActionEnvironment) -> str:
    """The workflow run's page: `$GITHUB_SERVER_URL/$GITHUB_REPOSITORY/actions/runs/$GITHUB_RUN_ID`."""
    return f"{environment.server_url}/{environment.repository}/actions/runs/{environment.run_id}"


async def until_signalled(work: Callable[[], Awaitable[Outcome]], stopped: list[str]) -> Outcome | None:
    """`work()`, or None once SIGINT or SIGTERM arrives (its name is appended to `stopped`): the
    work is cancelled, and its own cleanup (the database closed) still runs. What the run leaves
    open, the job's `if: always()` step makes final (finish.py)."""
    result: list[Outcome] = []
    failure: list[Exception] = []
    async with anyio.create_task_group() as tg:

        async def watch() -> None:
            with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as received:
                async for signum in received:
                    stopped.append(signal.Signals(signum).name)
                    tg.cancel_scope.cancel()
                    return

        async def do() -> None:
            try:
                result.append(await work())
            except Exception as error:  # raised below as itself, not inside the task group's group
                failure.append(error)
            tg.cancel_scope.cancel()

        tg.start_soon(watch)
        tg.start_soon(do)
    if failure and not stopped:
        raise failure[0]
    return result[0] if result and not stopped else None


@asynccontextmanager
async def action_handler(
    environment: ActionEnvironment, settings: Settings, store: Store
) -> AsyncIterator[JobHandlers]:
    """The App's job handler under the workflow's token, for a run and for its `--finish` step."""
    async with httpx.AsyncClient(
        base_url=settings.github_api_url,
        headers=GITHUB_HEADERS,
        timeout=httpx.Timeout(settings.github_timeout, connect=CONNECT_TIMEOUT),
        follow_redirects=False,
    ) as client:
        login = settings.bot_login

        def auth(api: GitHubApi) -> GitHubApp:
            return TokenAuth(api, environment.token, login or ACTIONS_LOGIN)

        yield build_handler(ActionResources(settings, client, store), auth)


_COLLABORATORS = frozenset({"OWNER", "MEMBER", "COLLABORATOR"})


def _from_a_collaborator(payload: Mapping[str, Any]) -> bool:
    """Whether the event is not a comment, or a comment whose author GitHub's own payload calls an
    owner, member or collaborator (`author_association`, set by GitHub, not by the commenter). It
    gates only the start's model check: who may run a command is still the permission check's."""
    comment = payload.get("comment")
    if not isinstance(comment, Mapping):
        return True
    return comment.get("author_association") in _COLLABORATORS


async def _run(environment: ActionEnvironment, settings: Settings, prices: Prices) -> Outcome:
    store = await Store.open(build_url(None, settings.work_dir))
    since = store.clock()
    try:
        async with action_handler(environment, settings, store) as handler:
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
                    raise render.state_unreadable(error.message, error.auth) from None
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
            limit = settings.job_timeout * 2
            unfinished = await _drain(store, pool, limit)
            problem = None
            if about is not None:
                problem = await save(store, ref, place.repo, about[1], carried)
            return await read_outcome(
                store,
                since,
                prices,
                unfinished=unfinished,
                state_problem=render.state_unkept(problem) if problem else None,
                time_limit=limit,
            )
    finally:
        with anyio.CancelScope(shield=True):  # a signal cancels the run; the database still closes
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
