"""Fixtures shared by the whole suite; each area keeps its own helpers in tests/support/."""

from __future__ import annotations

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
