"""AgentRegistry (lookup, order, modality check, terminal_result) and EchoAgent (reference 8.1, 8.2)."""

from __future__ import annotations

import pytest

from bot.beam.agent import Agent, EchoAgent, FrameSink
from bot.beam.errors import BeamError
from bot.beam.registry import AgentRegistry, human_message_from_input, terminal_result
from bot.beam.router import dev_model
from bot.beam.types import (
    AgentContext,
    AgentInput,
    AgentMetadata,
    AgentResult,
    ContentPart,
    ContentPartType,
    Modality,
    StreamChunk,
    StreamChunkType,
)
from tests.support.agents import INTERACTION, REQUEST, SESSION, FrameRecorder, make_context, make_input


class Named(Agent):
    def __init__(self, name: str, label: str, modalities: list[Modality] | None = None) -> None:
        self.name, self.label = name, label
        self.modalities = modalities or [Modality.TEXT]

    def metadata(self) -> AgentMetadata:
        return AgentMetadata(name=self.name, description=self.label, supported_modalities=self.modalities)

    async def stream(
        self, input: AgentInput, context: AgentContext, emit: FrameSink | None = None
    ) -> list[StreamChunk]:
        result = AgentResult(content=[ContentPart.text_part(self.label)], agent_name=self.name)
        return [StreamChunk(type=StreamChunkType.DONE, result=result)]


IMAGE = ContentPart(type=ContentPartType.IMAGE_URL, url="http://127.0.0.1/a.png")
AUDIO_FILE = ContentPart(type=ContentPartType.FILE, mime_type="audio/wav", data="AAAA")


def test_register_last_wins_and_order_is_registration_order() -> None:
    registry = AgentRegistry()
    for name in ("zeta", "alpha", "mid"):
        registry.register(Named(name, f"{name}-1"))
    registry.register(Named("alpha", "alpha-2"))
    listed = registry.list_agents()
    assert [m.name for m in listed] == ["zeta", "alpha", "mid"]
    assert registry.get_metadata("alpha").description == "alpha-2"


def test_get_metadata_unknown_is_bem_020_with_the_name() -> None:
    with pytest.raises(BeamError) as err:
        AgentRegistry().get_metadata("ghost")
    assert (err.value.code, err.value.data, err.value.http_status) == ("BEM-020", {"detail": "ghost"}, 404)


@pytest.mark.anyio
async def test_dispatch_unknown_is_bem_021() -> None:
    with pytest.raises(BeamError) as err:
        await AgentRegistry().dispatch("ghost", make_input(), make_context())
    assert err.value.code == "BEM-021"


@pytest.mark.anyio
async def test_dispatch_modality_check_bem_040() -> None:
    registry = AgentRegistry()
    registry.register(Named("t", "x"))
    registry.register(Named("multi", "y", [Modality.TEXT, Modality.IMAGE]))
    with pytest.raises(BeamError) as err:
        await registry.dispatch(
            "t", make_input(parts=[ContentPart.text_part("a"), IMAGE, AUDIO_FILE]), make_context()
        )
    assert err.value.code == "BEM-040" and err.value.http_status == 400
    assert err.value.data == {
        "detail": "Agent 't' does not support modalities: [Image, Audio]. Supported: {Text}"
    }
    frames = await registry.dispatch("multi", make_input(parts=[IMAGE]), make_context())
    assert terminal_result(frames).text == "y"
    # An empty content has no modality and passes.
    assert await registry.dispatch("t", make_input(parts=[]), make_context())


def result_frame(text: str = "r") -> StreamChunk:
    return StreamChunk(
        type=StreamChunkType.DONE, result=AgentResult(content=[ContentPart.text_part(text)], agent_name="a")
    )


def frame(kind: StreamChunkType, error: str | None = None) -> StreamChunk:
    return StreamChunk(type=kind, error=error)


def test_terminal_result_rules() -> None:
    chatter = [
        frame(StreamChunkType.PLACEHOLDER),
        frame(StreamChunkType.THINKING),
        frame(StreamChunkType.TOOL),
    ]
    assert terminal_result([*chatter, frame(StreamChunkType.CHUNK), result_frame("one")]).text == "one"
    # The first done wins; anything after it, errors included, is ignored.
    assert (
        terminal_result([result_frame("1"), frame(StreamChunkType.ERROR, "x"), result_frame("2")]).text == "1"
    )

    with pytest.raises(BeamError) as err:
        terminal_result([frame(StreamChunkType.ERROR, "boom"), result_frame()])
    assert (err.value.code, err.value.data) == ("BEM-087", {"detail": "boom"})
    with pytest.raises(BeamError) as err:
        terminal_result([frame(StreamChunkType.ERROR)])
    assert err.value.data == {"detail": "stream error"}

    for frames in ([], chatter, [frame(StreamChunkType.DONE)]):
        with pytest.raises(BeamError) as err:
            terminal_result(frames)
        assert (err.value.code, err.value.data) == ("BEM-086", None)


@pytest.mark.anyio
async def test_echo_agent_matches_the_agent_result_fixture() -> None:
    agent = EchoAgent("kb-assistant")
    meta = agent.metadata().to_json()
    assert meta == {
        "name": "kb-assistant",
        "description": "Echo agent for tests and local dev",
        "supported_modalities": ["text"],
        "output_modalities": ["text"],
        "tags": [],
        "version": "1.0.0",
    }
    context = AgentContext(session_id=str(SESSION), model_config_resolved=dev_model())
    sink = FrameRecorder()
    inp = make_input("what is river-beam?")
    frames = await agent.stream(inp, context, sink)
    assert [f.type for f in frames] == [StreamChunkType.CHUNK, StreamChunkType.DONE]
    assert sink.frames == frames
    assert frames[0].text == "Echo: what is river-beam?"
    assert frames[0].to_json()["data"]["role"] == "ai"
    assert frames[1].to_json()["run_id"] == str(inp.run_id)
    result = frames[1].result
    assert result is not None
    assert result.to_json() == {
        "content": [{"type": "text", "text": "Echo: what is river-beam?"}],
        "agent_name": "kb-assistant",
        "model_used": "gpt-4o-mini",
        "session_id": str(SESSION),
        "request_id": str(REQUEST),
        "interaction_id": str(INTERACTION),
        "token_usage": {"prompt_tokens": 4, "completion_tokens": 4, "total_tokens": 8},
        "latency_ms": 0.0,
        "interrupted": False,
    }
    assert await agent.health_check() is True


@pytest.mark.anyio
async def test_echo_agent_joins_with_space_and_counts_bytes() -> None:
    agent = EchoAgent("e")
    parts = [ContentPart.text_part("héllo"), IMAGE, ContentPart.text_part("wörld")]
    frames = await agent.stream(make_input(parts=parts), make_context())
    result = frames[-1].result
    assert result is not None
    assert result.text == "Echo: héllo wörld"
    assert result.model_used is None
    # 13 bytes of UTF-8 ("héllo wörld") // 4 = 3
    assert result.token_usage is not None and result.token_usage.prompt_tokens == 3
    empty = await agent.stream(make_input(parts=[IMAGE]), make_context())
    assert empty[0].text == "(empty)"


def test_human_message_keeps_every_part() -> None:
    message = human_message_from_input(make_input(parts=[ContentPart.text_part("a"), IMAGE]))
    wire = message.to_json()
    assert wire["role"] == "human" and len(wire["content"]) == 2
    assert "run_id" not in wire and "request_id" not in wire
