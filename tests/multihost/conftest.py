"""The multi-host tests' fixture: hosts a, b and c as network namespaces, skipped where none can be made."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import netns
from tests.support.db import pg_database_url_fixture  # noqa: F401 - the fixture, by its name
from tests.support.multihost import Cluster, cluster

ENV = {
    "BEAM_CONCURRENCY": "1",
    "BEAM_SWEEP_INTERVAL": "1",
    "BEAM_QUEUE_POLL_INTERVAL": "0.2",
}


@pytest.fixture
def hosts(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Cluster]:
    """The cluster with no process started; a test adds its settings to `hosts.env`, then starts."""
    reason = netns.unavailable()
    if reason is not None:
        pytest.skip(f"the multi-host tests need network namespaces: {reason}")
    with cluster(tmp_path, request.getfixturevalue("pg_database_url"), ENV) as made:
        yield made
