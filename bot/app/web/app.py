"""`create_app(settings)`: the Starlette app, and `AppRuntime`, the resources its lifespan owns.

The lifespan opens the store, one httpx client for GitHub (counted by `Metrics`), and, once the App
has credentials and a job handler was given, the worker pool. Without credentials the app starts in
setup mode (setup.py) and switches to normal mode in place when the App is registered: the webhook
route reads its secret from the runtime, and the worker pool starts in the lifespan's task group.
Nothing here reads the environment or keeps global state; everything hangs off `app.state.runtime`.
"""

from __future__ import annotations

import hmac
import html
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.abc
import anyio.to_thread
import httpx
import sqlalchemy
from pydantic import SecretStr
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from bot.app.checks.flow import checks_detail
from bot.app.credentials.files import AppCredentials
from bot.app.credentials.stored import load_app_credentials, wait_for_registration
from bot.app.dashboard.routes import Dashboard
from bot.app.github.api import GitHubApi
from bot.app.github.auth import GitHubApp
from bot.app.github.timeouts import CONNECT_TIMEOUT
from bot.app.jobs.identity import WorkerIdentity, claim_identity
from bot.app.jobs.queue import Job, JobQueue
from bot.app.jobs.retention import prune_periodically
from bot.app.jobs.store import Store, build_url
from bot.app.jobs.workers import WorkerPool
from bot.app.limits.ledger import RUN_KIND
from bot.app.limits.policy import Policy
from bot.app.reviews.auto_review_job import KIND as AUTO_REVIEW
from bot.app.settings import Settings, SettingsError, ensure_work_dir
from bot.app.web.health import CredentialsCheck, StoreProbe, readiness
from bot.app.web.intake import WebhookIntake
from bot.app.web.metrics import CONTENT_TYPE, Metrics, MetricsTransport
from bot.app.web.preflight import browse_url
from bot.app.web.proxy import intake_deliverer, proxy_running
from bot.app.web.redelivery import RedeliverySweep
from bot.app.web.setup import SetupFlow, install_url, load_manifest, status_page
from bot.app.web.usage_metrics import usage_exposition

log = logging.getLogger("beam.app")

JobHandler = Callable[[Job], Awaitable[None]]
HandlerFactory = Callable[["AppRuntime"], JobHandler]
GITHUB_HEADERS = {
    "Accept": "application/vnd.github+json",
    "X-GitHub-Api-Version": "2022-11-28",
    "User-Agent": "beam-bot",
}


