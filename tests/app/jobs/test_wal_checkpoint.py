"""SQLite checkpoints run on the store's own thread, never inside an intake commit (issue 9: p99)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import anyio
import pytest

from bot.app.jobs.database import WAL_SAFETY_PAGES
from bot.app.jobs.store import Store

pytestmark = pytest.mark.anyio
BODY = b'{"action": "created", "comment": {"body": "' + b"x" * 14_000 + b'"}}'


def checkpoint_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "beam-wal-checkpoint"]


async def test_the_wal_is_copied_back_by_the_stores_thread_not_by_the_writers(tmp_path: Path) -> None:
    path = tmp_path / "beam.db"
    before = len(checkpoint_threads())
    store = await Store.open(f"sqlite:///{path}")
    try:
        assert len(checkpoint_threads()) == before + 1
        for n in range(300):  # ~1,200 WAL pages: past SQLite's own threshold of 1,000
            assert await store.accept_delivery(
                f"d-{n}", "issue_comment", "created", BODY, None, with_job=False
            )
        # The writers' automatic checkpoint is only a safety net, far above what was written here.
        assert store.sync_engine is not None
        raw = store.sync_engine.raw_connection()
        try:
            autocheckpoint = raw.driver_connection.execute("PRAGMA wal_autocheckpoint").fetchone()  # type: ignore[union-attr]
        finally:
            raw.close()
        assert autocheckpoint[0] == WAL_SAFETY_PAGES > 1_200
        # So only the store's thread can have copied the deliveries into the database file itself.
        deadline = time.monotonic() + 10
        while path.stat().st_size < 300 * 14_000:
            assert time.monotonic() < deadline, "the checkpoint thread never copied the WAL back"
            await anyio.sleep(0.05)
        assert (await store.stats())["deliveries"] == 300
    finally:
        await store.close()
    assert len(checkpoint_threads()) == before  # close() stops it


async def test_closing_stops_the_thread_and_twice_is_harmless(tmp_path: Path) -> None:
    before = len(checkpoint_threads())
    store = await Store.open(f"sqlite:///{tmp_path / 'a.db'}")
    await store.close()
    await store.close()  # closing twice is harmless
    assert len(checkpoint_threads()) == before
