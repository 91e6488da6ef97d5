"""The database plumbing `Store` uses besides its engines and transactions (which are its own,
bot/app/jobs/store.py): the PostgreSQL claim function's install, and the checks of a compare-and-set.

One code path serves SQLite (default, one machine) and PostgreSQL (several processes and machines);
`bot.app.jobs.database` sets the engines up, `bot.app.jobs.schema` holds the tables.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import Table
from sqlalchemy.ext.asyncio import AsyncConnection

from bot.app.jobs.pg_claims import CREATE as CREATE_CLAIM_FUNCTION
from bot.app.jobs.pg_claims import EXISTS as CLAIM_FUNCTION_EXISTS
from bot.app.jobs.pg_claims import FUNCTION as CLAIM_FUNCTION
from bot.app.jobs.schema import jobs, pending_pushes

Clock = Callable[[], float]

# The tables with a `state` column that `Store.transition` moves by compare-and-set.
STATE_TABLES = {t.name: t for t in (jobs, pending_pushes)}


async def install_claim_function(conn: AsyncConnection) -> None:
    """Create this release's claim function (pg_claims.py) unless it exists; under the upgrade's
    advisory lock, so processes starting together do not race on the catalog."""
    raw = await conn.get_raw_connection()
    driver: Any = raw.driver_connection
    if not await driver.fetchval(CLAIM_FUNCTION_EXISTS, CLAIM_FUNCTION):
        await driver.execute(CREATE_CLAIM_FUNCTION)


def check_columns(table: Table, values: dict[str, Any]) -> None:
    unknown = sorted(set(values) - set(table.c.keys()))
    if unknown:
        raise ValueError(f"unknown {table.name} columns: {', '.join(unknown)}")
