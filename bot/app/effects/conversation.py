"""A run's conversation checkpoint in the database: the framework's runner saves it after each
finished tool round and a retried run continues from there instead of asking the model again."""

from __future__ import annotations

from typing import Any

from bot.app.effects.journal import Journal


class RunConversation:
    """The `bot.beam.runner.Checkpoint` of one run, stored in `run_checkpoints`."""

    def __init__(self, journal: Journal, run_id: str) -> None:
        self.journal = journal
        self.run_id = run_id

    async def load(self) -> tuple[int, list[dict[str, Any]]] | None:
        return await self.journal.load_conversation(self.run_id)

    async def save(self, rounds: int, messages: list[dict[str, Any]]) -> None:
        await self.journal.save_conversation(self.run_id, rounds, messages)
