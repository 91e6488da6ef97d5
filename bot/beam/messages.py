"""`AgentMessage`, one turn of a conversation or a frame's payload, with its role, type and phase."""

from __future__ import annotations

import uuid
from enum import StrEnum
from typing import Any

from pydantic import Field

from bot.beam.content import ContentPart
from bot.beam.wire import Timestamp, Wire, utc_now


class AgentMessageRole(StrEnum):
    SYSTEM = "system"
    HUMAN = "human"
    AI = "ai"
    TOOL = "tool"


class AgentMessageType(StrEnum):
    MESSAGE = "message"
    TOOL_RESULT = "tool_result"
    ACTION = "action"
    ACTION_RESULT = "action_result"
    STEP = "step"


class AgentMessagePhase(StrEnum):
    FINAL = "final"
    THINKING = "thinking"


class AgentMessage(Wire):
    _omit_none = frozenset(
        {
            "name",
            "run_id",
            "request_id",
            "interaction_id",
            "step_id",
            "tool_call_id",
            "tool_name",
            "tool_args",
            "tool_result",
        }
    )
    _omit_empty = frozenset({"tool_calls"})

    role: AgentMessageRole = AgentMessageRole.AI
    type: AgentMessageType = AgentMessageType.MESSAGE
    content: list[ContentPart] = Field(default_factory=list)
    id: uuid.UUID = Field(default_factory=uuid.uuid4)
    name: str | None = None
    timestamp: Timestamp = Field(default_factory=utc_now)
    run_id: str | None = None
    request_id: str | None = None
    interaction_id: str | None = None
    step_id: str | None = None
    tool_call_id: str | None = None
    tool_name: str | None = None
    tool_args: Any = None
    tool_result: Any = None
    tool_calls: list[Any] = Field(default_factory=list)
    is_delta: bool = False
    phase: AgentMessagePhase = AgentMessagePhase.FINAL
    metadata: Any = Field(default_factory=dict)

    @classmethod
    def ai_text(cls, text: str, **fields: Any) -> AgentMessage:
        return cls(content=[ContentPart.text_part(text)], **fields)
