"""Issue 30: an identical repeated call of a read-only tool is answered from the first result and
told to the model as a repeat; a call that may write makes the runner forget what it read."""

from __future__ import annotations

import json

import pytest

from bot.beam.completion import Completion, ScriptedClient
from bot.beam.runner import REPEATED_CALL, RigAgentRunner
from bot.beam.skills import Skill
from tests.support.agents import CountingTool, calls, make_context, make_input

pytestmark = pytest.mark.anyio
SKILL = Skill("review", "You review.", ())


def tool_results(client: ScriptedClient) -> list[object]:
    """The tool messages of the last request, parsed."""
    return [json.loads(m["content"]) for m in client.requests[-1][0] if m["role"] == "tool"]


async def test_the_same_read_is_answered_from_the_first_result_and_called_a_repeat() -> None:
    tree = CountingTool("list_tree", result={"paths": ["a.go"]})
    client = ScriptedClient(
        [
            calls(("list_tree", {"path": ""})),
            calls(("list_tree", {"path": ""}), ("list_tree", {"path": "src"})),
            calls(("list_tree", {"path": ""})),
            Completion.of_text("done"),
        ]
    )
    frames = await RigAgentRunner.new("review", client, [tree.tool], SKILL).stream(
        make_input(), make_context()
    )
    assert tree.calls == [{"path": ""}, {"path": "src"}]  # each distinct call ran once
    first, repeat, other, again = tool_results(client)
    assert first == {"paths": ["a.go"]} == other
    assert repeat == again == {"repeated_call": REPEATED_CALL, "result": {"paths": ["a.go"]}}
    result = frames[-1].result
    assert result is not None and [r.tool_name for r in result.tool_calls] == ["list_tree"] * 4


async def test_a_write_between_two_reads_makes_the_second_read_run() -> None:
    read = CountingTool("read_file", result={"body": "x"})
    write = CountingTool("write_file", result={"written": True})
    client = ScriptedClient(
        [
            calls(("read_file", {"path": "a"})),
            calls(("write_file", {"path": "a", "body": "y"})),
            calls(("write_file", {"path": "a", "body": "y"})),  # not read-only: always runs
            calls(("read_file", {"path": "a"})),
            Completion.of_text("done"),
        ]
    )
    await RigAgentRunner.new("author", client, [read.tool, write.tool], SKILL).stream(
        make_input(), make_context()
    )
    assert read.calls == [{"path": "a"}, {"path": "a"}]
    assert len(write.calls) == 2
    assert all("repeated_call" not in r for r in tool_results(client) if isinstance(r, dict))
