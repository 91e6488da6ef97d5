"""Retention on real SQLite and PostgreSQL: old deliveries, finished jobs and runs go; held pushes stay;
the effects journal goes once no job that may still run is as old as it; usage counters of periods
long past go."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from sqlalchemy import insert, select, update

from bot.app.jobs.retention import DAY, prune
from bot.app.jobs.schema import (
    deliveries,
    effects,
    jobs,
    pending_pushes,
    run_checkpoints,
    runs,
    usage_counters,
)
from bot.app.jobs.store import Store
from bot.app.settings import Settings
from tests.support.db import (  # noqa: F401 - fixtures
    FakeClock,
    clocked_store_fixture,
    db_url_fixture,
    fake_clock_fixture,
    opened,
    pg_database_url_fixture,
)
from tests.support.web_app import running_app, store_of

OLD = 40 * DAY
RECENT = 2 * DAY


async def seed(store: Store, now: float) -> None:
    """Four stories: a finished old one, an old held push, an old job still queued, a recent one."""

    def delivery(delivery_id: str, age: float) -> dict[str, Any]:
        return {
            "delivery_id": delivery_id,
            "event": "issue_comment",
            "action": "created",
            "received_at": now - age,
            "payload": '{"body": "x"}',
        }

    def job(job_id: int, delivery_id: str, state: str, age: float) -> dict[str, Any]:
        return {
            "id": job_id,
            "kind": "command",
            "delivery_id": delivery_id,
            "key": f"octo/repo#{job_id}",
            "state": state,
            "run_after": now - age,
            "created_at": now - age,
            "updated_at": now - age,
        }

    def run(run_id: str, job_id: int, status: str, age: float) -> dict[str, Any]:
        return {
            "id": run_id,
            "job_id": job_id,
            "repo": "octo/repo",
            "number": job_id,
            "skill": "review",
            "status": status,
            "created_at": now - age,
            "finished_at": now - age,
        }

    async with store.write() as conn:
        await conn.execute(
            insert(deliveries),
            [
                delivery("old-done", OLD),
                delivery("old-held", OLD),
                delivery("old-queued", OLD),
                delivery("recent", RECENT),
                delivery("old-alone", OLD),
            ],
        )
        await conn.execute(
            insert(jobs),
            [
                job(1, "old-done", "done", OLD),
                job(2, "old-held", "done", OLD),
                job(3, "old-queued", "queued", OLD),
                job(4, "recent", "done", RECENT),
            ],
        )
        await conn.execute(
            insert(runs),
            [
                run("run-1", 1, "succeeded", OLD),
                run("run-2", 2, "interrupted", OLD),
                run("run-4", 4, "failed", RECENT),
            ],
        )
        await conn.execute(
            insert(pending_pushes).values(
                id="push-2",
                run_id="run-2",
                repo="octo/repo",
                number=2,
                state="rejected",
                created_at=now - OLD,
            )
        )


async def column(store: Store, table: Any, name: str) -> set[Any]:
    async with store.read() as conn:
        return set((await conn.execute(select(table.c[name]))).scalars())


@pytest.mark.anyio
async def test_prune_keeps_held_pushes_and_unfinished_work(
    clocked_store: Store, fake_clock: FakeClock
) -> None:
    await seed(clocked_store, fake_clock())
    pruned = await prune(clocked_store, 30)
    assert (pruned.runs, pruned.jobs, pruned.deliveries) == (1, 1, 2)
    assert await column(clocked_store, runs, "id") == {"run-2", "run-4"}
    assert await column(clocked_store, jobs, "id") == {2, 3, 4}
    assert await column(clocked_store, deliveries, "delivery_id") == {"old-held", "old-queued", "recent"}
    assert await column(clocked_store, pending_pushes, "id") == {"push-2"}
    async with clocked_store.read() as conn:
        payloads = dict((await conn.execute(select(deliveries.c.delivery_id, deliveries.c.payload))).all())
    # The held push's delivery row stays for the audit trail, without its body; a queued job keeps its
    # body; a recent delivery is untouched.
    assert payloads == {"old-held": "", "old-queued": '{"body": "x"}', "recent": '{"body": "x"}'}
    assert pruned.payloads == 1

    again = await prune(clocked_store, 30)
    assert again.total == 0
    # Time passes: the recent story ages out too; the held push never does.
    fake_clock.advance(60 * DAY)
    await prune(clocked_store, 30)
    assert await column(clocked_store, runs, "id") == {"run-2"}
    assert await column(clocked_store, pending_pushes, "id") == {"push-2"}


@pytest.mark.anyio
async def test_zero_days_prunes_nothing(clocked_store: Store, fake_clock: FakeClock) -> None:
    await seed(clocked_store, fake_clock())
    assert (await prune(clocked_store, 0)).total == 0
    assert len(await column(clocked_store, runs, "id")) == 3


@pytest.mark.anyio
async def test_the_server_prunes_by_itself(tmp_path: Path) -> None:
    settings = Settings(_env_file=None, work_dir=tmp_path / "work", retention_days=30, prune_interval=0.1)
    async with running_app(settings) as (app, _):
        store = store_of(app)
        await seed(store, store.clock())
        with anyio.fail_after(20):
            while "run-1" in await column(store, runs, "id"):
                await anyio.sleep(0.05)
        assert await column(store, pending_pushes, "id") == {"push-2"}


def test_beam_bot_prune_on_demand(tmp_path: Path) -> None:
    work = tmp_path / "work"
    env = {k: v for k, v in os.environ.items() if not k.startswith("BEAM_")}
    env["BEAM_WORK_DIR"] = str(work)

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "bot.cli", "prune", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    nothing = cli()
    assert nothing.returncode == 0, nothing.stderr
    assert f"no database at {work / 'beam.db'}" in nothing.stdout
    assert not (work / "beam.db").exists()  # looking never creates a database

    async def make() -> None:
        async with opened(f"sqlite+aiosqlite:///{work / 'beam.db'}") as store:
            await seed(store, store.clock())

    anyio.run(make)
    done = cli("--days", "30")
    assert done.returncode == 0, done.stderr
    assert (
        "Pruned 1 runs, 1 jobs, 2 deliveries, 1 delivery payloads, 0 journal rows and 0 usage counters "
        "older than 30 days "
        f"from SQLite database {work / 'beam.db'}" in done.stdout
    )

    async def remaining() -> set[Any]:
        async with opened(f"sqlite+aiosqlite:///{work / 'beam.db'}") as store:
            return await column(store, runs, "id")

    assert anyio.run(remaining) == {"run-2", "run-4"}


async def seed_journal(store: Store, now: float) -> None:
    """Journal rows and checkpoints written 45, 40 and 2 days ago (the seed's queued job is 40 days
    old), and usage counters of days and months around what is kept (FakeClock: 2027-01-15)."""
    ages = {"45d": 45 * DAY, "40d": 40 * DAY, "2d": RECENT}
    async with store.write() as conn:
        await conn.execute(
            insert(effects),
            [
                {
                    "key": f"run-{name}:tracking",
                    "kind": "comment",
                    "state": "done",
                    "result": {"id": 1},
                    "created_at": now - age,
                    "updated_at": now - age,
                }
                for name, age in ages.items()
            ],
        )
        await conn.execute(
            insert(run_checkpoints),
            [
                {"run_id": f"run-{name}", "rounds": 1, "messages": [], "updated_at": now - age}
                for name, age in ages.items()
            ],
        )
        periods = ["2026-10-16", "2026-10-17", "2027-01-15", "2025-11", "2025-12", "2027-01"]
        await conn.execute(
            insert(usage_counters),
            [
                {"scope": scope, "period": p, "amount": 3}
                for p in periods
                for scope in ("repo:o/r", "installation:1")
            ],
        )


@pytest.mark.anyio
async def test_the_journal_goes_once_no_job_that_may_still_run_is_as_old(
    clocked_store: Store, fake_clock: FakeClock
) -> None:
    await seed(clocked_store, fake_clock())
    await seed_journal(clocked_store, fake_clock())
    pruned = await prune(clocked_store, 30)
    # The 40-day-old job still queued may read what was written since a day before it was queued.
    assert pruned.journal == 2
    assert await column(clocked_store, effects, "key") == {"run-40d:tracking", "run-2d:tracking"}
    assert await column(clocked_store, run_checkpoints, "run_id") == {"run-40d", "run-2d"}
    assert (await prune(clocked_store, 30)).journal == 0

    async with clocked_store.write() as conn:  # the old job ends at last
        await conn.execute(update(jobs).where(jobs.c.id == 3).values(state="done", updated_at=fake_clock()))
    assert (await prune(clocked_store, 30)).journal == 2
    assert await column(clocked_store, effects, "key") == {"run-2d:tracking"}
    assert await column(clocked_store, run_checkpoints, "run_id") == {"run-2d"}


@pytest.mark.anyio
async def test_usage_counters_of_periods_long_past_go(clocked_store: Store, fake_clock: FakeClock) -> None:
    await seed_journal(clocked_store, fake_clock())
    pruned = await prune(clocked_store, 30)
    # Days older than 90 days and months begun more than 13 months before this one go; the limits
    # read only today and this month.
    assert pruned.counters == 4
    assert await column(clocked_store, usage_counters, "period") == {
        "2026-10-17",
        "2027-01-15",
        "2025-12",
        "2027-01",
    }
    assert (await prune(clocked_store, 30)).counters == 0
    # A longer retention keeps them longer.
    fake_clock.advance(40 * DAY)
    assert (await prune(clocked_store, 400)).counters == 0
    assert (await prune(clocked_store, 30)).counters == 4
    assert await column(clocked_store, usage_counters, "period") == {"2027-01-15", "2027-01"}
