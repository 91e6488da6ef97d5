"""What goes into an agent: invoke requests, the agent input and context, models, metadata, approvals."""

from __future__ import annotations

import uuid
from enum import StrEnum
from typing import Any

from pydantic import AliasChoices, Field, SerializerFunctionWrapHandler, model_serializer

from bot.beam.content import ContentPart, Modality, modalities_of
from bot.beam.messages import AgentMessage
from bot.beam.wire import Timestamp, Wire, utc_now


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