class AppRuntime:
    """Everything one running app owns. `mode` is "setup" until the App has credentials."""

    def __init__(
        self,
        settings: Settings,
        *,
        handler: JobHandler | None = None,
        handler_factory: HandlerFactory | None = None,
        github_transport: httpx.AsyncBaseTransport | None = None,
        metrics: Metrics | None = None,
        require_credentials: bool = False,
    ) -> None:
        """`require_credentials`: refuse to start without them (`beam-bot worker`: registering is
        the web server's job), instead of starting in setup mode."""
        if handler is not None and handler_factory is not None:
            raise ValueError("pass handler or handler_factory, not both")
        self.settings = settings
        self.metrics = metrics or Metrics()
        self.intake = WebhookIntake(
            self.metrics,
            public_url=settings.public_url,
            max_unverified=settings.max_unverified_bytes,
            peer_share=settings.peer_share,
            body_timeout=settings.body_timeout,
            keep_ignored_payloads=settings.keep_ignored_payloads,
        )
        self.setup = SetupFlow(settings, {}, self.activate)
        self.credentials: AppCredentials | None = None
        self.store: Store | None = None
        self.github: httpx.AsyncClient | None = None
        self.workers: WorkerPool | None = None
        self.identity: WorkerIdentity | None = None
        self._handler = handler
        self._handler_factory = handler_factory
        self._github_transport = github_transport
        self._require_credentials = require_credentials
        self._task_group: anyio.abc.TaskGroup | None = None
        self.credentials_check: CredentialsCheck | None = None
        self.redelivery: RedeliverySweep | None = None
        self.store_probe = StoreProbe()
        self._workers_running = False
        self._shutting_down = False
        self._background_scopes: list[anyio.CancelScope] = []

    @property
    def mode(self) -> str:
        return "setup" if self.credentials is None else "normal"

    @asynccontextmanager
    async def running(self) -> AsyncIterator[AppRuntime]:
        """Opens every resource, yields, and closes them in reverse order (workers first)."""
        settings = self.settings
        await anyio.to_thread.run_sync(_prepare_work_dir, settings)
        self.store = await Store.open(build_url(_secret(settings.database_url), settings.work_dir))
        try:
            # Issue 23: environment, then the database every host shares, then this host's file.
            credentials = await load_app_credentials(settings, self.store)
            if credentials is None and self._require_credentials:
                raise SettingsError(
                    "the worker has no GitHub App credentials: set BEAM_APP_ID, BEAM_PRIVATE_KEY and "
                    "BEAM_WEBHOOK_SECRET, or register the App with `beam-bot serve` first (with "
                    "BEAM_SECRET_KEY set, so that every host finds them in the database)"
                )
            transport = MetricsTransport(self._github_transport or httpx.AsyncHTTPTransport(), self.metrics)
            async with (
                httpx.AsyncClient(
                    base_url=settings.github_api_url,
                    transport=transport,
                    headers=GITHUB_HEADERS,
                    timeout=httpx.Timeout(settings.github_timeout, connect=CONNECT_TIMEOUT),
                    follow_redirects=False,
                ) as github,
                anyio.create_task_group() as tg,
            ):
                self.github = github
                self.setup.client = github
                self.setup.store = self.store
                self._task_group = tg
                self.intake.store = self.store
                tg.start_soon(
                    self._background,
                    prune_periodically,
                    self.store,
                    settings.retention_days,
                    settings.prune_interval,
                )
                if credentials is not None:
                    await self.activate(credentials)
                else:
                    self.setup.manifest = await anyio.to_thread.run_sync(load_manifest, settings)
                    log.warning(
                        "beam-bot is in setup mode: open %s to register the GitHub App",
                        self.setup.open_url(browse_url(settings)),
                    )
                    if settings.setup_poll_interval > 0:
                        tg.start_soon(self._background, self._await_credentials)
                try:
                    yield self
                finally:
                    # In-flight jobs get the pool's grace period; what is still running then goes
                    # back to the queue for the next worker.
                    self._shutting_down = True
                    for scope in self._background_scopes:
                        scope.cancel()
                    if self.workers is not None:
                        self.workers.stop()
                    else:
                        tg.cancel_scope.cancel()
        finally:
            self._task_group = None
            self.github = None
            self.workers = None
            if self.identity is not None:
                self.identity.release()
                self.identity = None
            store, self.store = self.store, None
            await store.close()

    async def _await_credentials(self) -> None:
        """Setup mode while another host may register the App in the shared database (issue 23)."""
        if self.store is not None:
            await self.activate(await wait_for_registration(self.settings, self.store))

    async def activate(self, credentials: AppCredentials) -> None:
        """Normal mode from now on: webhooks are verified with this secret and the workers start."""
        if self.credentials is not None:  # registered here and found in the database at once
            return
        self.credentials = credentials
        self.intake.secret = credentials.webhook_secret.get_secret_value().encode()
        self.setup.done = True
        log.info(
            "beam-bot serves GitHub App %s (credentials from %s)", credentials.app_id, credentials.source
        )
        handler = self._handler
        if handler is None and self._handler_factory is not None:
            handler = self._handler_factory(self)
        if handler is None or self._task_group is None or self.store is None:
            return
        # Issue 8: a stable identity from the work directory, so a restart takes its jobs back at once.
        self.identity = await anyio.to_thread.run_sync(claim_identity, self.settings.work_dir)
        cap = self.settings.max_concurrency_per_installation or None
        self.workers = WorkerPool(
            JobQueue(self.store, max_per_installation=cap, capped_kinds=frozenset({RUN_KIND, AUTO_REVIEW})),
            handler,
            concurrency=self.settings.concurrency,
            lease_seconds=self.settings.lease_seconds,
            job_timeout=self.settings.job_timeout,
            poll_interval=self.settings.queue_poll_interval,
            observer=self.metrics.observe_run,
            worker_id=self.identity.id,
            shutdown_grace=self.settings.shutdown_grace,
            on_gave_up=getattr(handler, "gave_up", None),
            periodic=getattr(handler, "periodic", None),
            periodic_interval=self.settings.sweep_interval,
        )
        self.intake.notify = self.workers.notify
        self._task_group.start_soon(self._run_workers, self.workers)
        self._start_redelivery(credentials)
        # The process that acts as the App checks its credentials, at start and then periodically.
        self.credentials_check = CredentialsCheck()
        if self.github is not None:
            self._task_group.start_soon(
                self._background,
                self.credentials_check.run,
                self.github,
                self.settings.github_api_url,
                credentials,
            )

    def _start_redelivery(self, credentials: AppCredentials) -> None:
        """Issue 32: deliveries missed while no process answered are asked again of GitHub, by
        whichever process holds the sweep's lease (BEAM_REDELIVERY_INTERVAL 0 turns it off)."""
        settings = self.settings
        if settings.redelivery_interval <= 0 or self.github is None or self.store is None:
            return
        if self._task_group is None:
            return
        api = GitHubApi(self.github, base_url=settings.github_api_url, stats=self.metrics.github_stats)
        self.redelivery = RedeliverySweep(
            GitHubApp(api, credentials.app_id, credentials.private_key),
            self.store,
            self.metrics,
            interval=settings.redelivery_interval,
            lookback=settings.redelivery_lookback,
            owner=self.identity.id if self.identity is not None else None,
        )
        self._task_group.start_soon(self._background, self.redelivery.run)

    async def _background(self, function: Callable[..., Awaitable[None]], *args: Any) -> None:
        """A periodic task (pruning, the credentials check) that ends when the app shuts down."""
        if self._shutting_down:  # started just as the app stops: its scope would never be cancelled
            return
        with anyio.CancelScope() as scope:
            self._background_scopes.append(scope)
            await function(*args)

    async def _run_workers(self, workers: WorkerPool) -> None:
        self._workers_running = True
        try:
            await workers.run()
        finally:
            self._workers_running = False
            if not self._shutting_down:
                log.error("the worker pool stopped unexpectedly; /readyz reports it")

    async def store_state(self) -> tuple[bool, str]:
        """(ok, detail) for /readyz: does the database accept a write now (can intake store)?"""
        return await self.store_probe.check(self.store, self._task_group)

    def workers_alive(self) -> bool:
        return self._workers_running

    def workers_state(self) -> tuple[bool, str]:
        """(ok, detail) for /readyz: a pool that should run must be running."""
        expected = self.mode == "normal" and (self._handler is not None or self._handler_factory is not None)
        if self._workers_running:
            return True, f"running ({self.settings.concurrency})"
        if expected:
            return False, "not running"
        return True, "not run by this process"

    async def database_ok(self) -> bool:
        if self.store is None:
            return False
        try:
            async with self.store.read() as conn:
                await conn.execute(sqlalchemy.text("SELECT 1"))
        except Exception:
            log.exception("health check: the database did not answer")
            return False
        return True


