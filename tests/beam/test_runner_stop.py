"""The runner's generic stop hook: asked before every model call and tool call, it ends the run there
with what it has, and a run without a hook (or whose hook never stops it) is unchanged."""

from __future__ import annotations

import pytest

from bot.beam.completion import Completion, ScriptedClient
from bot.beam.runner import RigAgentRunner
from bot.beam.skills import Skill
from bot.beam.types import TokenUsage
from tests.support.agents import CountingTool, calls, make_context, make_input

pytestmark = pytest.mark.anyio
SKILL = Skill("review", "Review.", ())


class StopAfter:
    """Says stop once it was asked `n` times."""

    def __init__(self, n: int, reason: str = "limit max_tokens_per_run") -> None:
        self.n = n
        self.asked = 0
        self.reason = reason

    async def __call__(self) -> str | None:
        self.asked += 1
        return self.reason if self.asked > self.n else None


async def test_a_stop_before_the_next_model_call_keeps_what_the_run_has() -> None:
    read = CountingTool("read_file")
    client = ScriptedClient(
        [
            Completion(
                text="Looking at a.py first.",
                tool_calls=calls(("read_file", {"path": "a.py"})).tool_calls,
                usage=TokenUsage(prompt_tokens=100, completion_tokens=20, total_tokens=120),
            ),
            Completion.of_text("never asked"),
        ]
    )
    stop = StopAfter(2)  # before call 1, before the tool, then before call 2: stop
    runner = RigAgentRunner.new("review", client, [read.tool], SKILL, should_stop=stop)
    frames = await runner.stream(make_input(), make_context())

    result = frames[-1].result
    assert result is not None
    assert result.metadata == {"stopped": "limit max_tokens_per_run"}
    assert result.text == "Looking at a.py first."
    assert [r.tool_name for r in result.tool_calls] == ["read_file"]
    assert result.token_usage == TokenUsage(prompt_tokens=100, completion_tokens=20, total_tokens=120)
    assert len(client.requests) == 1 and client.remaining == 1
    assert read.calls == [{"path": "a.py"}]
    assert not result.interrupted


async def test_a_stop_between_tool_calls_runs_no_further_tool() -> None:
    read = CountingTool("read_file")
    client = ScriptedClient([calls(("read_file", {"path": "a"}), ("read_file", {"path": "b"}))])
    stop = StopAfter(2)  # before call 1, before tool a, then before tool b: stop
    runner = RigAgentRunner.new("review", client, [read.tool], SKILL, should_stop=stop)
    frames = await runner.stream(make_input(), make_context())
    assert read.calls == [{"path": "a"}]
    result = frames[-1].result
    assert result is not None and result.metadata == {"stopped": "limit max_tokens_per_run"}


async def test_a_hook_that_never_stops_changes_nothing() -> None:
    def script() -> ScriptedClient:
        return ScriptedClient([calls(("read_file", {"path": "a"})), Completion.of_text("Done.")])

    plain = await RigAgentRunner.new("review", script(), [CountingTool("read_file").tool], SKILL).stream(
        make_input(), make_context()
    )
    never = StopAfter(1000)
    hooked = await RigAgentRunner.for_skill(
        "review", script(), [CountingTool("read_file").tool], should_stop=never
    ).stream(make_input(), make_context())
    assert never.asked == 3  # two model calls and one tool call
    plain_result, hooked_result = plain[-1].result, hooked[-1].result
    assert plain_result is not None and hooked_result is not None
    assert hooked_result.text == plain_result.text == "Done."
    assert hooked_result.metadata is None and "metadata" not in hooked_result.to_json()
