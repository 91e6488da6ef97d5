"""A test hook that kills the process at a named effect boundary, to prove that a retry adopts.

`BEAM_TEST_CRASH_AT=<effect>:<phase>[,<effect>:<phase>...]`, read once when the app is assembled,
makes the process `os._exit` at that point: `before` (the intent is recorded, the call not made) or
`after` (GitHub answered, the result is not recorded). Unset (always, outside tests) it does nothing.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass

log = logging.getLogger("beam.effects")

ENV = "BEAM_TEST_CRASH_AT"
EXIT_CODE = 137  # as if killed by SIGKILL


@dataclass(frozen=True)
class CrashPoints:
    points: frozenset[str] = frozenset()

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> CrashPoints:
        raw = environ.get(ENV, "")
        return cls(frozenset(p.strip() for p in raw.split(",") if p.strip()))

    def hit(self, effect: str, phase: str) -> None:
        if f"{effect}:{phase}" in self.points:
            log.warning("test crash point %s:%s reached: exiting now", effect, phase)
            logging.shutdown()
            os._exit(EXIT_CODE)


NO_CRASH = CrashPoints()
