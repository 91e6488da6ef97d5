"""Fair claims: installations take turns, a busy one cannot starve another, and the per-installation
cap on skill runs holds when several stores (as several processes would) claim at once."""

from __future__ import annotations

import re

import anyio
import pytest
from sqlalchemy import func, select, text

from bot.app.jobs import pg_claims, rollups
from bot.app.jobs.fairness import fair_statements
from bot.app.jobs.migrations import DASHBOARD_INDEXES
from bot.app.jobs.queue import JobQueue
from bot.app.jobs.schema import installation_turns, jobs, schema_version
from bot.app.jobs.store import Store
from tests.support.db import FakeClock, opened

pytestmark = pytest.mark.anyio
LEASE = 30.0
RUN = frozenset({"run"})


async def claim_order(queue: JobQueue) -> list[int]:
    """Installations in the order their jobs were claimed (and completed at once)."""
    order: list[int] = []
    while (job := await queue.claim("w", LEASE)) is not None:
        order.append(job.installation_id)
        assert await queue.complete(job)
    return order


async def test_installations_take_turns_oldest_job_first(clocked_store: Store) -> None:
    queue = JobQueue(clocked_store)
    a_jobs = [await queue.enqueue("work", f"a#{n}", installation_id=1) for n in range(6)]
    b_jobs = [await queue.enqueue("work", f"b#{n}", installation_id=2) for n in range(2)]
    claimed: list[int] = []
    while (job := await queue.claim("w", LEASE)) is not None:
        claimed.append(job.id)
        assert await queue.complete(job)
    # A's six jobs were queued first, yet B's two come second and fourth.
    assert claimed == [a_jobs[0], b_jobs[0], a_jobs[1], b_jobs[1], *a_jobs[2:]]


async def test_a_delivery_brings_its_installation_from_intake(clocked_store: Store) -> None:
    for n in range(4):
        body = f'{{"n": {n}}}'.encode()
        assert await clocked_store.accept_delivery(
            f"a-{n}", "issue_comment", "created", body, f"a#{n}", installation_id=11
        )
    assert await clocked_store.accept_delivery(
        "b-0", "issue_comment", "created", b"{}", "b#0", installation_id=22
    )
    order = await claim_order(JobQueue(clocked_store))
    assert order == [11, 22, 11, 11, 11]


async def test_an_installation_at_its_cap_waits_and_its_deliveries_still_run(clocked_store: Store) -> None:
    queue = JobQueue(clocked_store, max_per_installation=1, capped_kinds=RUN)
    a_runs = [await queue.enqueue("run", f"a#{n}:run", installation_id=1) for n in range(3)]
    b_run = await queue.enqueue("run", "b#1:run", installation_id=2)
    a_delivery = await queue.enqueue("delivery", "a#9", installation_id=1)

    first = await queue.claim("w", LEASE)
    second = await queue.claim("w", LEASE)
    third = await queue.claim("w", LEASE)
    assert first is not None and second is not None and third is not None
    assert [first.id, second.id, third.id] == [a_runs[0], b_run, a_delivery]
    assert await queue.claim("w", LEASE) is None  # A has runs queued but one running: its cap
    assert await queue.complete(first)
    fourth = await queue.claim("w", LEASE)
    assert fourth is not None and fourth.id == a_runs[1]


async def test_a_dead_workers_run_does_not_hold_the_cap(clocked_store: Store, fake_clock: FakeClock) -> None:
    queue = JobQueue(clocked_store, max_per_installation=1, capped_kinds=RUN)
    stuck = await queue.enqueue("run", "a#1:run", installation_id=1)
    waiting = await queue.enqueue("run", "a#2:run", installation_id=1)
    job = await queue.claim("w", LEASE)
    assert job is not None and job.id == stuck
    assert await queue.claim("w", LEASE) is None
    fake_clock.advance(LEASE + 1)  # its worker died: the expired lease frees the slot, and it is retried
    again = await queue.claim("w", LEASE)
    assert again is not None and again.id == stuck and again.attempts == 2
    assert await queue.complete(again)
    last = await queue.claim("w", LEASE)
    assert last is not None and last.id == waiting


async def test_the_cap_holds_when_many_claimers_race(db_url: str) -> None:
    """Two stores (two connection pools, as two processes have) claim at once, many times."""
    async with opened(db_url) as one, opened(db_url) as two:
        setup = JobQueue(one)
        for n in range(12):
            await setup.enqueue("run", f"a#{n}:run", installation_id=7)
        queues = [JobQueue(s, max_per_installation=2, capped_kinds=RUN) for s in (one, two, one, two)]
        got: list[int] = []

        async def claim(queue: JobQueue, n: int) -> None:
            for _ in range(3):
                job = await queue.claim(f"w{n}", LEASE)
                if job is not None:
                    got.append(job.id)

        async with anyio.create_task_group() as tg:
            for n, queue in enumerate(queues):
                tg.start_soon(claim, queue, n)
        async with one.read() as conn:
            running = (await conn.execute(select(func.count()).where(jobs.c.state == "running"))).scalar_one()
        assert len(got) == running == 2


