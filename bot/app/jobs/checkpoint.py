"""WAL checkpoints off the commit path (SQLite).

By default SQLite checkpoints inside the commit that leaves the WAL over 1,000 pages: that commit
copies every frame into the database file and fsyncs it before it returns. Deliveries are 14 KB, so
at 1,000/s that is a checkpoint every fifth of a second on the intake's path, and the p99 of an
acknowledgement was a checkpoint's. Here a thread of the store's own runs a PASSIVE checkpoint every
`interval`: it copies what no reader still needs and never waits for a reader or a writer, and its
fsync blocks only itself. The writers' own automatic checkpoint stays as a safety net at
`WAL_SAFETY_PAGES` (if this thread cannot keep up, the WAL still cannot grow without bound).
"""

from __future__ import annotations

import logging
import sqlite3
import threading

from bot.app.jobs.database import BUSY_TIMEOUT_MS, WAL_SAFETY_PAGES

log = logging.getLogger("beam.database")

__all__ = ["WAL_SAFETY_PAGES", "Checkpointer"]


class Checkpointer:
    """A daemon thread that checkpoints one SQLite file until `stop()`."""

    def __init__(self, path: str, interval: float = 0.25) -> None:
        self.path = path
        self.interval = interval
        self.checkpoints = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="beam-wal-checkpoint", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(BUSY_TIMEOUT_MS / 1000 + 5)

    def _run(self) -> None:
        try:
            conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
        except sqlite3.Error:
            log.warning("no WAL checkpoints for %s: cannot open it", self.path, exc_info=True)
            return
        try:
            while not self._stop.wait(self.interval):
                try:
                    conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
                    self.checkpoints += 1
                except sqlite3.Error:
                    # Busy or briefly unavailable: the next round tries again, and the writers'
                    # safety net bounds the WAL meanwhile.
                    log.debug("WAL checkpoint of %s skipped", self.path, exc_info=True)
        finally:
            conn.close()
