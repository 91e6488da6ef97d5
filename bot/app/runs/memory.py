"""A run's framework memory: facts the model `remember`s persist in the database, per pull request.

The framework's `MemoryStore` over `Store.memory_*`. Conversation turns stay with the run, as they
always have (each run is its own conversation). Facts go to the `memory` table under one key the
server chooses: `thread:<owner>/<repo>#<number>`, the pull request or issue the run works on. The model
never chooses it (issue 28, security invariant 13): `remember` is bound to that key, any scope the model
names is ignored, and a fact is loaded only by later runs on the same pull request or issue, which
read it as fenced data in their prompt (`facts`, context/prompt.py), never as a system message.

Nobody makes a fact visible to every pull request of a repository through the bot: guidance for the
whole repository belongs in `.github/beam.yml` on the default branch (`review.path_instructions`),
changed by a reviewed commit like any other (docs/security.md). Rows of the old, model-chosen scopes
(`<owner>/<repo>/<scope>`) are never loaded: no key of that form is asked for.
"""

from __future__ import annotations

from collections.abc import Sequence

from bot.app.jobs.store import Store
from bot.beam.memory import MESSAGE_KIND, BoundRememberTool, InMemoryMemoryStore, MemoryItem, MemoryScope
from bot.beam.tools import Tool

MAX_FACTS = 50  # per load: the newest ones
MAX_FACT_CHARS = 2_000  # per fact in a prompt; the rest is cut


def thread_key(repository: str, number: int) -> str:
    """The one scope a run's facts live in: its repository and pull request (or issue) number."""
    return f"thread:{repository}#{number}"


class RunMemory:
    """One run's memory store (implements `bot.beam.memory.MemoryStore`)."""

    def __init__(self, store: Store, repository: str, number: int) -> None:
        self._store = store
        self._key = thread_key(repository, number)
        self._turns = InMemoryMemoryStore()

    @property
    def scope(self) -> MemoryScope:
        return MemoryScope("thread", self._key.removeprefix("thread:"))

    async def remember(self, _scope_name: str, _scope_id: str, kind: str, text: str) -> str:
        """Store one fact in this run's thread, whatever scope the caller names; returns its row id."""
        return str(await self._store.memory_append(self._key, kind, text))

    async def facts(self) -> list[str]:
        """This thread's remembered facts, oldest first, as lines for the prompt's untrusted block."""
        rows = await self._store.memory_load([self._key], limit=MAX_FACTS)
        return [f"- [{' '.join(row.kind.split())[:40]}] {row.text[:MAX_FACT_CHARS]}" for row in rows]

    def forget_turns(self) -> None:
        """Forgets this run's conversation turns (a prompt that overflowed is not sent again)."""
        self._turns = InMemoryMemoryStore()

    def remember_tool(self) -> Tool:
        """The framework's `remember` tool, bound to this run's thread in the database."""
        return BoundRememberTool(self.remember, self.scope)

    async def append(self, item: MemoryItem) -> None:
        if item.kind == MESSAGE_KIND:
            await self._turns.append(item)
        else:  # a fact, from wherever: kept in this run's thread only
            await self._store.memory_append(self._key, item.kind, item.text)

    async def load(self, scopes: Sequence[str]) -> list[MemoryItem]:
        """This run's conversation turns of the scopes asked for. Stored facts never come back here:
        they reach the model in the prompt's untrusted block (`facts`)."""
        return await self._turns.load(scopes)

    async def forget(self, item_id: str) -> bool:
        if item_id.isdigit():  # a stored fact, and only one of this thread
            return await self._store.memory_forget(int(item_id), scope_key=self._key)
        return await self._turns.forget(item_id)
