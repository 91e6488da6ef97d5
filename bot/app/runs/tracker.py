"""The tracking comment: one comment per run, edited as frames arrive, throttled, never fatal.

A progress edit that fails (GitHub hiccup, rate limit) is logged and skipped: losing a progress line
must not fail the run. The final state is written separately by the run, and that one must land.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

from bot.app.github.api import GitHubError
from bot.app.runs import render
from bot.beam.types import StreamChunk, StreamChunkType

log = logging.getLogger("beam.tracker")

Publish = Callable[[str], Awaitable[None]]


class Tracker:
    """A frame sink (`on_frame`) that turns tool frames into checklist lines of the tracking comment."""

    def __init__(
        self,
        progress: render.Progress,
        publish: Publish,
        *,
        min_interval: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.progress = progress
        self.publish = publish
        self.min_interval = min_interval
        self.clock = clock
        self._last = float("-inf")
        self._dirty = False

    async def __call__(self, frame: StreamChunk) -> None:
        if frame.type is not StreamChunkType.TOOL or frame.data is None:
            return
        # The checklist line names the file or query, so files read show up as they happen.
        self.progress.add_tool(frame.data.tool_name or "tool", frame.data.tool_args)
        self._dirty = True
        if self.clock() - self._last >= self.min_interval:
            await self.flush()

    async def flush(self) -> None:
        """Publish the working state now if anything changed since the last edit."""
        if not self._dirty:
            return
        self._last = self.clock()
        self._dirty = False
        try:
            await self.publish(render.working(self.progress))
        except GitHubError as error:
            log.warning("run %s: progress edit skipped: %s", self.progress.run_id, error)
