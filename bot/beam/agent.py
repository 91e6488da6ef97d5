"""The `Agent` protocol, the frame helpers every agent shares, and `EchoAgent`.

An agent turns one `AgentInput` (plus the context the hub builds) into a list of frames that ends in
a `done` frame carrying the `AgentResult` (riverbeam-reference.md sections 1.9 and 8). Unlike the
original, an agent may also hand each frame to an `emit` callback as soon as it exists, so a host can
show progress while the run goes on; the returned list is still the whole run.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypedDict, runtime_checkable

from bot.beam.types import (
    AgentContext,
    AgentInput,
    AgentMessage,
    AgentMetadata,
    AgentResult,
    ContentPart,
    StreamChunk,
    StreamChunkType,
    TokenUsage,
    text_of,
)

FrameSink = Callable[[StreamChunk], Awaitable[None]]
"""Receives each frame as it is produced; its errors propagate and end the run."""


@runtime_checkable
class Agent(Protocol):
    """Anything the hub can dispatch to. Subclass it to inherit the default `health_check`."""

    def metadata(self) -> AgentMetadata: ...

    async def stream(
        self, input: AgentInput, context: AgentContext, emit: FrameSink | None = None
    ) -> list[StreamChunk]: ...

    async def health_check(self) -> bool:
        return True


class FrameHeaders(TypedDict, total=False):
    """The header fields set on every frame, as strings; the other optional headers stay unset."""

    agent_name: str
    session_id: str
    interaction_id: str
    run_id: str


def frame_headers(agent_name: str, input: AgentInput) -> FrameHeaders:
    headers = FrameHeaders(agent_name=agent_name, session_id=str(input.session_id))
    if input.interaction_id is not None:
        headers["interaction_id"] = str(input.interaction_id)
    headers["run_id"] = str(input.run_id)
    return headers


def message_frame(
    kind: StreamChunkType,
    text: str,
    headers: FrameHeaders,
    *,
    tool_name: str | None = None,
    tool_args: Any = None,
) -> StreamChunk:
    """A placeholder, thinking, chunk or tool frame: an AI message holding one text part."""
    data = AgentMessage(content=[ContentPart.text_part(text)], tool_name=tool_name, tool_args=tool_args)
    return StreamChunk(type=kind, data=data, **headers)


def done_frame(result: AgentResult, headers: FrameHeaders) -> StreamChunk:
    return StreamChunk(type=StreamChunkType.DONE, result=result, **headers)


class FrameLog:
    """Collects a run's frames and passes each one to the sink at once, in order."""

    __slots__ = ("_emit", "frames")

    def __init__(self, emit: FrameSink | None) -> None:
        self._emit = emit
        self.frames: list[StreamChunk] = []

    async def push(self, frame: StreamChunk) -> None:
        self.frames.append(frame)
        if self._emit is not None:
            await self._emit(frame)


class EchoAgent(Agent):
    """Replies "Echo: <text>": the agent for local development and pipeline tests (reference 8.2)."""

    def __init__(self, name: str) -> None:
        self._name = name

    def metadata(self) -> AgentMetadata:
        return AgentMetadata(name=self._name, description="Echo agent for tests and local dev")

    async def stream(
        self, input: AgentInput, context: AgentContext, emit: FrameSink | None = None
    ) -> list[StreamChunk]:
        text = text_of(input.content, " ")
        reply = f"Echo: {text}" if text else "(empty)"
        prompt_tokens = len(text.encode()) // 4
        model = context.model_config_resolved
        result = AgentResult(
            content=[ContentPart.text_part(reply)],
            agent_name=self._name,
            model_used=model.name if model is not None else None,
            session_id=input.session_id,
            request_id=input.request_id,
            interaction_id=input.interaction_id,
            token_usage=TokenUsage(
                prompt_tokens=prompt_tokens, completion_tokens=4, total_tokens=prompt_tokens + 4
            ),
            latency_ms=0.0,
        )
        headers = frame_headers(self._name, input)
        log = FrameLog(emit)
        await log.push(message_frame(StreamChunkType.CHUNK, reply, headers))
        await log.push(done_frame(result, headers))
        return log.frames
