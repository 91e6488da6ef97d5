"""The dashboard's HTTP tests share one running App and its fake GitHub (tests/support/dashboard_env.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.support.dashboard_env import Env, running_dashboard


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    async with running_dashboard(tmp_path) as env:
        yield env
