"""How beam-bot connects: database URLs, and engines set up so SQLite is safe under concurrency.

SQLite needs three things when several tasks and processes share one file: WAL (readers never block
the writer), a busy timeout (a second process waits for the write lock instead of failing), and write
transactions opened with `BEGIN IMMEDIATE` (a transaction that reads then writes cannot be overtaken
between the two). sqlite3's own transaction handling is switched off (`isolation_level=None`) and the
"begin" hook emits BEGIN or BEGIN IMMEDIATE, chosen per connection by the `BEGIN_MODE` option.

Besides the async engine, SQLite gets a small sync engine on the same file for the webhook path: one
thread hop runs a whole transaction there, where the async adapter pays a hop per cursor operation
(about four times the latency, measured).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

BUSY_TIMEOUT_MS = 10_000
WAL_SAFETY_PAGES = 16_000  # 64 MB of 4 KB pages: see checkpoint.py
BEGIN_MODE = "beam_sqlite_begin"


def normalize_url(url: str) -> str:
    """Map the URLs people write (`postgres://`, `postgresql://`, `sqlite:///`) to our async drivers."""
    parsed = make_url(url)
    backend, _, driver = parsed.drivername.partition("+")
    if backend in ("postgres", "postgresql"):
        if driver not in ("", "asyncpg"):
            raise ValueError(
                f"unsupported PostgreSQL driver {driver!r}: use postgresql:// or postgresql+asyncpg://"
            )
        parsed = parsed.set(drivername="postgresql+asyncpg")
    elif backend == "sqlite":
        if driver not in ("", "aiosqlite"):
            raise ValueError(f"unsupported SQLite driver {driver!r}: use sqlite:/// or sqlite+aiosqlite:///")
        if parsed.database in (None, "", ":memory:"):
            raise ValueError("an in-memory SQLite database cannot be shared by workers: give a file path")
        parsed = parsed.set(drivername="sqlite+aiosqlite")
    else:
        raise ValueError(f"unsupported database {backend!r}: use sqlite:///path or postgresql://...")
    return parsed.render_as_string(hide_password=False)


def build_url(database_url: str | None, work_dir: Path) -> str:
    """The configured URL, normalised, or the default SQLite file in the work directory."""
    if not database_url:
        return f"sqlite+aiosqlite:///{(work_dir / 'beam.db').absolute()}"
    return normalize_url(database_url)


def _sqlite_connect_args() -> dict[str, Any]:
    return {"isolation_level": None, "timeout": BUSY_TIMEOUT_MS / 1000, "check_same_thread": False}


def _install_sqlite_hooks(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        for pragma in (
            f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}",
            "PRAGMA journal_mode=WAL",
            # In WAL mode: durable across process crashes (not power loss), commits 8x cheaper.
            "PRAGMA synchronous=NORMAL",
            "PRAGMA foreign_keys=ON",
            # Checkpoints run on the store's own thread (checkpoint.py); this is only a safety net.
            f"PRAGMA wal_autocheckpoint={WAL_SAFETY_PAGES}",
        ):
            cursor.execute(pragma)
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        immediate = conn.get_execution_options().get(BEGIN_MODE) == "immediate"
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


def create_engines(url: str) -> tuple[AsyncEngine, Engine | None]:
    """The async engine, and for SQLite the sync engine of the webhook path (None for PostgreSQL)."""
    parsed: URL = make_url(normalize_url(url))
    if parsed.get_backend_name() != "sqlite":
        return create_async_engine(parsed, pool_recycle=1800), None
    engine = create_async_engine(parsed, connect_args=_sqlite_connect_args())
    _install_sqlite_hooks(engine.sync_engine)
    sync_engine = create_engine(
        parsed.set(drivername="sqlite+pysqlite"), connect_args=_sqlite_connect_args(), pool_size=2
    )
    _install_sqlite_hooks(sync_engine)
    return engine, sync_engine
