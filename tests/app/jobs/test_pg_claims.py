"""The PostgreSQL claim function (bot/app/jobs/pg_claims.py): how it is installed, and the race its
caller must survive. Its behaviour (turns, caps, leases, keys) is tested with SQLite's in
test_queue.py and test_fair_claims.py, which run on both databases."""

from __future__ import annotations

import anyio
import pytest
from sqlalchemy import text

from bot.app.jobs import pg_claims
from bot.app.jobs.queue import JobQueue
from bot.app.jobs.store import Store
from tests.support.db import opened

pytestmark = [pytest.mark.anyio, pytest.mark.postgres]
LEASE = 30.0
_FUNCTIONS = "SELECT proname FROM pg_proc WHERE proname LIKE 'beam\\_claim\\_%' ORDER BY proname"


async def test_each_release_installs_its_own_function_and_leaves_the_others(empty_pg_url: str) -> None:
    """A changed function is a new name, so a rolling deploy's older processes keep calling theirs."""
    older = "beam_claim_000000000000"
    async with opened(empty_pg_url) as store, store.write() as conn:
        names = [row[0] for row in await conn.execute(text(_FUNCTIONS))]
        assert names == [pg_claims.FUNCTION]
        await conn.execute(text(f"CREATE FUNCTION {older}() RETURNS int LANGUAGE sql AS 'SELECT 1'"))
    async with opened(empty_pg_url) as store, store.read() as conn:
        names = [row[0] for row in await conn.execute(text(_FUNCTIONS))]
    assert names == sorted([older, pg_claims.FUNCTION])


async def test_a_claim_that_loses_the_race_for_a_key_is_run_again(empty_pg_url: str) -> None:
    """Another transaction marks a job of key K running without committing yet: the claim, which
    cannot see it, takes K's other job, and the unique index stops it once that transaction commits.
    The whole call is undone and run again, and then K is busy: nothing is claimed, nothing lost."""
    async with opened(empty_pg_url) as store:
        queue = JobQueue(store)
        first = await queue.enqueue("delivery", "o/r#1")
        second = await queue.enqueue("delivery", "o/r#1")
        claimed: list[object] = []
        async with store.engine.connect() as racer:
            transaction = await racer.begin()
            await racer.execute(
                text("UPDATE jobs SET state = 'running', lease_owner = 'racer' WHERE id = :id"), {"id": first}
            )
            async with anyio.create_task_group() as tg:

                async def claim() -> None:
                    claimed.append(await queue.claim("w", LEASE))

                tg.start_soon(claim)
                with anyio.fail_after(10):
                    while not await _waiting_on_a_lock(store):  # the claim is at the unique index
                        await anyio.sleep(0.02)
                await transaction.commit()
        assert claimed == [None]
        rows = await _states(store)
        assert rows == {first: ("running", "racer"), second: ("queued", None)}


async def _waiting_on_a_lock(store: Store) -> bool:
    async with store.read() as conn:
        found = await conn.execute(text("SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock'"))
        return found.first() is not None


async def _states(store: Store) -> dict[int, tuple[str, str | None]]:
    async with store.read() as conn:
        rows = await conn.execute(text("SELECT id, state, lease_owner FROM jobs ORDER BY id"))
        return {row[0]: (row[1], row[2]) for row in rows}
