"""Session memory and remembered facts: the `MemoryStore` protocol, scopes, trimming, `remember`.

Items live under a scope key (`session:<id>` for the conversation, any `name` or `name:id` for facts).
The hub loads the scopes an invoke asks for (riverbeam-reference.md 8.4 `memory_scopes`), turns
facts into system messages `"[<kind> <scope_key>] <text>"`, and trims the history to the model's
token budget. Storage sits behind `MemoryStore` so the app can keep it in its database.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from bot.beam.errors import BeamError
from bot.beam.tools import Tool, ToolSpec, json_params, string_arg
from bot.beam.types import (
    AgentInput,
    AgentMessage,
    AgentMessageRole,
    ContentPart,
    text_of,
    utc_now,
)

MESSAGE_KIND = "message"


@dataclass(frozen=True, slots=True)
class MemoryItem:
    """A conversation turn (`message` set) or a remembered fact (`text` only)."""

    scope: str
    kind: str
    text: str
    message: AgentMessage | None = None
    id: str = field(default_factory=lambda: str(uuid.uuid4()))
    created_at: datetime = field(default_factory=utc_now)

    def as_message(self) -> AgentMessage:
        if self.message is not None:
            return self.message
        text = f"[{self.kind} {self.scope}] {self.text}"
        return AgentMessage(role=AgentMessageRole.SYSTEM, content=[ContentPart.text_part(text)])


@dataclass(frozen=True, slots=True)
class MemoryScope:
    name: str
    id: str = ""

    @property
    def key(self) -> str:
        return f"{self.name}:{self.id}" if self.id else self.name

    @classmethod
    def session(cls, session_id: uuid.UUID | str) -> MemoryScope:
        return cls("session", str(session_id))


class MemoryStore(Protocol):
    """Append-only items per scope key; `load` returns them oldest first, scope by scope."""

    async def append(self, item: MemoryItem) -> None: ...

    async def load(self, scopes: Sequence[str]) -> list[MemoryItem]: ...

    async def forget(self, item_id: str) -> bool: ...


class InMemoryMemoryStore:
    """The default store: a dict of lists, gone when the process ends."""

    def __init__(self) -> None:
        self._scopes: dict[str, list[MemoryItem]] = {}

    async def append(self, item: MemoryItem) -> None:
        self._scopes.setdefault(item.scope, []).append(item)

    async def load(self, scopes: Sequence[str]) -> list[MemoryItem]:
        return [item for scope in scopes for item in self._scopes.get(scope, ())]

    async def forget(self, item_id: str) -> bool:
        removed = False
        for items in self._scopes.values():
            kept = [item for item in items if item.id != item_id]
            removed = removed or len(kept) != len(items)
            items[:] = kept
        return removed


def memory_scopes(input: AgentInput) -> list[MemoryScope]:
    """`metadata.memory_scopes` when it names any scope (then the session is NOT added), else the session."""
    wanted = input.meta("memory_scopes")
    scopes: list[MemoryScope] = []
    if isinstance(wanted, list):
        for entry in wanted:
            if isinstance(entry, dict) and isinstance(entry.get("name"), str):
                scope_id = entry.get("id")
                scopes.append(MemoryScope(entry["name"], scope_id if isinstance(scope_id, str) else ""))
    return scopes or [MemoryScope.session(input.session_id)]


def _chars(message: AgentMessage) -> int:
    return len(text_of(message.content, " "))


def trim_history(messages: list[AgentMessage], max_tokens: int) -> list[AgentMessage]:
    """The original's TokenLimitStrategy: keep the newest messages that fit; 0 means no limit."""
    if max_tokens <= 0 or sum(math.ceil(_chars(m) / 4) for m in messages) <= max_tokens:
        return list(messages)
    kept: list[AgentMessage] = []
    used = 0
    for message in reversed(messages):
        cost = _chars(message) // 4 + 1
        if used + cost > max_tokens:
            break
        used += cost
        kept.append(message)
    kept.reverse()
    return kept


REMEMBER_SPEC = ToolSpec(
    name="remember",
    description="Store a durable memory item at a named scope.",
    confirm_required=False,
    parameters=json_params(
        {
            "scope_name": {"type": "string"},
            "scope_id": {"type": "string"},
            "kind": {"type": "string"},
            "text": {"type": "string"},
        },
        ["scope_name", "kind", "text"],
    ),
)


class RememberTool(Tool):
    """The original's unbound tool: every call fails with BEM-109 and so ends the run.

    Hosts that want the tool to work use `RiverBeam.remember_tool()` instead.
    """

    def spec(self) -> ToolSpec:
        return REMEMBER_SPEC

    async def invoke(self, args: Any, input: AgentInput) -> Any:
        raise BeamError("BEM-109")


Remember = Callable[[str, str, str, str], Awaitable[str]]


class BoundRememberTool(Tool):
    """`remember` bound to a store function (the hub's `memory_remember`): the call stores the fact."""

    def __init__(self, remember: Remember) -> None:
        self._remember = remember

    def spec(self) -> ToolSpec:
        return REMEMBER_SPEC

    async def invoke(self, args: Any, input: AgentInput) -> Any:
        scope_name = string_arg(args, "scope_name")
        kind = string_arg(args, "kind")
        text = string_arg(args, "text")
        raw_id = args.get("scope_id")
        scope_id = raw_id if isinstance(raw_id, str) else ""
        item_id = await self._remember(scope_name, scope_id, kind, text)
        return {"id": item_id, "scope": MemoryScope(scope_name, scope_id).key}
