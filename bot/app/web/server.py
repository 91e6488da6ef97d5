"""Process entry points the CLI calls: `serve` (uvicorn + the app) and `run_worker` (workers only).

`serve` runs uvicorn on uvloop (event loop) and httptools (HTTP parser), from `uvicorn[standard]`:
about twice the requests per core of asyncio + h11. uvicorn's access log is off: it costs about a
quarter of the webhook throughput (ARCHITECTURE section 9); intake counts every delivery in /metrics
and logs it at DEBUG, without the body or the signature.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
import socket
from collections.abc import Iterator

import anyio
import httpx
import uvicorn
from starlette.applications import Starlette

from bot import package_version
from bot.app.credentials.stored import load_app_credentials
from bot.app.jobs.store import Store, build_url
from bot.app.logs import configure_logging
from bot.app.settings import Settings
from bot.app.web.app import AppRuntime, HandlerFactory, JobHandler, create_app
from bot.app.web.limits import header_timeout_protocol
from bot.app.web.preflight import (
    bind_socket,
    browse_url,
    check_work_dir,
    describe_model,
    preflight,
    safe_database_url,
)

__all__ = ["configure_logging", "run_worker", "serve"]

log = logging.getLogger("beam.server")


def _start(settings: Settings) -> None:
    """Logging as configured, then every check that can fail before the app runs (SettingsError)."""
    configure_logging(settings.log_level, settings.log_format)
    check_work_dir(settings)
    preflight(settings)
    # Stored credentials that are damaged or sealed with another key: a clear error before any port opens.
    anyio.run(_check_credentials, settings)


async def _check_credentials(settings: Settings) -> None:
    secret = settings.database_url.get_secret_value() if settings.database_url else None
    store = await Store.open(build_url(secret, settings.work_dir))
    try:
        await load_app_credentials(settings, store)
    finally:
        await store.close()


def _describe(settings: Settings) -> None:
    log.info("beam-bot %s; database: %s", package_version(), safe_database_url(settings))
    log.info("%s", describe_model())


def settle_garbage_collector() -> None:
    """Move everything loaded at start-up out of the collector's sight (`gc.freeze`).

    Each delivery allocates a parsed payload; the collections that follow used to walk every object
    of the loaded app too: a full one took about 70 ms of a busy server (the p99 of intake), now
    it walks only what was allocated since start-up.
    """
    gc.collect()
    gc.freeze()


def serve(
    settings: Settings,
    host: str | None = None,
    port: int | None = None,
    *,
    handler: JobHandler | None = None,
    handler_factory: HandlerFactory | None = None,
) -> None:
    """Runs the web app (and its workers, given a handler) until SIGINT or SIGTERM.

    `host` and `port` default to BEAM_HOST and BEAM_PORT. Damaged stored credentials, an unusable
    work directory or database, and a taken port raise `SettingsError` before the app runs.
    """
    settings = settings.model_copy(update={"host": host or settings.host, "port": port or settings.port})
    _start(settings)
    sock = bind_socket(settings.host, settings.port)
    app = create_app(settings, handler=handler, handler_factory=handler_factory)
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        access_log=False,
        log_config=None,
        lifespan="on",
        loop="uvloop",
        proxy_headers=False,
        server_header=False,
        # httptools (h11 only when it is missing), and issue 8: a slow client cannot hold a connection
        # without sending a request head, and the number of connections is bounded (more get 503).
        # Issue 32: a connection that sends nothing is closed after BEAM_IDLE_TIMEOUT, and one
        # address holds at most BEAM_PEER_SHARE of the connections.
        http=header_timeout_protocol(
            settings.header_timeout,
            idle=settings.idle_timeout,
            per_peer=max(1, int(settings.max_connections * settings.peer_share)),
        ),
        limit_concurrency=settings.max_connections,
    )
    server = uvicorn.Server(config)
    metrics = _metrics_server(settings, app)
    _describe(settings)
    log.info("listening on port %d; open %s/", settings.port, browse_url(settings))
    settle_garbage_collector()
    try:
        if metrics is None:
            server.run(sockets=[sock])
        else:
            with asyncio.Runner(loop_factory=config.get_loop_factory()) as runner:
                runner.run(_serve_both(server, sock, *metrics))
    finally:
        sock.close()
        if metrics is not None:
            metrics[1].close()
    if not server.started:
        raise SystemExit(1)


class _SecondServer(uvicorn.Server):
    """A second server in the process: the main one takes SIGINT and SIGTERM and stops this one."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def _metrics_server(settings: Settings, app: Starlette) -> tuple[uvicorn.Server, socket.socket] | None:
    """Issue 32: BEAM_METRICS_LISTEN, /metrics without a token on an address of its own (one a
    Prometheus on the private network reaches and the public does not)."""
    address = settings.metrics_address
    if address is None:
        return None
    sock = bind_socket(*address)
    config = uvicorn.Config(
        app.state.metrics_app,
        access_log=False,
        log_config=None,
        lifespan="off",
        proxy_headers=False,
        server_header=False,
        http=header_timeout_protocol(settings.header_timeout),
        limit_concurrency=64,
    )
    log.info("serving /metrics without a token on %s:%d (BEAM_METRICS_LISTEN)", *address)
    return _SecondServer(config), sock


async def _serve_both(
    server: uvicorn.Server, sock: socket.socket, metrics: uvicorn.Server, metrics_sock: socket.socket
) -> None:
    extra = asyncio.create_task(metrics.serve(sockets=[metrics_sock]))
    try:
        await server.serve(sockets=[sock])
    finally:
        metrics.should_exit = True
        await extra


def run_worker(
    settings: Settings,
    *,
    handler: JobHandler | None = None,
    handler_factory: HandlerFactory | None = None,
    github_transport: httpx.AsyncBaseTransport | None = None,
) -> None:
    """Runs only the worker pool (for more worker processes beside `serve`, on a shared database).

    Refuses to start without App credentials: registering the App is the web server's job.
    """
    if handler is None and handler_factory is None:
        raise ValueError("run_worker needs a job handler")
    _start(settings)
    _describe(settings)
    settle_garbage_collector()
    anyio.run(_worker_main, settings, handler, handler_factory, github_transport)


async def _worker_main(
    settings: Settings,
    handler: JobHandler | None,
    handler_factory: HandlerFactory | None,
    github_transport: httpx.AsyncBaseTransport | None,
) -> None:
    runtime = AppRuntime(
        settings,
        handler=handler,
        handler_factory=handler_factory,
        github_transport=github_transport,
        require_credentials=True,
    )
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with runtime.running():
            log.info("worker running with concurrency %d", settings.concurrency)
            async for signum in signals:
                log.info("worker stopping on %s", signal.Signals(signum).name)
                return
