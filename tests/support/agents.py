"""Helpers for the agent-side tests: inputs, contexts, and tools that count their calls."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from bot.beam.completion import Completion, PendingToolCall
from bot.beam.tools import FunctionTool, ToolSpec, json_params
from bot.beam.types import (
    ActionResponseEnvelope,
    AgentContext,
    AgentInput,
    AgentMessage,
    ContentPart,
    InvokeRequest,
    StreamChunk,
    TokenUsage,
)

SESSION = uuid.UUID("5f8915eb-31eb-4f8a-9517-e2c15ce7bc41")
REQUEST = uuid.UUID("16d12ddc-651a-431d-997c-a756d5793ebf")
INTERACTION = uuid.UUID("40744652-2720-4b10-86ee-7333c1be8165")


def make_input(
    text: str | None = "hello",
    *,
    parts: list[ContentPart] | None = None,
    metadata: Any = None,
    actions: list[ActionResponseEnvelope] | None = None,
    session_id: uuid.UUID = SESSION,
) -> AgentInput:
    content = parts if parts is not None else ([ContentPart.text_part(text)] if text is not None else [])
    return AgentInput(
        content=content,
        session_id=session_id,
        interaction_id=INTERACTION,
        request_id=REQUEST,
        run_id=uuid.uuid4(),
        agent_name="author",
        metadata=metadata,
        actions=actions,
    )


def make_context(history: list[AgentMessage] | None = None) -> AgentContext:
    return AgentContext(session_id=str(SESSION), conversation_history=history or [])


def make_request(
    agent: str,
    text: str = "hello",
    *,
    parts: list[ContentPart] | None = None,
    session_id: uuid.UUID = SESSION,
    metadata: Any = None,
    actions: list[ActionResponseEnvelope] | None = None,
    model_override: str | None = None,
) -> InvokeRequest:
    return InvokeRequest(
        agent_name=agent,
        content=parts if parts is not None else [ContentPart.text_part(text)],
        session_id=session_id,
        request_id=REQUEST,
        metadata=metadata,
        actions=actions,
        model_override=model_override,
    )


@dataclass
class CountingTool:
    """A FunctionTool that records every call's args and returns `result` (or raises `error`)."""

    name: str
    confirm: bool = False
    result: Any = field(default_factory=lambda: {"ok": True})
    error: Exception | None = None
    calls: list[Any] = field(default_factory=list)

    @property
    def tool(self) -> FunctionTool:
        spec = ToolSpec(self.name, f"The {self.name} tool.", self.confirm, json_params())

        async def run(args: Any, input: AgentInput) -> Any:
            self.calls.append(args)
            if self.error is not None:
                raise self.error
            return self.result

        return FunctionTool(spec, run)


def calls(*items: tuple[str, Any], usage: TokenUsage | None = None, model: str | None = None) -> Completion:
    """A tool-call completion; ids are `call-<i>`."""
    return Completion.of_tool_calls(
        (PendingToolCall(f"call-{i}", name, args) for i, (name, args) in enumerate(items)),
        usage=usage,
        model=model,
    )


def envelope(action_id: str, status: str = "submitted", payload: Any = None) -> ActionResponseEnvelope:
    return ActionResponseEnvelope.model_validate(
        {
            "action_id": action_id,
            "kind": "confirmation",
            "request_id": "r-1",
            "status": status,
            "payload": payload,
        }
    )


class FrameRecorder:
    """A FrameSink that keeps what it was sent."""

    def __init__(self) -> None:
        self.frames: list[StreamChunk] = []

    async def __call__(self, frame: StreamChunk) -> None:
        self.frames.append(frame)
