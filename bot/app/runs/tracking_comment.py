"""The run's tracking comment: its journal keys, and how it is written (created once, then edited).

`SkillRun` (run.py) holds one; the GitHub waits (outage.py) write through it too.
"""

from __future__ import annotations

import logging

import anyio

from bot.app.effects.writer import GitHubEffects
from bot.app.github.api import GitHubError
from bot.app.jobs.store import Store

log = logging.getLogger("beam.runs")


class TrackingComment:
    """One comment per run that shows its progress and always ends in a final state."""

    def __init__(
        self, store: Store, effects: GitHubEffects, run_id: str, owner: str, repo: str, number: int
    ) -> None:
        self.store = store
        self.effects = effects
        self.run_id = run_id
        self.owner = owner
        self.repo = repo
        self.number = number
        self.comment_id: int | None = None  # known once created, or from the run's row on a retry

    def key(self, step: str) -> str:
        """The effects-journal key of one of this run's writes."""
        return f"{self.run_id}:{step}"

    async def publish(self, body: str, *, kind: str = "edit") -> None:
        if self.comment_id is None:
            comment = await self.effects.comment(
                self.key("tracking"), self.owner, self.repo, self.number, body
            )
            self.comment_id = comment.id
            await self.store.update_run(self.run_id, tracking_comment_id=comment.id)
        else:
            await self.effects.edit(
                self.key("tracking"), self.owner, self.repo, self.comment_id, body, kind=kind
            )

    async def safe_publish(self, body: str, *, kind: str = "edit") -> bool:
        """Publish; False only when GitHub failed for now (a later try may succeed)."""
        with anyio.CancelScope(shield=True):
            try:
                await self.publish(body, kind=kind)
            except GitHubError as error:
                log.warning("run %s: could not edit the tracking comment: %s", self.run_id, error)
                return not error.transient
        return True
