"""The runner with a real model's habits (issue 20): calls it cannot use, and a prefix kept stable.

Driven over HTTP by `OpenAiCompatible` against the fake server where the wire matters (what the
server is sent round after round), by `ScriptedClient` where only the loop does.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from bot.beam import text_protocol
from bot.beam.completion import Completion, ScriptedClient
from bot.beam.errors import BeamError
from bot.beam.openai_client import OpenAiCompatible
from bot.beam.runner import ANSWER_IN_TEXT, MAX_ROUNDS, RigAgentRunner
from bot.beam.skills import Skill
from tests.support.agents import CountingTool, calls, make_context, make_input
from tests.support.openai_server import FakeOpenAI, chat_response, text_message

pytestmark = pytest.mark.anyio

SKILL = Skill("review", "You review code.", ())
FENCED = 'I will read the file.\n```json\n{"name": "read_file", "arguments": {"path": "a.py"}}\n```'
UNKNOWN = 'Let me run it.\n```json\n{"name": "run_shell", "arguments": {"cmd": "ls"}}\n```'


def answer_of(frames: list[object]) -> str:
    done = frames[-1]
    result = getattr(done, "result", None)
    assert result is not None
    return str(result.content[0].text)


async def test_an_unusable_call_is_told_to_the_model_once_and_it_recovers() -> None:
    read = CountingTool("read_file")
    client = ScriptedClient(
        [
            Completion(text=UNKNOWN, problem="`run_shell` is not one of the tools offered (read_file)"),
            calls(("read_file", {"path": "a.py"})),
            Completion.of_text("Reviewed: fine."),
        ]
    )
    frames = await RigAgentRunner.new("review", client, [read.tool], SKILL).stream(
        make_input(), make_context()
    )
    assert answer_of(frames) == "Reviewed: fine."
    assert read.calls == [{"path": "a.py"}]
    told = client.requests[1][0]
    assert told[-2] == {"role": "assistant", "content": UNKNOWN}
    assert told[-1]["role"] == "user"
    assert "`run_shell` is not one of the tools offered" in told[-1]["content"]
    assert "read_file" in told[-1]["content"]


async def test_a_model_that_keeps_sending_unusable_calls_ends_with_bem_094() -> None:
    problem = "the arguments of `read_file` are not a JSON object"
    client = ScriptedClient([Completion(text="x", problem=problem), Completion(text="y", problem=problem)])
    runner = RigAgentRunner.new("review", client, [CountingTool("read_file").tool], SKILL)
    with pytest.raises(BeamError) as caught:
        await runner.stream(make_input(), make_context())
    assert caught.value.code == "BEM-094"
    assert problem in str(caught.value)
    assert "What to do:" in str(caught.value)


def done_result(frames: list[object]) -> Any:
    result = getattr(frames[-1], "result", None)
    assert result is not None
    return result


async def test_with_answer_in_text_a_model_that_keeps_failing_is_asked_for_prose() -> None:
    """A review must end in a review: instead of BEM-094, one more call asks for plain text, and
    only the prose of that answer is kept."""
    problem = "`run_shell` is not one of the tools offered (read_file)"
    client = ScriptedClient(
        [
            Completion(text=UNKNOWN, problem=problem),
            Completion(text=UNKNOWN, problem=problem),
            Completion(text=f"The loop is off by one.\n{UNKNOWN}", problem=problem),
        ]
    )
    runner = RigAgentRunner("review", client, [CountingTool("read_file").tool], SKILL, answer_in_text=True)
    result = done_result(await runner.stream(make_input(), make_context()))
    assert result.content[0].text == "The loop is off by one.\nLet me run it."
    assert result.metadata == {"answered_in_text": f"BEM-094: {problem}"}
    asked = client.requests[2][0][-1]
    assert asked == {"role": "user", "content": ANSWER_IN_TEXT}


async def test_with_answer_in_text_a_broken_literal_call_of_an_offered_tool_is_not_posted() -> None:
    """The runner tells `without_calls` which tools it offered, so a call written as a Python dict
    (read only for an offered tool) is taken out of the answer too."""
    problem = "a tool call is not valid JSON"
    broken = "{'name': 'read_file', 'arguments': {'path': }}"
    client = ScriptedClient(
        [
            Completion(text=broken, problem=problem),
            Completion(text=broken, problem=problem),
            Completion(text=f"The loop is off by one.\n{broken}", problem=problem),
        ]
    )
    runner = RigAgentRunner("review", client, [CountingTool("read_file").tool], SKILL, answer_in_text=True)
    result = done_result(await runner.stream(make_input(), make_context()))
    assert result.content[0].text == "The loop is off by one."


async def test_with_answer_in_text_a_usable_call_in_the_last_answer_still_runs() -> None:
    review = CountingTool("review_change")
    problem = "a tool call is not valid JSON"
    client = ScriptedClient(
        [
            Completion(text="a", problem=problem),
            Completion(text="b", problem=problem),
            calls(("review_change", {"body": "Fine."})),
        ]
    )
    runner = RigAgentRunner("review", client, [review.tool], SKILL, answer_in_text=True)
    result = done_result(await runner.stream(make_input(), make_context()))
    assert review.calls == [{"body": "Fine."}]
    assert result.content[0].text == "b"  # the prose said before: no call syntax in it
    assert [r.tool_name for r in result.tool_calls] == ["review_change"]


async def test_with_answer_in_text_used_up_rounds_end_in_prose_not_bem_088() -> None:
    client = ScriptedClient(
        [calls(("read_file", {})) for _ in range(MAX_ROUNDS)] + [Completion.of_text("Done.")]
    )
    runner = RigAgentRunner("review", client, [CountingTool("read_file").tool], SKILL, answer_in_text=True)
    result = done_result(await runner.stream(make_input(), make_context()))
    assert result.content[0].text == "Done."
    assert result.metadata == {"answered_in_text": "BEM-088: the rounds were used up"}


async def test_the_warning_is_given_again_after_a_good_round() -> None:
    problem = "a tool call is not valid JSON"
    client = ScriptedClient(
        [
            Completion(text="a", problem=problem),
            calls(("read_file", {})),
            Completion(text="b", problem=problem),
            Completion.of_text("done"),
        ]
    )
    runner = RigAgentRunner.new("review", client, [CountingTool("read_file").tool], SKILL)
    assert answer_of(await runner.stream(make_input(), make_context())) == "done"


async def test_an_unusable_call_never_becomes_the_text_of_a_stopped_run() -> None:
    asked = 0

    async def stop_on_second() -> str | None:
        nonlocal asked
        asked += 1
        return "max_tokens_per_run" if asked > 1 else None

    client = ScriptedClient([Completion(text=UNKNOWN, problem="unknown tool")])
    runner = RigAgentRunner(
        "review", client, [CountingTool("read_file").tool], SKILL, should_stop=stop_on_second
    )
    assert answer_of(await runner.stream(make_input(), make_context())) == ""


async def test_each_round_extends_the_last_one_unchanged_on_the_wire() -> None:
    """ARCHITECTURE.md section 11: round N+1's messages start with round N's exactly, so a server's
    prompt cache re-uses them. A fenced call (Qwen's habit), a native call, then the answer."""
    read = CountingTool("read_file", result={"content": "x = 1\n"})
    native = {
        "id": "c9",
        "type": "function",
        "function": {"name": "read_file", "arguments": '{"path":"b.py"}'},
    }
    with FakeOpenAI() as llm:
        llm.enqueue(chat_response(text_message(FENCED)))
        llm.enqueue(chat_response({"role": "assistant", "content": None, "tool_calls": [native]}))
        llm.enqueue(chat_response(text_message('Bad call:\n```json\n{"name": "nope", "arguments": {}}\n```')))
        llm.enqueue(chat_response(text_message("<think>done reading</think>The change is fine.")))
        async with OpenAiCompatible(llm.url, "k", "m") as client:
            runner = RigAgentRunner.new("review", client, [read.tool], SKILL)
            frames = await runner.stream(make_input("review a.py"), make_context())
        rounds = [body["messages"] for body in llm.requests]
    assert answer_of(frames) == "The change is fine."
    assert len(rounds) == 4
    for before, after in itertools.pairwise(rounds):
        assert after[: len(before)] == before
        assert len(after) > len(before)
    assert read.calls == [{"path": "a.py"}, {"path": "b.py"}]


async def test_the_prefix_is_stable_in_the_text_protocol_too() -> None:
    text_protocol.forget_all()
    read = CountingTool("read_file")
    tagged = '<tool_call>\n{"name": "read_file", "arguments": {"path": "a.py"}}\n</tool_call>'
    with FakeOpenAI() as llm:
        llm.enqueue(chat_response(text_message(tagged)))
        llm.enqueue(chat_response(text_message(tagged.replace("a.py", "b.py"))))
        llm.enqueue(chat_response(text_message("Fine.")))
        async with OpenAiCompatible(llm.url, "k", "m", tools_mode="text") as client:
            runner = RigAgentRunner.new("review", client, [read.tool], SKILL)
            frames = await runner.stream(make_input("review"), make_context())
        rounds = [body["messages"] for body in llm.requests]
    assert answer_of(frames) == "Fine."
    for before, after in itertools.pairwise(rounds):
        assert after[: len(before)] == before
    assert all(m["role"] in ("system", "user", "assistant") for m in rounds[-1])
