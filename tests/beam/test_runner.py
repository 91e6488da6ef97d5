"""RigAgentRunner driven by ScriptedClient: frames, messages, the loop's limits, approval and resume."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from bot.beam.completion import Completion, ScriptedClient
from bot.beam.errors import BeamError
from bot.beam.runner import PROGRESS_TEXT, RigAgentRunner
from bot.beam.skills import Skill, skill_by_name
from bot.beam.tools import FunctionTool, ToolSpec
from bot.beam.types import (
    AgentMessage,
    AgentMessageRole,
    ContentPart,
    ContentPartType,
    StreamChunk,
    TokenUsage,
)
from tests.support.agents import (
    INTERACTION,
    REQUEST,
    SESSION,
    CountingTool,
    FrameRecorder,
    calls,
    envelope,
    make_context,
    make_input,
)

PROMPT = "You are a test agent."
SKILL = Skill("author", PROMPT, ())


def runner(client: ScriptedClient, *tools: CountingTool, skill: Skill = SKILL) -> RigAgentRunner:
    return RigAgentRunner.new("author", client, [t.tool for t in tools], skill)


def kinds(frames: list[StreamChunk]) -> list[str]:
    return [f.type.value for f in frames]


@pytest.mark.anyio
async def test_text_answer_frames_and_result() -> None:
    client = ScriptedClient([Completion.of_text("All done.")])
    inp = make_input()
    frames = await runner(client).stream(inp, make_context())

    assert kinds(frames) == ["placeholder", "thinking", "chunk", "done"]
    assert PROGRESS_TEXT == "Retrieving allowed pages\u2026"
    assert [f.text for f in frames[:3]] == [PROGRESS_TEXT, PROGRESS_TEXT, "All done."]
    for frame in frames:
        wire = frame.to_json()
        assert wire["agent_name"] == "author"
        assert wire["session_id"] == str(SESSION)
        assert wire["interaction_id"] == str(INTERACTION)
        assert wire["run_id"] == str(inp.run_id)
        assert not {"id", "agent_id", "step_id", "message_id", "timestamp"} & wire.keys()
    for frame in frames[:3]:
        data = frame.to_json()["data"]
        assert (data["role"], data["type"], data["phase"], data["is_delta"]) == (
            "ai",
            "message",
            "final",
            False,
        )
        assert data["metadata"] == {}
    assert len({f.data.id for f in frames[:3] if f.data}) == 3
    done = frames[3]
    assert done.data is None and done.result is not None
    result = done.result.to_json()
    assert result["content"] == [{"type": "text", "text": "All done."}]
    assert result["session_id"] == str(SESSION)
    assert result["request_id"] == str(REQUEST)
    assert result["interaction_id"] == str(INTERACTION)
    assert result["interrupted"] is False
    assert "action_required" not in result and "tool_calls" not in result
    assert result["token_usage"] == {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    assert isinstance(result["latency_ms"], float) and result["latency_ms"] >= 0.0


@pytest.mark.anyio
async def test_messages_prompt_history_and_user_turn() -> None:
    client = ScriptedClient([Completion.of_text("ok")])
    history = [
        AgentMessage(role=AgentMessageRole.SYSTEM, content=[ContentPart.text_part("[note repo] fact")]),
        AgentMessage(
            role=AgentMessageRole.HUMAN, content=[ContentPart.text_part("a"), ContentPart.text_part("b")]
        ),
        AgentMessage(role=AgentMessageRole.AI, content=[]),
        AgentMessage(role=AgentMessageRole.TOOL, content=[ContentPart.text_part("t")]),
    ]
    image = ContentPart(type=ContentPartType.IMAGE_URL, url="http://127.0.0.1/x.png")
    inp = make_input(parts=[ContentPart.text_part("line 1"), image, ContentPart.text_part("line 2")])
    await runner(client).stream(inp, make_context(history))

    messages, _ = client.requests[0]
    assert messages == [
        {"role": "system", "content": PROMPT},
        {"role": "system", "content": "[note repo] fact"},
        {"role": "user", "content": "a\nb"},
        {"role": "assistant", "content": ""},
        {"role": "tool", "content": "t"},
        {"role": "user", "content": "line 1\nline 2"},
    ]


@pytest.mark.anyio
async def test_empty_prompt_and_empty_user_text_are_not_sent() -> None:
    client = ScriptedClient([Completion.of_text("")])
    frames = await runner(client, skill=Skill("x", "", ())).stream(make_input(None), make_context())
    assert client.requests[0][0] == []
    assert frames[-2].text == "" and frames[-1].text == ""


@pytest.mark.anyio
async def test_tool_round_frames_records_and_messages() -> None:
    read = CountingTool("read_file", result={"path": "a.md", "body": "héllo"})
    other = CountingTool("list_tree")
    client = ScriptedClient([calls(("read_file", {"path": "a.md"})), Completion.of_text("read it")])
    frames = await runner(client, read, other).stream(make_input(), make_context())

    assert kinds(frames) == ["placeholder", "thinking", "tool", "chunk", "done"]
    tool_frame = frames[2]
    assert tool_frame.data is not None
    assert tool_frame.text == "read_file\u2026"
    assert tool_frame.data.tool_name == "read_file"
    assert tool_frame.data.tool_args == {"path": "a.md"}
    assert read.calls == [{"path": "a.md"}]
    result = frames[-1].result
    assert result is not None
    assert [r.to_json() for r in result.tool_calls] == [
        {
            "tool_name": "read_file",
            "args": {"path": "a.md"},
            "tool_call_id": "call-0",
            "result": '{"path":"a.md","body":"héllo"}',
        }
    ]
    second, specs = client.requests[1]
    assert second[-2:] == [
        {
            "role": "assistant",
            "tool_calls": [
                {
                    "id": "call-0",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path":"a.md"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call-0", "content": '{"path":"a.md","body":"héllo"}'},
    ]
    assert [s.name for s in specs] == ["read_file", "list_tree"]
    assert [[s.name for s in req[1]] for req in client.requests] == [["read_file", "list_tree"]] * 2


@pytest.mark.anyio
async def test_parallel_calls_get_one_assistant_message_each() -> None:
    tool = CountingTool("git_status")
    client = ScriptedClient([calls(("git_status", {}), ("git_status", {"x": 1})), Completion.of_text("ok")])
    await runner(client, tool).stream(make_input(), make_context())
    tail = client.requests[1][0][-4:]
    assert [m["role"] for m in tail] == ["assistant", "tool", "assistant", "tool"]
    assert "content" not in tail[0]
    assert tool.calls == [{}, {"x": 1}]


@pytest.mark.anyio
async def test_eight_rounds_then_bem_088_after_round_eight_ran() -> None:
    tool = CountingTool("git_status")
    client = ScriptedClient([calls(("git_status", {"round": i})) for i in range(9)])
    with pytest.raises(BeamError) as err:
        await runner(client, tool).stream(make_input(), make_context())
    assert err.value.code == "BEM-088"
    assert len(client.requests) == 8
    assert tool.calls == [{"round": i} for i in range(8)]
    assert client.remaining == 1


@pytest.mark.anyio
async def test_text_on_round_eight_succeeds() -> None:
    tool = CountingTool("git_status")
    client = ScriptedClient([*(calls(("git_status", {})) for _ in range(7)), Completion.of_text("finally")])
    frames = await runner(client, tool).stream(make_input(), make_context())
    assert kinds(frames).count("tool") == 7
    assert frames[-1].text == "finally"


@pytest.mark.anyio
async def test_empty_tool_call_batch_uses_a_round() -> None:
    client = ScriptedClient([Completion.of_tool_calls([]), Completion.of_text("ok")])
    frames = await runner(client).stream(make_input(), make_context())
    assert kinds(frames) == ["placeholder", "thinking", "chunk", "done"]
    assert len(client.requests) == 2


@pytest.mark.anyio
async def test_unknown_tool_is_bem_089_and_stops_the_batch() -> None:
    after = CountingTool("git_status")
    client = ScriptedClient([calls(("nope", {}), ("git_status", {}))])
    with pytest.raises(BeamError) as err:
        await runner(client, after).stream(make_input(), make_context())
    assert (err.value.code, err.value.data) == ("BEM-089", {"detail": "nope"})
    assert after.calls == []


@pytest.mark.anyio
async def test_tool_dropped_by_allowlist_is_unknown() -> None:
    write = CountingTool("write_file")
    client = ScriptedClient([calls(("write_file", {"path": "x"}))])
    agent = RigAgentRunner.for_skill("review", client, [write.tool])
    with pytest.raises(BeamError) as err:
        await agent.stream(make_input(), make_context())
    assert err.value.code == "BEM-089"
    assert write.calls == []


@pytest.mark.anyio
async def test_tool_error_ends_the_run() -> None:
    failing = CountingTool("git_push", error=BeamError("BEM-328", {"detail": "main"}))
    later = CountingTool("git_status")
    client = ScriptedClient(
        [calls(("git_push", {"ref": "main"}), ("git_status", {})), Completion.of_text("x")]
    )
    with pytest.raises(BeamError) as err:
        await runner(client, failing, later).stream(make_input(metadata={"confirm": True}), make_context())
    assert err.value.code == "BEM-328"
    assert later.calls == []
    assert len(client.requests) == 1


@pytest.mark.anyio
async def test_mixed_batch_runs_the_free_calls_and_holds_the_confirmed_one() -> None:
    read = CountingTool("read_file")
    push = CountingTool("git_push", confirm=True, result={"pushed": "change-1"})
    write = CountingTool("write_file")
    client = ScriptedClient(
        [
            calls(("read_file", {"path": "a"})),
            calls(
                ("read_file", {"path": "b"}), ("git_push", {"ref": "change-1"}), ("write_file", {"path": "c"})
            ),
        ]
    )
    frames = await runner(client, read, push, write).stream(make_input(), make_context())

    assert kinds(frames) == ["placeholder", "thinking", "tool", "tool", "tool", "done"]
    assert [f.data.tool_name for f in frames if f.data and f.data.tool_name] == [
        "read_file",
        "read_file",
        "write_file",
    ]
    assert read.calls == [{"path": "a"}, {"path": "b"}]
    assert write.calls == [{"path": "c"}]
    assert push.calls == []
    result = frames[-1].result
    assert result is not None
    assert result.text == "confirmation required"
    assert result.interrupted is True
    assert [r.tool_name for r in result.tool_calls] == ["read_file", "read_file", "write_file"]
    assert result.action_required is not None and len(result.action_required) == 1
    entry = result.action_required[0]
    assert list(entry) == ["action_id", "kind", "tool", "args"]
    assert uuid.UUID(entry["action_id"]).version == 4
    assert (entry["kind"], entry["tool"], entry["args"]) == ("confirmation", "git_push", {"ref": "change-1"})
    assert len(client.requests) == 2


@pytest.mark.parametrize(("confirm", "held"), [(True, False), ("true", True), (1, True), (None, True)])
@pytest.mark.anyio
async def test_confirm_skip_only_with_json_true(confirm: Any, held: bool) -> None:
    push = CountingTool("git_push", confirm=True)
    client = ScriptedClient([calls(("git_push", {"ref": "b"})), Completion.of_text("pushed")])
    metadata = {"confirm": confirm} if confirm is not None else None
    frames = await runner(client, push).stream(make_input(metadata=metadata), make_context())
    result = frames[-1].result
    assert result is not None
    assert result.interrupted is held
    assert push.calls == ([] if held else [{"ref": "b"}])


@pytest.mark.anyio
async def test_usage_is_summed_and_model_used_is_the_last_model() -> None:
    tool = CountingTool("git_status")
    client = ScriptedClient(
        [
            calls(
                ("git_status", {}),
                usage=TokenUsage(prompt_tokens=1, completion_tokens=2, total_tokens=3),
                model="m-1",
            ),
            calls(("git_status", {})),
            Completion.of_text(
                "ok", usage=TokenUsage(prompt_tokens=10, completion_tokens=20, total_tokens=30), model="m-2"
            ),
        ]
    )
    frames = await runner(client, tool).stream(make_input(), make_context())
    result = frames[-1].result
    assert result is not None
    assert result.token_usage == TokenUsage(prompt_tokens=11, completion_tokens=22, total_tokens=33)
    assert result.model_used == "m-2"


@pytest.mark.anyio
async def test_emit_receives_each_frame_as_it_happens() -> None:
    sink = FrameRecorder()
    seen_at_call: list[list[str]] = []

    async def observe(args: Any, input: Any) -> Any:
        seen_at_call.append([f.type.value for f in sink.frames])
        return {}

    tool = FunctionTool(ToolSpec("git_status", "s"), observe)
    client = ScriptedClient([calls(("git_status", {})), Completion.of_text("ok")])
    frames = await RigAgentRunner.new("author", client, [tool], SKILL).stream(
        make_input(), make_context(), sink
    )
    assert seen_at_call == [["placeholder", "thinking", "tool"]]
    assert len(sink.frames) == len(frames)
    assert all(a is b for a, b in zip(sink.frames, frames, strict=True))


@pytest.mark.anyio
async def test_resume_runs_submitted_payloads_only_without_a_model_call() -> None:
    push = CountingTool("git_push", confirm=True, result={"pushed": "change-1"})
    client = ScriptedClient([])
    ok_id, cancelled_id = str(uuid.uuid4()), str(uuid.uuid4())
    actions = [
        envelope(ok_id, payload={"tool": "git_push", "args": {"ref": "change-1"}}),
        envelope(cancelled_id, "cancelled", payload={"tool": "git_push", "args": {"ref": "x"}}),
        envelope(str(uuid.uuid4()), payload={"approved": True}),
        envelope(str(uuid.uuid4()), "expired", payload={"tool": "git_push", "args": {}}),
        envelope(str(uuid.uuid4()), "invalid", payload={"tool": "git_push", "args": {}}),
    ]
    sink = FrameRecorder()
    frames = await runner(client, push).stream(make_input(actions=actions), make_context(), sink)

    assert kinds(frames) == ["done"] and sink.frames == frames
    assert push.calls == [{"ref": "change-1"}]
    assert client.requests == []
    result = frames[0].result
    assert result is not None
    assert result.text == 'git_push: {"pushed":"change-1"}'
    assert result.interrupted is False
    assert [(r.tool_name, r.tool_call_id, r.result) for r in result.tool_calls] == [
        ("git_push", ok_id, '{"pushed":"change-1"}')
    ]
    assert result.token_usage == TokenUsage()


@pytest.mark.anyio
async def test_resume_lines_join_and_missing_args() -> None:
    a = CountingTool("git_status", result={"paths": []})
    actions = [
        envelope(str(uuid.uuid4()), payload={"tool": "git_status"}),
        envelope(str(uuid.uuid4()), payload={"tool": "git_status", "args": None}),
    ]
    frames = await runner(ScriptedClient([]), a).stream(make_input(actions=actions), make_context())
    assert frames[0].text == 'git_status: {"paths":[]}\ngit_status: {"paths":[]}'
    assert a.calls == [{}, {}]


@pytest.mark.anyio
async def test_resume_unknown_tool_is_bem_090() -> None:
    actions = [envelope(str(uuid.uuid4()), payload={"tool": "publish_docset", "args": {}})]
    with pytest.raises(BeamError) as err:
        await runner(ScriptedClient([])).stream(make_input(actions=actions), make_context())
    assert (err.value.code, err.value.data) == ("BEM-090", {"detail": "publish_docset"})


@pytest.mark.anyio
async def test_empty_actions_list_is_a_resume() -> None:
    frames = await runner(ScriptedClient([])).stream(make_input(actions=[]), make_context())
    assert kinds(frames) == ["done"] and frames[0].text == ""


def test_metadata_and_constructors() -> None:
    client = ScriptedClient([])
    tools = [CountingTool(n) for n in ("write_file", "read_file", "git_push", "git_diff", "read_file")]
    review = RigAgentRunner.for_skill("review", client, [t.tool for t in tools])
    meta = review.metadata().to_json()
    skill = skill_by_name("review")
    assert skill is not None
    assert meta == {
        "name": "review",
        "description": skill.system_prompt,
        "supported_modalities": ["text"],
        "output_modalities": ["text"],
        "tags": ["rig"],
        "version": "1.0.0",
    }
    assert [s.name for s in review.tool_specs] == ["read_file", "git_diff", "read_file"]

    adhoc = RigAgentRunner.for_skill("my-skill", client, [t.tool for t in tools])
    assert adhoc.metadata().to_json()["name"] == "my-skill"
    assert "description" not in adhoc.metadata().to_json()
    assert len(adhoc.tool_specs) == 5

    consume = RigAgentRunner.for_skill("consume", client, [t.tool for t in tools])
    assert consume.tool_specs == []

    custom = RigAgentRunner.new("bot", client, [t.tool for t in tools], Skill("review", "p", ("read_file",)))
    assert custom.metadata().name == "bot" and custom.metadata().description == "p"
    assert len(custom.tool_specs) == 5


@pytest.mark.anyio
async def test_first_tool_with_a_name_wins() -> None:
    first, second = CountingTool("read_file", result=1), CountingTool("read_file", result=2)
    client = ScriptedClient([calls(("read_file", {})), Completion.of_text("ok")])
    frames = await runner(client, first, second).stream(make_input(), make_context())
    assert len(first.calls) == 1 and second.calls == []
    result = frames[-1].result
    assert result is not None and result.tool_calls[0].result == "1"


@pytest.mark.anyio
async def test_exhausted_client_error_propagates() -> None:
    with pytest.raises(BeamError) as err:
        await runner(ScriptedClient([])).stream(make_input(), make_context())
    assert err.value.code == "BEM-081"
