"""The jail's tests: a `tmp_path` that another user may enter, and the mode the bot runs in."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.app.checks.test_jail_support import MODE, MODES, enter_mode


@pytest.fixture
def tmp_path() -> Iterator[Path]:
    """pytest's own lives under a directory only its user may enter: in "user" mode the bot's side
    runs as another uid, which must reach the trees and scratch directories the test makes."""
    root = Path(tempfile.mkdtemp(prefix="beam-jail-test-"))
    root.chmod(0o755)
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(params=MODES)
def jail_mode(request: pytest.FixtureRequest) -> Iterator[str]:
    """Runs the test once as root and once as the Docker image's unprivileged user."""
    enter_mode(request.param)
    try:
        yield request.param
    finally:
        MODE.name = "root"
