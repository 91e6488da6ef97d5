"""Wire types with the original Riverbeam JSON shapes (riverbeam-reference.md section 1), in one place.

Every wire type is importable from here; each is defined in the module named for what it holds:
`wire` (the base and its omit rules), `content` (parts, modalities), `messages` (AgentMessage),
`inputs` (requests, input, context, models, approvals) and `results` (result, usage, frames).
"""

from __future__ import annotations

from bot.beam.content import (
    ContentPart,
    ContentPartType,
    Modality,
    modalities_of,
    text_of,
)
from bot.beam.inputs import (
    ActionResponseEnvelope,
    ActionResponseStatus,
    AgentContext,
    AgentInput,
    AgentMetadata,
    ChatRequest,
    InvokeAuthContext,
    InvokeRequest,
    ModelConfig,
    ModelProvider,
)
from bot.beam.messages import (
    AgentMessage,
    AgentMessagePhase,
    AgentMessageRole,
    AgentMessageType,
)
from bot.beam.results import (
    AgentResult,
    StreamChunk,
    StreamChunkType,
    TokenUsage,
    ToolCallRecord,
)
from bot.beam.wire import (
    Timestamp,
    Wire,
    utc_now,
)

__all__ = [
    "ActionResponseEnvelope",
    "ActionResponseStatus",
    "AgentContext",
    "AgentInput",
    "AgentMessage",
    "AgentMessagePhase",
    "AgentMessageRole",
    "AgentMessageType",
    "AgentMetadata",
    "AgentResult",
    "ChatRequest",
    "ContentPart",
    "ContentPartType",
    "InvokeAuthContext",
    "InvokeRequest",
    "Modality",
    "ModelConfig",
    "ModelProvider",
    "StreamChunk",
    "StreamChunkType",
    "Timestamp",
    "TokenUsage",
    "ToolCallRecord",
    "Wire",
    "modalities_of",
    "text_of",
    "utc_now",
]
