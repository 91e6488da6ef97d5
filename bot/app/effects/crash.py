"""A test hook that kills the process at a named effect boundary, to prove that a retry adopts.

`BEAM_TEST_CRASH_AT=<effect>:<phase>[,<effect>:<phase>...]`, read once when the app is assembled,
makes the process `os._exit` at that point: `before` (the intent is recorded, the call not made) or
`after` (GitHub answered, the result is not recorded). Unset (always, outside tests) it does nothing.

`<effect>:<phase>:pause` stops the process there instead (SIGSTOP to itself), as a paused machine
would, so a test can let the lease expire and continue it (the write fence, bot/app/fence.py). With
`BEAM_TEST_PAUSE_ONCE=<path>` only the first process that creates that file pauses.
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Mapping
from dataclasses import dataclass

log = logging.getLogger("beam.effects")

ENV = "BEAM_TEST_CRASH_AT"
PAUSE_ONCE_ENV = "BEAM_TEST_PAUSE_ONCE"
EXIT_CODE = 137  # as if killed by SIGKILL


@dataclass(frozen=True)
class CrashPoints:
    points: frozenset[str] = frozenset()
    pause_once: str | None = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> CrashPoints:
        raw = environ.get(ENV, "")
        return cls(frozenset(p.strip() for p in raw.split(",") if p.strip()), environ.get(PAUSE_ONCE_ENV))

    def hit(self, effect: str, phase: str) -> None:
        if f"{effect}:{phase}:pause" in self.points and self._first_to_pause():
            log.warning("test pause point %s:%s reached: stopping until SIGCONT", effect, phase)
            os.kill(os.getpid(), signal.SIGSTOP)
            log.warning("test pause point %s:%s: continued", effect, phase)
        if f"{effect}:{phase}" in self.points:
            log.warning("test crash point %s:%s reached: exiting now", effect, phase)
            logging.shutdown()
            os._exit(EXIT_CODE)

    def _first_to_pause(self) -> bool:
        if self.pause_once is None:
            return True
        try:
            os.close(os.open(self.pause_once, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        except FileExistsError:
            return False
        return True


NO_CRASH = CrashPoints()
