"""The end-to-end `bot` fixture: `beam-bot serve` on the `/beam author` stack (tests/e2e/author_support.py).

test_review_flow.py and test_worker_process.py start other stacks and define their own `bot`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.author_support import author_stack
from tests.support.bot_process import BotProcess


@pytest.fixture
def bot(tmp_path: Path) -> Iterator[BotProcess]:
    with author_stack(tmp_path) as bot:
        yield bot
