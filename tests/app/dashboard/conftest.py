"""The dashboard's HTTP tests share one running App and its fake GitHub (tests/support/dashboard_env.py);
its query tests, one store seeded with the standard story (tests/support/dashboard_data.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.app.jobs.store import Store
from tests.support import dashboard_data
from tests.support.dashboard_env import Env, running_dashboard


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    async with running_dashboard(tmp_path) as env:
        yield env


@pytest.fixture
async def seeded_store(store: Store) -> Store:
    """The test's store (SQLite, or PostgreSQL) holding the standard story as of `SEEDED_AT`."""
    rows = dashboard_data.standard(dashboard_data.SEEDED_AT)
    async with store.write() as conn:
        await conn.run_sync(lambda c: dashboard_data.write(c, *rows))
    return store
