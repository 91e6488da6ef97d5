"""The run's tracking comment: its journal keys, and how it is written (created once, then edited).

A mixin of `SkillRun` (run.py), whose `__init__` sets the attributes named below.
"""

from __future__ import annotations

import logging
from typing import Any

import anyio

from bot.app.effects.writer import GitHubEffects
from bot.app.github.api import GitHubError
from bot.app.jobs.signals import RetryableError
from bot.app.runs.deps import RunDeps

log = logging.getLogger("beam.runs")


class TrackingComment:
    """One comment per run that shows its progress and always ends in a final state."""

    deps: RunDeps
    effects: GitHubEffects
    run_id: str
    owner: str
    repo: str
    number: int
    comment_id: int | None

    def key(self, step: str) -> str:
        """The effects-journal key of one of this run's writes."""
        return f"{self.run_id}:{step}"

    async def publish(self, body: str, *, kind: str = "edit") -> None:
        if self.comment_id is None:
            comment = await self.effects.comment(
                self.key("tracking"), self.owner, self.repo, self.number, body
            )
            self.comment_id = comment.id
            await self.deps.store.update_run(self.run_id, tracking_comment_id=comment.id)
        else:
            await self.effects.edit(
                self.key("tracking"), self.owner, self.repo, self.comment_id, body, kind=kind
            )

    async def _write_final(self, body: str, values: dict[str, Any]) -> None:
        """Write the recorded final state; if GitHub refuses it for now, the job is retried (and
        writes it again), so the run is not marked ended behind a comment that still says Working."""
        if not await self._safe_publish(body, kind="final"):
            raise RetryableError(f"run {self.run_id}: the final state could not be written yet")
        await self.deps.store.update_run(self.run_id, **values)

    async def _safe_publish(self, body: str, *, kind: str = "edit") -> bool:
        """Publish; False only when GitHub failed for now (a later try may succeed)."""
        with anyio.CancelScope(shield=True):
            try:
                await self.publish(body, kind=kind)
            except GitHubError as error:
                log.warning("run %s: could not edit the tracking comment: %s", self.run_id, error)
                return not error.transient
        return True
