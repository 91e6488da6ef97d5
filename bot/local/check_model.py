"""`beam-bot check-model`: one small call to the configured model, and a few lines on what works.

The check itself is `bot.beam.model_check`, which `serve` and `action` also run at start and say in
one line; here each of its findings is printed as soon as it is known, so a slow server shows where
it is slow.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TextIO

from bot.beam.model_check import run_check


async def check_model(env: Mapping[str, str], out: TextIO) -> int:
    """Prints what works; 0 when the key and the model answer, 1 when they do not, 2 when the
    settings are wrong or missing."""

    def emit(line: str) -> None:
        out.write(line + "\n")
        out.flush()

    check = await run_check(env, emit)
    return check.code
