"""The Beam agent framework: a Python port of Riverbeam that knows nothing of GitHub.

The seed's public names, in Python style. `bot.beam` never imports `bot.app`.

The names are loaded when first used (PEP 562): `import bot.beam.skills` or `bot.beam.errors` must not
pull in the HTTP client, pydantic models and the runner, so that `beam-bot run` can check its
arguments in a few milliseconds before the heavy imports (bench/cli_startup.py).
"""

from __future__ import annotations

import importlib
import sys
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

# Each public name and the module that defines it.
_WHERE: dict[str, str] = {
    "ActionStore": "bot.beam.actions",
    "InMemoryActionStore": "bot.beam.actions",
    "PendingAction": "bot.beam.actions",
    "Agent": "bot.beam.agent",
    "EchoAgent": "bot.beam.agent",
    "FrameSink": "bot.beam.agent",
    "Completion": "bot.beam.completion",
    "CompletionClient": "bot.beam.completion",
    "CompletionClientBase": "bot.beam.completion",
    "EchoClient": "bot.beam.completion",
    "PendingToolCall": "bot.beam.completion",
    "RequestAwareClient": "bot.beam.completion",
    "ScriptedClient": "bot.beam.completion",
    "CATALOG": "bot.beam.errors",
    "BeamError": "bot.beam.errors",
    "InvokeOutcome": "bot.beam.hub",
    "RiverBeam": "bot.beam.hub",
    "InMemoryMemoryStore": "bot.beam.memory",
    "MemoryStore": "bot.beam.memory",
    "RememberTool": "bot.beam.memory",
    "OpenAiCompatible": "bot.beam.openai_client",
    "AgentRegistry": "bot.beam.registry",
    "terminal_result": "bot.beam.registry",
    "RigAgentRunner": "bot.beam.runner",
    "SandboxRoot": "bot.beam.sandbox",
    "WorkingTree": "bot.beam.sandbox",
    "sandbox_tools": "bot.beam.sandbox_tools",
    "Skill": "bot.beam.skills",
    "builtin_skills": "bot.beam.skills",
    "skill_by_name": "bot.beam.skills",
    "FunctionTool": "bot.beam.tools",
    "Tool": "bot.beam.tools",
    "ToolSpec": "bot.beam.tools",
    "json_params": "bot.beam.tools",
    "ActionResponseEnvelope": "bot.beam.types",
    "ActionResponseStatus": "bot.beam.types",
    "AgentContext": "bot.beam.types",
    "AgentInput": "bot.beam.types",
    "AgentMessage": "bot.beam.types",
    "AgentMessagePhase": "bot.beam.types",
    "AgentMessageRole": "bot.beam.types",
    "AgentMessageType": "bot.beam.types",
    "AgentMetadata": "bot.beam.types",
    "AgentResult": "bot.beam.types",
    "ChatRequest": "bot.beam.types",
    "ContentPart": "bot.beam.types",
    "ContentPartType": "bot.beam.types",
    "InvokeAuthContext": "bot.beam.types",
    "InvokeRequest": "bot.beam.types",
    "Modality": "bot.beam.types",
    "ModelConfig": "bot.beam.types",
    "ModelProvider": "bot.beam.types",
    "StreamChunk": "bot.beam.types",
    "StreamChunkType": "bot.beam.types",
    "TokenUsage": "bot.beam.types",
    "ToolCallRecord": "bot.beam.types",
}
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


class _Package(ModuleType):
    """`bot.beam` itself. One public name is also a submodule's (`sandbox_tools`, the function, in
    `bot.beam.sandbox_tools`): importing the submodule sets the package's attribute to the module,
    after which `from bot.beam import sandbox_tools` gave the module. The eager imports this file
    once had bound the function last; here the function replaces the module as it is set."""

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, ModuleType) and _WHERE.get(name) == value.__name__:
            value = getattr(value, name)
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


def __getattr__(name: str) -> Any:
    """A public name, imported from its module on first use and kept (PEP 562)."""
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(where), name)
    globals()[name] = value
    return value
