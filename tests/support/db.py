"""Database fixtures: every store test runs on a real SQLite file and, when BEAM_TEST_POSTGRES_URL is
set, on a throwaway PostgreSQL database created for the session and dropped at its end.

tests/conftest.py registers this module with `pytest_plugins`, so every test can ask for `store`,
`db_url`, `clocked_store`, `fake_clock` or `empty_pg_url` by name without importing anything.

Run as `python -m tests.support.db claim URL LEASE`, this module is also the "second process" of the
claim tests: it opens its own Store, waits for "go" on stdin, claims and completes jobs until none is
left, and prints the id of every job it claimed.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import anyio
import pytest
from sqlalchemy.engine import make_url

from bot.app.jobs.queue import JobQueue
from bot.app.jobs.store import Clock, Store

PG_ENV = "BEAM_TEST_POSTGRES_URL"
PG_SKIP = "set BEAM_TEST_POSTGRES_URL to run against PostgreSQL"
REPO_ROOT = Path(__file__).resolve().parents[2]

T = TypeVar("T")


class FakeClock:
    """A clock the test moves by hand: leases and backoffs expire without sleeping."""

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def _in_own_loop(fn: Callable[[], Awaitable[T]]) -> T:
    # A private thread and loop: sync fixtures must not touch the event loop the anyio plugin runs.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, fn()).result()  # type: ignore[arg-type]


def _admin_dsn(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


async def _pg_execute(dsn: str, *statements: str) -> None:
    import asyncpg  # type: ignore[import-untyped]

    conn = await asyncpg.connect(dsn)
    try:
        for statement in statements:
            await conn.execute(statement)
    finally:
        await conn.close()


@pytest.fixture(scope="session", name="pg_database_url")
def pg_database_url_fixture() -> Iterator[str]:
    """A fresh database named at random, so parallel test runs never share tables."""
    base = os.environ.get(PG_ENV)
    if not base:
        pytest.skip(PG_SKIP)
    try:
        import asyncpg  # noqa: F401
    except ImportError:
        pytest.skip('the PostgreSQL driver is not installed: pip install -e ".[postgres]"')
    admin = _admin_dsn(base)
    name = f"beam_test_{uuid.uuid4().hex[:12]}"
    _in_own_loop(lambda: _pg_execute(admin, f'CREATE DATABASE "{name}"'))
    try:
        yield (
            make_url(admin)
            .set(drivername="postgresql+asyncpg", database=name)
            .render_as_string(hide_password=False)
        )
    finally:
        _in_own_loop(lambda: _pg_execute(admin, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.fixture(name="empty_pg_url")
def empty_pg_url_fixture(pg_database_url: str) -> str:
    """The session's PostgreSQL database, emptied for this test (every test of the run shares it)."""
    dsn = _admin_dsn(pg_database_url)
    _in_own_loop(lambda: _pg_execute(dsn, "DROP SCHEMA public CASCADE", "CREATE SCHEMA public"))
    return pg_database_url


@pytest.fixture(name="db_url", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url_fixture(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The URL of an empty database: a SQLite file, or the session's PostgreSQL database emptied."""
    if request.param == "sqlite":
        return f"sqlite+aiosqlite:///{tmp_path / 'beam.db'}"
    url: str = request.getfixturevalue("empty_pg_url")
    return url


@pytest.fixture(name="fake_clock")
def fake_clock_fixture() -> FakeClock:
    return FakeClock()


@contextlib.asynccontextmanager
async def opened(url: str, clock: Clock | None = None) -> AsyncIterator[Store]:
    store = await (Store.open(url) if clock is None else Store.open(url, clock=clock))
    try:
        yield store
    finally:
        await store.close()


@pytest.fixture(name="store")
async def store_fixture(db_url: str) -> AsyncIterator[Store]:
    """A store on the real clock (for worker tests, whose leases run in real time)."""
    async with opened(db_url) as s:
        yield s


@pytest.fixture(name="clocked_store")
async def clocked_store_fixture(db_url: str, fake_clock: FakeClock) -> AsyncIterator[Store]:
    """A store whose time the test moves with `fake_clock.advance`."""
    async with opened(db_url, fake_clock) as s:
        yield s


async def claim_all(queue: JobQueue, worker_id: str, lease: float, claimed: list[int]) -> None:
    """Claim and complete jobs until the queue has nothing claimable left."""
    while (job := await queue.claim(worker_id, lease)) is not None:
        claimed.append(job.id)
        assert await queue.complete(job)


async def _claimer_process(url: str, lease: float) -> None:
    async with opened(url) as store:
        queue = JobQueue(store)
        print("ready", flush=True)
        await anyio.to_thread.run_sync(sys.stdin.readline)
        claimed: list[int] = []
        await claim_all(queue, f"process-{os.getpid()}", lease, claimed)
        print("\n".join(str(i) for i in claimed), flush=True)
        print("end", flush=True)


def claimer_command(url: str, lease: float) -> list[str]:
    return [sys.executable, "-m", "tests.support.db", "claim", url, str(lease)]


def main(argv: list[str]) -> Any:
    if len(argv) != 3 or argv[0] != "claim":
        raise SystemExit("usage: python -m tests.support.db claim URL LEASE")
    anyio.run(_claimer_process, argv[1], float(argv[2]))


if __name__ == "__main__":
    main(sys.argv[1:])
