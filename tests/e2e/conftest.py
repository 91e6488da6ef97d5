"""The end-to-end `bot` fixture: `beam-bot serve` on the `/beam author` stack (tests/e2e/author_support.py).

test_review_flow.py and test_worker_process.py start other stacks and define their own `bot`.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.author_support import author_stack
from tests.support.bot_process import BotProcess
from tests.support.users import why_not_as_user


@pytest.fixture
def bot(tmp_path: Path) -> Iterator[BotProcess]:
    with author_stack(tmp_path) as bot:
        yield bot


@pytest.fixture(params=["root", "user"])
def bot_in_each_mode(request: pytest.FixtureRequest) -> Iterator[BotProcess]:
    """The author stack run as root and again as the Docker image's unprivileged user (uid 10001):
    the attack tests of held pushes hold in the mode the image ships (STYLE habit 16)."""
    if request.param == "user" and (why := why_not_as_user()) is not None:
        pytest.skip(why)
    root = Path(tempfile.mkdtemp(prefix="beam-e2e-"))
    root.chmod(0o755)  # pytest's own tmp_path sits below a directory only root may enter
    try:
        with author_stack(root, as_image_user=request.param == "user") as bot:
            yield bot
    finally:
        shutil.rmtree(root, ignore_errors=True)
