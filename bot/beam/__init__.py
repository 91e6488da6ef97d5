"""The Beam agent framework: a Python port of Riverbeam that knows nothing of GitHub.

The seed's public names, in Python style. `bot.beam` never imports `bot.app`.
"""

from bot.beam.actions import ActionStore, InMemoryActionStore, PendingAction
from bot.beam.agent import Agent, EchoAgent, FrameSink
from bot.beam.completion import (
    Completion,
    CompletionClient,
    CompletionClientBase,
    EchoClient,
    PendingToolCall,
    RequestAwareClient,
    ScriptedClient,
)
from bot.beam.errors import CATALOG, BeamError
from bot.beam.hub import InvokeOutcome, RiverBeam
from bot.beam.memory import InMemoryMemoryStore, MemoryStore, RememberTool
from bot.beam.openai_client import OpenAiCompatible
from bot.beam.registry import AgentRegistry, terminal_result
from bot.beam.runner import RigAgentRunner
from bot.beam.sandbox import SandboxRoot, WorkingTree
from bot.beam.sandbox_tools import sandbox_tools
from bot.beam.skills import Skill, builtin_skills, skill_by_name
from bot.beam.tools import FunctionTool, Tool, ToolSpec, json_params
from bot.beam.types import (
    ActionResponseEnvelope,
    ActionResponseStatus,
    AgentContext,
    AgentInput,
    AgentMessage,
    AgentMessagePhase,
    AgentMessageRole,
    AgentMessageType,
    AgentMetadata,
    AgentResult,
    ChatRequest,
    ContentPart,
    ContentPartType,
    InvokeAuthContext,
    InvokeRequest,
    Modality,
    ModelConfig,
    ModelProvider,
    StreamChunk,
    StreamChunkType,
    TokenUsage,
    ToolCallRecord,
)

__all__ = [
    "CATALOG",
    "ActionResponseEnvelope",
    "ActionResponseStatus",
    "ActionStore",
    "Agent",
    "AgentContext",
    "AgentInput",
    "AgentMessage",
    "AgentMessagePhase",
    "AgentMessageRole",
    "AgentMessageType",
    "AgentMetadata",
    "AgentRegistry",
    "AgentResult",
    "BeamError",
    "ChatRequest",
    "Completion",
    "CompletionClient",
    "CompletionClientBase",
    "ContentPart",
    "ContentPartType",
    "EchoAgent",
    "EchoClient",
    "FrameSink",
    "FunctionTool",
    "InMemoryActionStore",
    "InMemoryMemoryStore",
    "InvokeAuthContext",
    "InvokeOutcome",
    "InvokeRequest",
    "MemoryStore",
    "Modality",
    "ModelConfig",
    "ModelProvider",
    "OpenAiCompatible",
    "PendingAction",
    "PendingToolCall",
    "RememberTool",
    "RequestAwareClient",
    "RigAgentRunner",
    "RiverBeam",
    "SandboxRoot",
    "ScriptedClient",
    "Skill",
    "StreamChunk",
    "StreamChunkType",
    "TokenUsage",
    "Tool",
    "ToolCallRecord",
    "ToolSpec",
    "WorkingTree",
    "builtin_skills",
    "json_params",
    "sandbox_tools",
    "skill_by_name",
    "terminal_result",
]