async def test_older_databases_get_the_installation_column_and_turns(db_url: str) -> None:
    """The schema upgrade path: the previous version's jobs table gains the column, and its jobs
    stay claimable."""
    async with opened(db_url) as store:
        queue = JobQueue(store)
        old = await queue.enqueue("work", "k")
        async with store.write() as conn:
            await conn.run_sync(rollups.drop_triggers)  # v12's, which read the columns dropped below
            await conn.execute(text("DROP TABLE installation_turns"))
            await conn.execute(text("DROP TABLE usage_counters"))
            # v4 had none of these (the last three are v11's, and cover columns v5 added).
            for index in ("jobs_installation_state", "runs_created_at", *DASHBOARD_INDEXES):
                await conn.execute(text(f"DROP INDEX {index}"))
            for table, column in [
                ("jobs", "installation_id"),
                *[("runs", c) for c in ("installation_id", "input_tokens", "output_tokens")],
                *[("runs", c) for c in ("command_key", "command_url", "cancelled_by")],
            ]:
                await conn.execute(text(f"ALTER TABLE {table} DROP COLUMN {column}"))
            await conn.execute(schema_version.update().values(version=4))  # v5 added them
    async with opened(db_url) as store:
        async with store.read() as conn:
            turns = (await conn.execute(select(installation_turns.c.installation_id))).scalars().all()
        assert turns == [0]
        job = await JobQueue(store).claim("w", LEASE)
        assert job is not None and (job.id, job.installation_id) == (old, 0)


async def test_claimers_of_one_installation_wait_their_turn_instead_of_giving_up(db_url: str) -> None:
    """With one installation, a claim racing another must still get a due job, not None (which would
    send its worker to sleep with work waiting)."""
    async with opened(db_url) as one, opened(db_url) as two:
        setup = JobQueue(one)
        for n in range(8):
            await setup.enqueue("work", f"k#{n}", installation_id=3)
        queues = [JobQueue(s) for s in (one, two, one, two, one, two, one, two)]
        got: list[int | None] = []

        async def claim(queue: JobQueue, n: int) -> None:
            job = await queue.claim(f"w{n}", LEASE)
            got.append(job.id if job is not None else None)

        async with anyio.create_task_group() as tg:
            for n, queue in enumerate(queues):
                tg.start_soon(claim, queue, n)
        assert None not in got and len(set(got)) == 8


async def test_the_fair_picks_probe_the_installation_index_without_sorting(store: Store) -> None:
    """Choosing by installation keeps issue 9's flat claim: each pick is an ordered index probe."""
    if not store.is_sqlite:
        pytest.skip("EXPLAIN QUERY PLAN is SQLite's")
    sql = fair_statements(RUN)
    async with store.read() as conn:
        for pick in (*sql.oldest.values(), sql.running):
            plan = await conn.exec_driver_sql(
                f"EXPLAIN QUERY PLAN {pick.sql}", {**pick.defaults, "b_now": 0.0, "b_inst": 1}
            )
            rows = [(row[1], str(row[-1])) for row in plan]
            details = " | ".join(detail for _, detail in rows)
            probes = {
                parent
                for parent, detail in rows
                if "jobs_installation_state (installation_id=? AND" in detail
            }
            assert probes, details
            # No sort beside a probe: every pick walks the index in id order and stops at its first
            # row. (Merging the two picks sorts their at most two rows, one level up.)
            sorts = {parent for parent, detail in rows if "TEMP B-TREE" in detail}
            assert not probes & sorts, details
            if pick is not sql.running:  # whether a job's key is free is a probe too
                assert "jobs_one_running_per_key (key=?)" in details, details


async def test_the_claim_functions_statements_probe_the_installation_index(store: Store) -> None:
    """On PostgreSQL (pg_claims.py) the choice of installation and the picks stay index probes on a
    fresh, unanalysed table: an EXISTS there became a hashed subplan over every due job (a claim 9x
    slower at 50,000 queued)."""
    if store.is_sqlite:
        pytest.skip("EXPLAIN of PostgreSQL; SQLite's plans are checked above")
    queue = JobQueue(store)
    async with store.write() as conn:
        await conn.execute(
            jobs.insert(),
            [
                {
                    "kind": "w",
                    "key": f"k#{n}",
                    "state": "queued",
                    "attempts": 0,
                    "max_attempts": 3,
                    "run_after": 0.0,
                    "created_at": 0.0,
                    "updated_at": 0.0,
                    "installation_id": n % 3,
                }
                for n in range(3000)
            ],
        )
    await queue.enqueue("w", "last", installation_id=1)  # the turn rows
    # The claim function's statements, its variables given as values.
    values = {"p_now": "1.0", "p_choices": "16", "v_inst": "1", "p_capped_kinds": "ARRAY['run']"}

    def bound(sql: str) -> str:
        return re.sub(r"\b(p_now|p_choices|v_inst|p_capped_kinds)\b", lambda m: values[m[1]], sql)

    async with store.read() as conn:
        for sql in (
            pg_claims.CANDIDATES,
            pg_claims.pick(),
            pg_claims.pick(pg_claims.UNCAPPED),
        ):
            plan = "\n".join(row[0] for row in await conn.exec_driver_sql(f"EXPLAIN {bound(sql)}"))
            assert "jobs_installation_state" in plan, plan
            assert "Hash" not in plan and "hashed" not in plan, plan
            assert "Seq Scan on jobs" not in plan, plan
            if sql is not pg_claims.CANDIDATES:  # whether a job's key is free is a probe too
                assert "jobs_one_running_per_key" in plan, plan
