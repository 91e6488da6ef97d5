"""A run's framework memory: facts the model `remember`s persist in the database, per repository.

The framework's `MemoryStore` over `Store.memory_*`. Conversation turns stay with the run, as they
always have (each run is its own conversation). Facts go to the `memory` table under
`<owner>/<repo>/<scope key>`: the model chooses the scope, so a run can only write into its own
repository's memory, and a fact comes back only to an invoke of the same repository that lists its
scope (riverbeam-reference.md 8.4 `memory_scopes`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from bot.app.jobs.store import Store
from bot.beam.memory import MESSAGE_KIND, BoundRememberTool, InMemoryMemoryStore, MemoryItem, MemoryScope
from bot.beam.tools import Tool

MAX_FACTS = 50  # per load: the newest ones; the hub then trims the history to the model's budget


class RunMemory:
    """One run's memory store (implements `bot.beam.memory.MemoryStore`)."""

    def __init__(self, store: Store, repository: str) -> None:
        self._store = store
        self._repository = repository
        self._turns = InMemoryMemoryStore()

    def _key(self, scope: str) -> str:
        return f"{self._repository}/{scope}"

    async def remember(self, scope_name: str, scope_id: str, kind: str, text: str) -> str:
        """Store one fact; returns its row id (what `forget` takes)."""
        scope = MemoryScope(scope_name, scope_id).key
        return str(await self._store.memory_append(self._key(scope), kind, text))

    def forget_turns(self) -> None:
        """Forgets this run's conversation turns (a prompt that overflowed is not sent again)."""
        self._turns = InMemoryMemoryStore()

    def remember_tool(self) -> Tool:
        """The framework's `remember` tool, bound to this repository's memory in the database."""
        return BoundRememberTool(self.remember)

    async def append(self, item: MemoryItem) -> None:
        if item.kind == MESSAGE_KIND:
            await self._turns.append(item)
        else:
            await self._store.memory_append(self._key(item.scope), item.kind, item.text)

    async def load(self, scopes: Sequence[str]) -> list[MemoryItem]:
        """Per scope: this run's turns, then the scope's stored facts, oldest first."""
        items: list[MemoryItem] = []
        for scope in scopes:
            items += await self._turns.load([scope])
            for row in await self._store.memory_load([self._key(scope)], limit=MAX_FACTS):
                created = datetime.fromtimestamp(row.created_at, UTC)
                items.append(MemoryItem(scope, row.kind, row.text, id=str(row.id), created_at=created))
        return items

    async def forget(self, item_id: str) -> bool:
        if item_id.isdigit():  # a stored fact, and only one of this repository
            return await self._store.memory_forget(int(item_id), within=f"{self._repository}/")
        return await self._turns.forget(item_id)
