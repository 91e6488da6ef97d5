"""Wire types with the original Riverbeam JSON shapes (riverbeam-reference.md section 1).

Field order, defaults and the "omitted when" rules are part of the contract: other Riverbeam clients
read these frames. Each model lists which fields it drops when they are None (`_omit_none`) and
which it drops when they are None, `{}` or `[]` (`_omit_empty`); everything else is always written.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any, ClassVar

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    SerializerFunctionWrapHandler,
    model_serializer,
)


def _rfc3339(value: datetime) -> str:
    """RFC 3339 UTC with `Z`, with as many fractional digits as needed (as chrono writes them)."""
    value = value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=UTC)
    base = value.strftime("%Y-%m-%dT%H:%M:%S")
    micro = value.microsecond
    if micro == 0:
        return base + "Z"
    if micro % 1000 == 0:
        return f"{base}.{micro // 1000:03d}Z"
    return f"{base}.{micro:06d}Z"


Timestamp = Annotated[datetime, PlainSerializer(_rfc3339, return_type=str)]


def utc_now() -> datetime:
    return datetime.now(UTC)


class Wire(BaseModel):
    """Base of every wire type: applies the omit rules after pydantic's own serialization."""

    model_config = ConfigDict(populate_by_name=True, extra="ignore", use_enum_values=False)

    _omit_none: ClassVar[frozenset[str]] = frozenset()
    _omit_empty: ClassVar[frozenset[str]] = frozenset()
    _omit_blank: ClassVar[frozenset[str]] = frozenset()  # strings dropped when ""

    @model_serializer(mode="wrap")
    def _omit(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        for key in list(data):
            value = data[key]
            if (
                (key in self._omit_none and value is None)
                or (key in self._omit_empty and (value is None or value == {} or value == []))
                or (key in self._omit_blank and value == "")
            ):
                del data[key]
        return data

    def to_json(self) -> dict[str, Any]:
        """The JSON value the original would write."""
        return self.model_dump(mode="json")


class Modality(StrEnum):
    TEXT = "text"
    IMAGE = "image"
    AUDIO = "audio"
    VIDEO = "video"


class ContentPartType(StrEnum):
    TEXT = "text"
    IMAGE_URL = "image_url"
    IMAGE_BASE64 = "image_base64"
    AUDIO = "audio"
    FILE = "file"
    VIDEO = "video"
    MEDIA_REF = "media_ref"
    REASONING = "reasoning"


class ContentPart(Wire):
    _omit_none = frozenset({"text", "url", "data", "mime_type", "media_id"})
    _omit_empty = frozenset({"metadata"})

    type: ContentPartType
    text: str | None = None
    url: str | None = None
    data: str | None = None
    mime_type: str | None = None
    metadata: Any = Field(default_factory=dict)
    media_id: uuid.UUID | None = None

    @classmethod
    def text_part(cls, text: str) -> ContentPart:
        return cls(type=ContentPartType.TEXT, text=text)

    def modality(self) -> Modality:
        kind = self.type
        if kind in (ContentPartType.TEXT, ContentPartType.REASONING):
            return Modality.TEXT
        if kind in (ContentPartType.IMAGE_URL, ContentPartType.IMAGE_BASE64):
            return Modality.IMAGE
        if kind is ContentPartType.AUDIO:
            return Modality.AUDIO
        if kind is ContentPartType.VIDEO:
            return Modality.VIDEO
        mime = self.mime_type or ""
        for prefix, modality in (("video/", Modality.VIDEO), ("audio/", Modality.AUDIO)):
            if mime.startswith(prefix):
                return modality
        if mime.startswith("image/"):
            return Modality.IMAGE
        return Modality.TEXT


def modalities_of(parts: list[ContentPart]) -> set[Modality]:
    return {part.modality() for part in parts}


def text_of(parts: list[ContentPart], sep: str) -> str:
    """Join the text parts; the separator differs by call site in the original (see 9.3)."""
    return sep.join(
        part.text for part in parts if part.type is ContentPartType.TEXT and part.text is not None
    )


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


class AgentMetadata(Wire):
    _omit_blank = frozenset({"description"})

    name: str
    description: str = ""
    supported_modalities: list[Modality] = Field(default_factory=lambda: [Modality.TEXT])
    output_modalities: list[Modality] = Field(default_factory=lambda: [Modality.TEXT])
    tags: list[str] = Field(default_factory=list)
    version: str = "1.0.0"


class InvokeAuthContext(Wire):
    _omit_none = frozenset({"profile_id", "user_id", "org_id", "mcp_token"})

    profile_id: str | None = None
    user_id: str | None = None
    org_id: str | None = Field(default=None, validation_alias=AliasChoices("org_id", "organization_id"))
    mcp_token: str | None = None


class ActionResponseStatus(StrEnum):
    SUBMITTED = "submitted"
    CANCELLED = "cancelled"
    EXPIRED = "expired"
    INVALID = "invalid"


class ActionResponseEnvelope(Wire):
    _omit_none = frozenset({"lc_action_id", "payload", "responder_id"})
    _omit_empty = frozenset({"errors"})

    action_id: str
    lc_action_id: str | None = None
    kind: str
    request_id: str
    status: ActionResponseStatus = ActionResponseStatus.SUBMITTED
    payload: Any = None
    errors: list[str] = Field(default_factory=list)
    responder_id: str | None = None
    responded_at: Timestamp = Field(default_factory=utc_now)


class AgentInput(Wire):
    _omit_none = frozenset(
        {"interaction_id", "request_id", "agent_name", "model_override", "auth_context", "actions"}
    )
    _omit_empty = frozenset({"metadata"})

    content: list[ContentPart]
    session_id: uuid.UUID
    interaction_id: uuid.UUID | None = None
    request_id: uuid.UUID | None = None
    run_id: uuid.UUID
    agent_name: str | None = None
    model_override: str | None = None
    metadata: Any = None
    auth_context: InvokeAuthContext | None = None
    stream: bool = False
    actions: list[ActionResponseEnvelope] | None = None

    def modalities(self) -> set[Modality]:
        return modalities_of(self.content)

    @property
    def user_id(self) -> str | None:
        return self.auth_context.user_id if self.auth_context else None

    def meta(self, key: str) -> Any:
        """One key of `metadata`, or None when metadata is not an object."""
        return self.metadata.get(key) if isinstance(self.metadata, dict) else None


class ModelProvider(StrEnum):
    OPENAI = "openai"
    ANTHROPIC = "anthropic"
    CUSTOM = "custom"
    OLLAMA = "ollama"
    GROQ = "groq"
    NVIDIA = "nvidia"


class ModelConfig(Wire):
    """Quirk kept: `provider_config` and `extra` default to null and are dropped only when `{}`."""

    _omit_none = frozenset({"api_key"})

    name: str
    provider: ModelProvider
    provider_config: Any = None
    modalities: list[Modality] = Field(default_factory=lambda: [Modality.TEXT])
    capabilities: list[str] = Field(default_factory=list)
    cost_per_1k_tokens: float = 0.0
    max_tokens: int = 4096
    api_key: str | None = None
    extra: Any = None

    @model_serializer(mode="wrap")
    def _omit(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        for key in ("provider_config", "extra"):
            if data.get(key) == {}:
                del data[key]
        if data.get("api_key") is None:
            data.pop("api_key", None)
        return data


class AgentContext(Wire):
    _omit_none = frozenset({"user_id", "model_config_resolved"})
    _omit_empty = frozenset({"metadata"})

    session_id: str
    user_id: str | None = None
    conversation_history: list[AgentMessage] = Field(default_factory=list)
    model_config_resolved: ModelConfig | None = None
    available_tools: list[str] = Field(default_factory=list)
    metadata: Any = None


class InvokeRequest(Wire):
    _omit_none = frozenset({"model_override", "interaction_id", "request_id", "actions", "auth_context"})
    _omit_empty = frozenset({"metadata"})

    agent_name: str
    content: list[ContentPart]
    session_id: uuid.UUID
    model_override: str | None = None
    metadata: Any = None
    interaction_id: uuid.UUID | None = None
    request_id: uuid.UUID | None = None
    stream: bool = False
    actions: list[ActionResponseEnvelope] | None = None
    auth_context: InvokeAuthContext | None = None


class ChatRequest(Wire):
    _omit_none = frozenset({"request_id"})
    _omit_empty = frozenset({"metadata"})

    agent_name: str
    message: str
    session_id: uuid.UUID
    metadata: Any = None
    request_id: uuid.UUID | None = None
    stream: bool = False


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