def create_app(
    settings: Settings,
    *,
    handler: JobHandler | None = None,
    handler_factory: HandlerFactory | None = None,
    github_transport: httpx.AsyncBaseTransport | None = None,
) -> Starlette:
    """The beam-bot web app. Workers run only with `handler` (or `handler_factory`, called with the
    runtime once the App has credentials, for handlers that need the GitHub client or the store)."""
    runtime = AppRuntime(
        settings, handler=handler, handler_factory=handler_factory, github_transport=github_transport
    )

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        # The proxy channel is read by `serve` only (this app), never by `beam-bot worker`.
        deliver = intake_deliverer(runtime.intake.answer)
        async with runtime.running(), proxy_running(settings.webhook_proxy_url, deliver) as proxy:
            app.state.webhook_proxy = proxy
            yield

    async def index(request: Request) -> Response:
        if runtime.mode == "setup":
            return await runtime.setup.page(request)
        creds = runtime.credentials
        assert creds is not None
        name = html.escape(creds.slug or f"App {creds.app_id}")
        workers = "running" if runtime.workers is not None else "not started in this process"
        install = install_url(settings, creds.slug)
        install_html = f'<p><a href="{html.escape(install)}">Install the App</a></p>' if install else ""
        return status_page(
            f"<p>Serving the GitHub App <b>{name}</b>. Workers: {workers}.</p>{install_html}"
            '<p><a href="/dashboard">/dashboard</a> · <a href="/healthz">/healthz</a> · '
            '<a href="/metrics">/metrics</a></p>'
        )

    async def setup_callback(request: Request) -> Response:
        return await runtime.setup.callback(request)

    async def healthz(request: Request) -> Response:
        if await runtime.database_ok():
            return JSONResponse({"status": "ok", "mode": runtime.mode})
        return JSONResponse({"status": "error", "mode": runtime.mode, "detail": "database"}, status_code=503)

    async def readyz(request: Request) -> Response:
        ok, body = readiness(
            mode=runtime.mode,
            store=await runtime.store_state(),
            workers=runtime.workers_state(),
            credentials=runtime.credentials_check,
            jail=await anyio.to_thread.run_sync(checks_detail),
        )
        return JSONResponse(body, status_code=200 if ok else 503)

    async def metrics(request: Request) -> Response:
        """/metrics on the public port: only with BEAM_METRICS_TOKEN, and only for its bearer."""
        token = settings.metrics_token
        if token is None:
            return PlainTextResponse("Not Found", status_code=404)
        if not bearer_matches(request.headers.get("authorization"), token.get_secret_value()):
            return PlainTextResponse(
                "/metrics needs the bearer token of BEAM_METRICS_TOKEN\n",
                status_code=401,
                headers={"WWW-Authenticate": 'Bearer realm="beam-bot metrics"'},
            )
        return await exposition(request)

    async def exposition(request: Request) -> Response:
        """The metrics themselves: behind the token above, or on BEAM_METRICS_LISTEN's own address."""
        stats = None
        usage = ""
        if runtime.store is not None:
            try:
                stats = await runtime.store.stats()
                # Tokens and cost by installation and skill (issue 11), from the database.
                usage = await usage_exposition(runtime.store, Policy.from_settings(runtime.settings).prices)
            except Exception:
                log.exception("metrics: the database did not answer")
        text = runtime.metrics.render(
            mode=runtime.mode, store_stats=stats, workers_alive=runtime.workers_alive()
        )
        text += usage
        return PlainTextResponse(text, media_type=CONTENT_TYPE)

    dashboard = Dashboard(runtime)
    app = _BeamApp(
        runtime.intake,
        routes=[
            Route("/webhooks", runtime.intake, methods=["POST"]),
            Route("/healthz", healthz, methods=["GET"]),
            Route("/readyz", readyz, methods=["GET"]),
            Route("/metrics", metrics, methods=["GET"]),
            Route("/", index, methods=["GET"]),
            Route("/setup/callback", setup_callback, methods=["GET"]),
            # Issue 44: the maintainers' page, behind "Sign in with GitHub" (bot/app/dashboard).
            *dashboard.routes(),
        ],
        lifespan=lifespan,
    )
    app.state.runtime = runtime
    app.state.dashboard = dashboard
    # Issue 32: BEAM_METRICS_LISTEN serves this app (only /metrics, no token) on an address of its own.
    app.state.metrics_app = Starlette(routes=[Route("/metrics", exposition, methods=["GET"])])
    return app


def bearer_matches(header: str | None, token: str) -> bool:
    """`Authorization: Bearer <token>`, compared in constant time."""
    scheme, _, given = (header or "").partition(" ")
    if scheme.lower() != "bearer" or not given:
        return False
    return hmac.compare_digest(given.strip().encode(), token.encode())


class _BeamApp(Starlette):
    """Starlette, with `POST /webhooks` handed to intake before Starlette's middleware and router.

    Those cost a bare endpoint a third of its time per request (bench/intake.py), and the webhook
    path is the one GitHub calls for every comment of every installed repository. The route stays
    in the router for every other method (405) and for a server mounted under a root path.
    """

    def __init__(self, webhooks: ASGIApp, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._webhooks = webhooks

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] == "http"
            and scope["method"] == "POST"
            and scope["path"] == "/webhooks"
            and not scope.get("root_path")
        ):
            await self._webhooks(scope, receive, send)
            return
        await super().__call__(scope, receive, send)


def _secret(value: SecretStr | None) -> str | None:
    return None if value is None else str(value.get_secret_value())


def _prepare_work_dir(settings: Settings) -> None:
    ensure_work_dir(settings.work_dir)
    if settings.runs_dir is not None:
        settings.runs_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
