"""The bot's side of a jail test, as a process of its own: the jail's tests start it as an unprivileged
user (the Docker image's mode) with `setpriv`, since CI runs as root.

Reads one JSON request on stdin (the arguments of `_run_checks`), prints one JSON answer: the outcomes,
the most descriptors this process held while the checks ran (a flood of the setup proxy shows there),
and the jail's status when it is unavailable for this user (with `attempt_anyway`, what running the
checks then did).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import sys
import threading
from pathlib import Path

from bot.app.checks.jail import CheckOutcome, CheckSpec, JailLimits, _run_checks, jail_status
from bot.beam.errors import BeamError


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


async def _main(request: dict[str, object]) -> dict[str, object]:
    status = jail_status()
    if not status.available:
        answer: dict[str, object] = {"unavailable": status.reason, "uid": os.geteuid()}
        if request.get("attempt_anyway"):  # a refusal test: what `_run_checks` does then
            try:
                await _checks(request)
                answer["ran"] = True
            except BeamError as error:
                answer["refused"] = error.code
        return answer
    peak = _open_fds()
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.wait(0.005):
            peak = max(peak, _open_fds())

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        outcomes = await _checks(request)
    finally:
        done.set()
        sampler.join()
    return {"outcomes": [dataclasses.asdict(o) for o in outcomes], "peak_fds": peak, "uid": os.geteuid()}


async def _checks(request: dict[str, object]) -> list[CheckOutcome]:
    return await _run_checks(
        Path(str(request["tree"])),
        [CheckSpec(str(name), str(run)) for name, run in request["checks"]],  # type: ignore[attr-defined]
        limits=JailLimits(**request["limits"]),  # type: ignore[arg-type]
        cache_dir=Path(str(request["cache_dir"])) if request.get("cache_dir") else None,
        setup=str(request["setup"]) if request.get("setup") else None,
        allowed_hosts=list(request.get("allowed_hosts") or []),  # type: ignore[call-overload]
        scratch=Path(str(request["scratch"])),
        weaken=frozenset(request.get("weaken") or []),  # type: ignore[arg-type]
    )


if __name__ == "__main__":
    print(json.dumps(asyncio.run(_main(json.load(sys.stdin)))))
