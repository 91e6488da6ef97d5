"""The installation page's numbers: every repository's runs, findings and held pushes, and the
workers' queue, from seeded rows, on SQLite and (with BEAM_TEST_POSTGRES_URL) PostgreSQL."""

from __future__ import annotations

import pytest

from bot.app.dashboard.installation_queries import installation_figures
from bot.app.dashboard.spans import Span
from bot.app.dashboard.tables import installation_tables
from bot.app.jobs.schema import jobs, queued_job
from bot.app.jobs.store import Store
from bot.app.limits.policy import Prices
from tests.support import dashboard_data

pytestmark = pytest.mark.anyio
NOW = dashboard_data.SEEDED_AT
REPO = "octo-org/widgets"
PRICES = Prices(3.0, 15.0)  # dollars per million input and output tokens


async def test_the_installation_view(seeded_store: Store) -> None:
    store = seeded_store
    async with store.write() as conn:  # and two jobs waiting, for the workers' queue
        await conn.execute(jobs.insert().values(queued_job("review", "k1", NOW - 30)))
        await conn.execute(jobs.insert().values(queued_job("review", "k2", NOW - 5)))
    figures = await installation_figures(store, Span(30, NOW))
    tables = installation_tables(figures, PRICES)
    assert tables["repositories"].rows == [
        ("octo-org/secret", 1, 1, 0, 7777, 777, 0.0350, 1, 0.0, 0.0, 0),
        (REPO, 1, 6, 1, 18500, 3600, 0.1095, 5, 40.0, 20.0, 1),
    ]
    assert tables["queue"].rows[0][:2] == (2, 0)
