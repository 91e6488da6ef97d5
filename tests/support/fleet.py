"""Crash tests' bot fleet: `beam-bot serve` alone (SQLite) or beside `beam-bot worker` processes
(PostgreSQL), killed with SIGKILL at a chosen effect boundary and started again.

Boundaries: `before` and `after` come from the bot itself (`BEAM_TEST_CRASH_AT`, bot/app/effects/
crash.py); `during` is done here: the fake GitHub acts on the call, then every bot process is killed
before the answer is sent, so the write exists and no process ever read its answer.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import signal
import subprocess
import sys
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import select
from sqlalchemy.engine import make_url

from bot.app.jobs.schema import jobs, runs
from bot.app.jobs.store import Store
from tests.support.bot_process import BotProcess, wait_for
from tests.support.fake_github import Call

CRASH_ENV = "BEAM_TEST_CRASH_AT"
T = TypeVar("T")


def in_own_loop(fn: Callable[[], Awaitable[T]]) -> T:
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, fn()).result()  # type: ignore[arg-type]


@contextlib.contextmanager
def fresh_pg_database(session_url: str) -> Iterator[str]:
    """A PostgreSQL database of its own for one test (the bot processes create its tables)."""
    import asyncpg

    name = f"beam_crash_{uuid.uuid4().hex[:10]}"
    admin = make_url(session_url).set(drivername="postgresql", database="postgres")
    dsn = admin.render_as_string(hide_password=False)

    async def execute(statement: str) -> None:
        conn = await asyncpg.connect(dsn)
        try:
            await conn.execute(statement)
        finally:
            await conn.close()

    in_own_loop(lambda: execute(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(session_url).set(database=name).render_as_string(hide_password=False)
    finally:
        in_own_loop(lambda: execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@dataclass
class Fleet:
    bot: BotProcess
    workers: int = 0
    database_url: str | None = None
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    logs: list[Path] = field(default_factory=list)

    @property
    def store_url(self) -> str:
        return self.database_url or f"sqlite:///{self.bot.work_dir / 'beam.db'}"

    def start(self, crash: str | None = None) -> None:
        """serve, then the workers; with `crash`, each of them dies at that boundary."""
        if crash is None:
            self.bot.extra_env.pop(CRASH_ENV, None)
        else:
            self.bot.extra_env[CRASH_ENV] = crash
        if self.database_url is not None:
            self.bot.extra_env["BEAM_DATABASE_URL"] = self.database_url
        if self.bot.proc is None or self.bot.proc.poll() is not None:
            self.bot.start()
        alive = [p for p in self.procs if p.poll() is None]
        self.procs = alive
        while len(self.procs) < self.workers:
            log_path = self.bot.work_dir.parent / f"worker-{len(self.logs)}.log"
            self.logs.append(log_path)
            with log_path.open("wb") as log:
                self.procs.append(
                    subprocess.Popen(
                        [sys.executable, "-m", "bot.cli", "worker"],
                        env=self.bot.env(),
                        stdout=log,
                        stderr=subprocess.STDOUT,
                    )
                )

    def all_procs(self) -> list[subprocess.Popen[bytes]]:
        return [p for p in [self.bot.proc, *self.procs] if p is not None]

    def any_died(self) -> bool:
        return any(p.poll() is not None for p in self.all_procs())

    def kill_all(self) -> None:
        for proc in self.all_procs():
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
        for proc in self.all_procs():
            proc.wait(10)

    def crash_and_restart(self, *, timeout: float = 40.0) -> None:
        """Wait for a process to die at its crash point; kill the rest; start all again, no crash."""
        wait_for(self.any_died, timeout=timeout, what=f"a bot process to crash\n{self.bot.log()[-3000:]}")
        self.kill_all()
        self.start(None)

    def kill_during(self, matches: Callable[[Call], bool]) -> None:
        """Kill every bot process once GitHub has acted on the first call that `matches`."""
        fired: list[Call] = []

        def hook(call: Call) -> None:
            if not fired and 200 <= call.status < 300 and matches(call):
                fired.append(call)
                self.kill_all()

        self.bot.fake.on_answered.append(hook)

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(5)
        self.bot.stop()

    def log(self) -> str:
        text = self.bot.log()
        for path in self.logs:
            text += "\n" + path.read_text(errors="replace") if path.exists() else ""
        return text

    # -- what the database says -------------------------------------------------------------------

    def rows(self, table: Any) -> list[dict[str, Any]]:
        async def read() -> list[dict[str, Any]]:
            store = await Store.open(self.store_url)
            try:
                async with store.read() as conn:
                    return [dict(r._mapping) for r in await conn.execute(select(table))]
            finally:
                await store.close()

        return in_own_loop(read)

    def jobs_done(self) -> bool:
        # A command's delivery job, and the `run` job it admitted (issue 11).
        states = [row["state"] for row in self.rows(jobs) if row["kind"] in ("delivery", "run")]
        return bool(states) and all(state == "done" for state in states)

    def run_rows(self) -> list[dict[str, Any]]:
        return self.rows(runs)


@contextlib.contextmanager
def fleet_on(request: Any, bot: BotProcess) -> Iterator[Fleet]:
    """The crash tests' two set-ups, by the fixture's param: "sqlite", `serve` alone; "postgres", a
    database of its own with `serve` and two `beam-bot worker` processes."""
    if request.param == "sqlite":
        fleet = Fleet(bot)
        try:
            yield fleet
        finally:
            fleet.stop()
        return
    with fresh_pg_database(request.getfixturevalue("pg_database_url")) as url:
        fleet = Fleet(bot, workers=2, database_url=url)
        try:
            yield fleet
        finally:
            fleet.stop()
