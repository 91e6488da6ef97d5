"""Fixtures shared by the whole suite; each area keeps its own helpers in tests/support/."""

from __future__ import annotations

import pytest

# The shared checks in tests/support/ (the soak's end, say) assert too: show their values when they fail.
pytest.register_assert_rewrite("tests.support")

# The database fixtures (`db_url`, `store`, `clocked_store`, `fake_clock`, `empty_pg_url`), for every test.
pytest_plugins = ["tests.support.db"]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
