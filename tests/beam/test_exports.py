"""The public surface of `bot.beam`, pinned: the seed's names, and nothing from the app layer."""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import bot.beam
import bot.beam.types

SEED_NAMES = {
    "RiverBeam",
    "AgentRegistry",
    "EchoAgent",
    "RigAgentRunner",
    "CompletionClient",
    "Completion",
    "OpenAiCompatible",
    "EchoClient",
    "ScriptedClient",
    "Tool",
    "ToolSpec",
    "json_params",
    "Skill",
    "builtin_skills",
    "skill_by_name",
    "SandboxRoot",
    "WorkingTree",
    "sandbox_tools",
    "BeamError",
    "AgentInput",
    "AgentContext",
    "AgentMessage",
    "AgentMetadata",
    "AgentResult",
    "StreamChunk",
    "ContentPart",
    "InvokeRequest",
    "ActionResponseEnvelope",
    "TokenUsage",
    "ToolCallRecord",
    "ModelConfig",
}


def test_seed_names_are_exported() -> None:
    missing = SEED_NAMES - set(bot.beam.__all__)
    assert not missing, f"not exported from bot.beam: {sorted(missing)}"
    for name in bot.beam.__all__:
        assert hasattr(bot.beam, name), name


def test_stream_complete_and_invoke_are_async() -> None:
    assert inspect.iscoroutinefunction(bot.beam.RiverBeam.invoke)
    assert inspect.iscoroutinefunction(bot.beam.EchoClient.complete)
    assert inspect.iscoroutinefunction(bot.beam.OpenAiCompatible.complete)
    assert inspect.iscoroutinefunction(bot.beam.RigAgentRunner.stream)
    assert inspect.iscoroutinefunction(bot.beam.EchoAgent.stream)


def test_framework_never_imports_the_app() -> None:
    root = Path(bot.beam.__file__).parent
    offenders = []
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offenders += [f"{path.name}: {n}" for n in names if n == "bot.app" or n.startswith("bot.app.")]
    assert offenders == []


WIRE_NAMES = {
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
}


def test_every_wire_name_stays_importable_from_bot_beam_types() -> None:
    assert set(bot.beam.types.__all__) == WIRE_NAMES
    for name in WIRE_NAMES:
        assert getattr(bot.beam.types, name) is not None, name
    assert bot.beam.types.AgentInput is bot.beam.AgentInput


def test_every_public_name_is_loaded_from_where_it_is_defined() -> None:
    """`bot.beam` loads its names on first use (PEP 562); each one it lists resolves, from its module."""
    where = bot.beam._WHERE
    assert set(where) == set(bot.beam.__all__)
    for name, module in where.items():
        assert getattr(bot.beam, name) is getattr(importlib.import_module(module), name)
