"""A completion client written as the seed describes (only `complete`) drives RigAgentRunner."""

from __future__ import annotations

from typing import Any

import pytest

from bot.beam.completion import Completion, CompletionClient
from bot.beam.runner import RigAgentRunner
from bot.beam.skills import Skill
from bot.beam.tools import ToolSpec
from bot.beam.types import AgentInput, StreamChunk
from tests.support.agents import REQUEST, CountingTool, calls, make_context, make_input

SKILL = Skill("author", "You are a test agent.", ())


def kinds(frames: list[StreamChunk]) -> list[str]:
    return [f.type.value for f in frames]


class SeedStyleClient(CompletionClient):
    """A client written as the seed describes: it subclasses CompletionClient and has only `complete`."""

    def __init__(self, steps: list[Completion]) -> None:
        self.steps = steps
        self.seen: list[list[dict[str, Any]]] = []

    async def complete(self, messages: list[dict[str, Any]], tools: list[ToolSpec]) -> Completion:
        self.seen.append([dict(m) for m in messages])
        return self.steps.pop(0)


@pytest.mark.anyio
async def test_a_client_with_only_complete_drives_a_tool_round() -> None:
    read = CountingTool("read_file", result={"body": "hi"})
    client = SeedStyleClient([calls(("read_file", {"path": "a.md"})), Completion.of_text("read it")])
    assert not hasattr(client, "complete_for")
    agent = RigAgentRunner.new("author", client, [read.tool], SKILL)
    frames = await agent.stream(make_input(), make_context())

    assert kinds(frames) == ["placeholder", "thinking", "tool", "chunk", "done"]
    assert read.calls == [{"path": "a.md"}]
    result = frames[-1].result
    assert result is not None and result.text == "read it"
    assert [r.tool_name for r in result.tool_calls] == ["read_file"]
    assert client.steps == [] and len(client.seen) == 2
    assert client.seen[1][-1] == {"role": "tool", "tool_call_id": "call-0", "content": '{"body":"hi"}'}


@pytest.mark.anyio
async def test_complete_for_is_preferred_when_the_client_has_it() -> None:
    class Routing(SeedStyleClient):
        async def complete_for(
            self, input: AgentInput, messages: list[dict[str, Any]], tools: list[ToolSpec]
        ) -> Completion:
            return Completion.of_text(f"routed for {input.request_id}")

    frames = await RigAgentRunner.new("author", Routing([]), [], SKILL).stream(make_input(), make_context())
    assert frames[-1].text == f"routed for {REQUEST}"
