"""The model boundary: `CompletionClient`, `Completion`, and the two clients that need no network.

`OpenAiCompatible` lives in `openai_client.py`; it is the only client that talks to a server.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from bot.beam import structured_output
from bot.beam.errors import BeamError
from bot.beam.tools import ToolSpec
from bot.beam.types import AgentInput, TokenUsage


@dataclass(frozen=True, slots=True)
class PendingToolCall:
    """A tool call the model asked for; `args` is any JSON value."""

    id: str
    name: str
    args: Any = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Completion:
    """Either text or tool calls, plus what the server said it used (we report it; the original did not).

    `problem` says why an attempt at a tool call could not be used (an unknown tool, arguments that
    are not a JSON object): the runner tells the model instead of taking such text for an answer.
    `finish_reason` is the server's (`length`: cut by `max_tokens`), when it gave one.
    """

    text: str | None = None
    tool_calls: tuple[PendingToolCall, ...] | None = None
    usage: TokenUsage | None = None
    model: str | None = None
    problem: str | None = None
    finish_reason: str | None = field(default=None, compare=False)  # not part of what was said

    @classmethod
    def of_text(cls, text: str, *, usage: TokenUsage | None = None, model: str | None = None) -> Completion:
        return cls(text=text, usage=usage, model=model)

    @classmethod
    def of_tool_calls(
        cls,
        calls: Iterable[PendingToolCall],
        *,
        usage: TokenUsage | None = None,
        model: str | None = None,
    ) -> Completion:
        return cls(tool_calls=tuple(calls), usage=usage, model=model)

    @property
    def is_text(self) -> bool:
        return self.tool_calls is None


@runtime_checkable
class CompletionClient(Protocol):
    """Anything that turns OpenAI-format messages and tool specs into a `Completion`.

    `complete` is the seed's one method, and all a client must write. A client that routes per
    request also defines `complete_for` (see `RequestAwareClient`); the runner calls it when it is
    there and `complete` otherwise (`completion_call`). `CompletionClientBase` has both.
    """

    async def complete(self, messages: list[dict[str, Any]], tools: list[ToolSpec]) -> Completion: ...


@runtime_checkable
class RequestAwareClient(CompletionClient, Protocol):
    """A client that also sees the agent input, for example to pick a model per request."""

    async def complete_for(
        self, input: AgentInput, messages: list[dict[str, Any]], tools: list[ToolSpec]
    ) -> Completion: ...


CompleteFor = Callable[[AgentInput, list[dict[str, Any]], list[ToolSpec]], Awaitable[Completion]]


def completion_call(client: CompletionClient) -> CompleteFor:
    """`client.complete_for` when the client has it, else a call of the seed's `complete`."""
    if isinstance(client, RequestAwareClient):
        return client.complete_for

    async def complete(
        input: AgentInput, messages: list[dict[str, Any]], tools: list[ToolSpec]
    ) -> Completion:
        return await client.complete(messages, tools)

    return complete


UsageSink = Callable[[TokenUsage], None]


class CompletionClientBase:
    async def complete(self, messages: list[dict[str, Any]], tools: list[ToolSpec]) -> Completion:
        raise NotImplementedError

    def structured_ok(self) -> bool:
        """Whether `complete_structured` may answer: False once the server refused schemas (or for a
        client without them), so a step that needs a constrained answer knows it cannot have one."""
        return False

    async def complete_structured(
        self,
        messages: list[dict[str, Any]],
        schema: dict[str, Any],
        *,
        name: str = "review",
        on_usage: UsageSink | None = None,
    ) -> Any | None:
        """An answer that matches `schema`, parsed, or None when this client cannot constrain one:
        the caller then asks with `complete` as before. This base has no structured output;
        `OpenAiCompatible` asks the server (issue 30), `ScriptedClient(structured=True)` scripts it.
        `on_usage` receives the tokens of every call made, whatever it returns."""
        return None

    async def complete_for(
        self, input: AgentInput, messages: list[dict[str, Any]], tools: list[ToolSpec]
    ) -> Completion:
        return await self.complete(messages, tools)


class EchoClient(CompletionClientBase):
    """Echoes the last user message; the client used when no API key is configured."""

    async def complete(self, messages: list[dict[str, Any]], tools: list[ToolSpec]) -> Completion:
        for message in reversed(messages):
            content = message.get("content")
            if message.get("role") == "user" and isinstance(content, str):
                return Completion.of_text(f"Echo: {content}" if content else "(empty)")
        return Completion.of_text("(empty)")


class ScriptedClient(CompletionClientBase):
    """Returns the given completions in order (FIFO); BEM-081 once they are used up.

    It also keeps every request it was sent, so tests can check what the model would have seen.
    """

    def __init__(self, steps: Iterable[Completion], *, structured: bool = False) -> None:
        self._steps: deque[Completion] = deque(steps)
        self.requests: list[tuple[list[dict[str, Any]], list[ToolSpec]]] = []
        self.structured = structured  # False: like a server without structured output
        self.structured_requests: list[tuple[list[dict[str, Any]], dict[str, Any]]] = []

    @property
    def remaining(self) -> int:
        return len(self._steps)

    def structured_ok(self) -> bool:
        return self.structured

    async def complete(self, messages: list[dict[str, Any]], tools: list[ToolSpec]) -> Completion:
        self.requests.append(([dict(m) for m in messages], list(tools)))
        if not self._steps:
            raise BeamError("BEM-081")
        return self._steps.popleft()

    async def complete_structured(
        self,
        messages: list[dict[str, Any]],
        schema: dict[str, Any],
        *,
        name: str = "review",
        on_usage: UsageSink | None = None,
    ) -> Any | None:
        """With `structured`, the next step's text parsed as JSON (None when it was cut,
        `finish_reason="length"`); without, None and no step is used. A step that is not JSON of the
        schema's shape is a server that ignores the schema (issue 41): None, and no schema is asked
        from then on, as `OpenAiCompatible` remembers it."""
        if not self.structured:
            return None
        self.structured_requests.append(([dict(m) for m in messages], schema))
        if not self._steps:
            raise BeamError("BEM-081")
        step = self._steps.popleft()
        if on_usage is not None and step.usage is not None:
            on_usage(step.usage)
        if step.finish_reason == "length" or not step.text:
            return None
        try:
            value = json.loads(step.text)
        except ValueError:
            pass
        else:
            if structured_output.fits(value, schema):
                return value
        self.structured = False
        return None
