"""Process entry points the CLI calls: `serve` (uvicorn + the app) and `run_worker` (workers only).

uvicorn's access log is off: it costs about a quarter of the webhook throughput (ARCHITECTURE
section 9), and intake logs each delivery itself in one line without the body or the signature.
"""

from __future__ import annotations

import logging
import signal

import anyio
import anyio.to_thread
import httpx
import uvicorn

from bot.app.settings import Settings, SettingsError, load_credentials
from bot.app.web.app import AppRuntime, HandlerFactory, JobHandler, create_app
from bot.app.web.limits import header_timeout_protocol

log = logging.getLogger(__name__)


def configure_logging(level: int = logging.INFO) -> None:
    """One line per record on stderr, unless the host program configured logging already."""
    root = logging.getLogger()
    if not root.handlers:
        logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def serve(
    settings: Settings,
    host: str | None = None,
    port: int | None = None,
    *,
    handler: JobHandler | None = None,
    handler_factory: HandlerFactory | None = None,
) -> None:
    """Runs the web app (and its workers, given a handler) until SIGINT or SIGTERM.

    `host` and `port` default to BEAM_HOST and BEAM_PORT. Damaged stored credentials raise
    `SettingsError` before a port is opened; a failing lifespan (an unreachable database) makes
    uvicorn exit (SystemExit 3) instead of serving.
    """
    configure_logging()
    load_credentials(settings)  # damaged stored credentials: a clear SettingsError before any port opens
    app = create_app(settings, handler=handler, handler_factory=handler_factory)
    config = uvicorn.Config(
        app,
        host=host or settings.host,
        port=port or settings.port,
        access_log=False,
        log_config=None,
        lifespan="on",
        proxy_headers=False,
        server_header=False,
        # Issue 8: a slow client cannot hold a connection without sending a request head, and the
        # number of connections is bounded (more get 503).
        http=header_timeout_protocol(settings.header_timeout),
        limit_concurrency=settings.max_connections,
    )
    server = uvicorn.Server(config)
    server.run()
    if not server.started:
        raise SystemExit(1)


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
    configure_logging()
    if handler is None and handler_factory is None:
        raise ValueError("run_worker needs a job handler")
    anyio.run(_worker_main, settings, handler, handler_factory, github_transport)


async def _worker_main(
    settings: Settings,
    handler: JobHandler | None,
    handler_factory: HandlerFactory | None,
    github_transport: httpx.AsyncBaseTransport | None,
) -> None:
    runtime = AppRuntime(
        settings, handler=handler, handler_factory=handler_factory, github_transport=github_transport
    )
    if await anyio.to_thread.run_sync(load_credentials, settings) is None:
        raise SettingsError(
            "the worker has no GitHub App credentials: set BEAM_APP_ID, BEAM_PRIVATE_KEY and "
            "BEAM_WEBHOOK_SECRET, or register the App with `beam-bot serve` first"
        )
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with runtime.running():
            log.info("worker running with concurrency %d", settings.concurrency)
            async for signum in signals:
                log.info("worker stopping on %s", signal.Signals(signum).name)
                return
