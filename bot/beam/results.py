"""What comes out of an agent: the result, token usage, tool-call records and stream frames."""

from __future__ import annotations

import uuid
from enum import StrEnum
from typing import Any

from pydantic import Field

from bot.beam.content import ContentPart, text_of
from bot.beam.messages import AgentMessage
from bot.beam.wire import Wire


class TokenUsage(Wire):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0

    def __add__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            total_tokens=self.total_tokens + other.total_tokens,
        )


class ToolCallRecord(Wire):
    _omit_none = frozenset(
        {"tool_call_id", "result", "latency_ms", "usage_metadata", "step_id", "result_step_id"}
    )
    _omit_empty = frozenset({"args"})

    tool_name: str
    args: Any = None
    tool_call_id: str | None = None
    result: str | None = None
    latency_ms: float | None = None
    usage_metadata: Any = None
    step_id: str | None = None
    result_step_id: str | None = None


class AgentResult(Wire):
    _omit_none = frozenset(
        {
            "model_used",
            "session_id",
            "request_id",
            "interaction_id",
            "token_usage",
            "latency_ms",
            "action_required",
        }
    )
    _omit_empty = frozenset({"tool_calls", "metadata"})

    content: list[ContentPart]
    agent_name: str
    model_used: str | None = None
    session_id: uuid.UUID | None = None
    request_id: uuid.UUID | None = None
    interaction_id: uuid.UUID | None = None
    token_usage: TokenUsage | None = None
    tool_calls: list[ToolCallRecord] = Field(default_factory=list)
    metadata: Any = None
    latency_ms: float | None = None
    interrupted: bool = False
    action_required: list[dict[str, Any]] | None = None

    @property
    def text(self) -> str:
        return text_of(self.content, "\n")


class StreamChunkType(StrEnum):
    CHUNK = "chunk"
    DONE = "done"
    ERROR = "error"
    PLACEHOLDER = "placeholder"
    THINKING = "thinking"
    TOOL = "tool"


class StreamChunk(Wire):
    _omit_none = frozenset(
        {
            "data",
            "result",
            "error",
            "id",
            "agent_id",
            "agent_name",
            "session_id",
            "interaction_id",
            "run_id",
            "step_id",
            "message_id",
            "timestamp",
        }
    )

    type: StreamChunkType
    data: AgentMessage | None = None
    result: AgentResult | None = None
    error: str | None = None
    id: str | None = None
    agent_id: str | None = None
    agent_name: str | None = None
    session_id: str | None = None
    interaction_id: str | None = None
    run_id: str | None = None
    step_id: str | None = None
    message_id: str | None = None
    timestamp: str | None = None

    @property
    def text(self) -> str:
        """The text of a frame's message, or of its result for a done frame."""
        if self.data is not None:
            return text_of(self.data.content, "\n")
        if self.result is not None:
            return self.result.text
        return self.error or ""
