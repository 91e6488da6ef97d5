"""Checks run before `serve` or `worker` starts the app, so a wrong setup is one clear line, not a traceback.

Each check raises `SettingsError` with a message that says what is wrong and how to fix it: the work
directory cannot be written, the database URL cannot be parsed, its driver is not installed, the
database cannot be reached or is from a newer beam-bot, or the port is taken. The listening socket is
bound here and handed to uvicorn, so "the port is free" cannot change between the check and the bind.
"""

from __future__ import annotations

import errno
import importlib
import os
import socket
import tempfile
from collections.abc import Mapping

import anyio
from sqlalchemy.engine import make_url

from bot.app.jobs.offline import describe
from bot.app.jobs.store import Store, build_url
from bot.app.settings import Settings, SettingsError, ensure_work_dir
from bot.beam import providers
from bot.beam.errors import BeamError
from bot.beam.model_env import DEFAULT_BASE_URL, DEFAULT_MODEL, read_model_env

DATABASE_TIMEOUT = 15.0
_LOOPBACK_NAMES = {"0.0.0.0": "localhost", "::": "localhost", "": "localhost"}  # noqa: S104


def browse_url(settings: Settings) -> str:
    """The address to open in a browser: BEAM_PUBLIC_URL, else the bound one (never 0.0.0.0)."""
    if settings.public_url:
        return settings.public_url
    host = _LOOPBACK_NAMES.get(settings.host, settings.host)
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{settings.port}"


def safe_database_url(settings: Settings) -> str:
    """The database URL for messages: the password hidden; the default SQLite file spelled out."""
    secret = settings.database_url.get_secret_value() if settings.database_url else None
    try:
        return describe(build_url(secret, settings.work_dir))
    except Exception:
        return "(unparseable BEAM_DATABASE_URL)"


def describe_model(env: Mapping[str, str] | None = None) -> str:
    """The LLM for the start-up log: provider URL, model, and whether a key is set (never the key).
    Read as the client reads it (`read_model_env`), so a provider's own key (OPENAI_API_KEY...) is
    named with the provider's URL; a wrong value is left to the client's start to report."""
    env = os.environ if env is None else env
    try:
        said = read_model_env(env)
        if said is None:
            # Where the seed's variables would send a key (an empty BEAM_API_KEY stops any other).
            would = read_model_env({**env, "BEAM_API_KEY": "-"})
            where = (
                f"{would.model} at {would.base_url}" if would else f"{DEFAULT_MODEL} at {DEFAULT_BASE_URL}"
            )
            return f"model: the echo model (no API key set; with BEAM_API_KEY: {where})"
    except BeamError as error:
        return f"model: not usable ({error})"
    if said.provider is providers.OLLAMA:
        return f"model: {said.model} at {said.base_url} (Ollama, from {said.key_var}; no key)"
    from_var = "" if said.provider is None else f": {said.key_var}"
    return f"model: {said.model} at {said.base_url} (API key set{from_var})"


def check_work_dir(settings: Settings) -> None:
    for path, name in ((settings.work_dir, "BEAM_WORK_DIR"), (settings.runs_dir, "BEAM_RUNS_DIR")):
        if path is None:
            continue
        try:
            ensure_work_dir(path) if name == "BEAM_WORK_DIR" else path.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryFile(dir=path):
                pass
        except OSError as exc:
            raise SettingsError(
                f"{name}: cannot write to {path} ({exc.strerror or exc}); "
                f"choose a directory this user can write, or fix its permissions"
            ) from None


def _has_postgres_driver() -> bool:
    try:
        importlib.import_module("asyncpg")
    except ImportError:
        return False
    return True


def check_database_url(settings: Settings) -> str:
    secret = settings.database_url.get_secret_value() if settings.database_url else None
    try:
        url = build_url(secret, settings.work_dir)
    except Exception as exc:
        raise SettingsError(f"BEAM_DATABASE_URL: {exc}") from None
    if make_url(url).get_backend_name() == "postgresql" and not _has_postgres_driver():
        raise SettingsError(
            "BEAM_DATABASE_URL is a PostgreSQL URL but its driver is not installed: "
            'pip install "beam-bot[postgres]"'
        )
    return url


async def check_database(settings: Settings) -> None:
    """Opens the database (creating or upgrading its tables, as the app would) and closes it again."""
    url = check_database_url(settings)
    where = safe_database_url(settings)
    try:
        with anyio.fail_after(DATABASE_TIMEOUT):
            store = await Store.open(url)
            await store.close()
    except TimeoutError:
        raise SettingsError(
            f"cannot reach the database {where}: no answer in {DATABASE_TIMEOUT:g} s"
        ) from None
    except Exception as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise SettingsError(f"cannot open the database {where}: {reason}") from None


def bind_socket(host: str, port: int) -> socket.socket:
    """The listening socket uvicorn will serve on, bound now so a taken port is a clear error."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise SettingsError(f"BEAM_HOST: cannot bind to {host!r}: {exc.strerror}") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise SettingsError(
                f"port {port} on {host} is already in use: stop the other server or choose another "
                "port with --port or BEAM_PORT"
            ) from None
        raise SettingsError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.set_inheritable(True)
    return sock


def preflight(settings: Settings) -> None:
    """Every check but the port: the work directory, the database URL, and the database itself."""
    check_work_dir(settings)
    check_database_url(settings)
    anyio.run(check_database, settings)
