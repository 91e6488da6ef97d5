"""Streamed completions: `OpenAiCompatible` with a `stream_to` sink against `FakeOpenAI` streaming real
Server-Sent Events on loopback, read back into the same `Completion` a plain request gives."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import Any

import pytest

from bot.beam import streaming
from bot.beam.completion import Completion
from bot.beam.errors import BeamError
from bot.beam.openai_client import OpenAiCompatible
from bot.beam.tools import ToolSpec, json_params
from tests.support.openai_server import (
    FakeOpenAI,
    chat_response,
    error_body,
    text_message,
    tool_call,
    tool_calls_message,
    usage,
)

pytestmark = pytest.mark.anyio

KEY = "sk-stream-test-0123456789"
MESSAGES: list[dict[str, Any]] = [{"role": "user", "content": "Hi"}]
READ_FILE = ToolSpec("read_file", "Read a file.", False, json_params({"path": {"type": "string"}}, ["path"]))
LIST_TREE = ToolSpec("list_tree", "List the tree.", False, json_params())
ANSWER = "The change fixes the greeting; nothing else moves."


@pytest.fixture(autouse=True)
def fresh_process() -> Iterator[None]:
    streaming.forget_all()
    yield
    streaming.forget_all()


async def no_sleep(seconds: float) -> None:
    """Retries go at once: the waits are the retry tests' business, not these."""


async def call(llm: FakeOpenAI, tools: list[ToolSpec], *, listen: bool) -> tuple[Completion, list[int]]:
    told: list[int] = []
    async with OpenAiCompatible(llm.url, KEY, "m", sleep=no_sleep) as client:
        if listen:
            client.stream_to = told.append
        return await client.complete(MESSAGES, tools), told


async def test_a_streamed_answer_is_the_completion_a_plain_request_gives() -> None:
    body = chat_response(text_message(ANSWER), usage=usage(40, 13))
    with FakeOpenAI() as llm:
        llm.enqueue(body)
        llm.enqueue(body)
        streamed, told = await call(llm, [], listen=True)
        plain, _ = await call(llm, [], listen=False)
    assert streamed == plain and streamed.text == ANSWER and streamed.finish_reason == "stop"
    assert streamed.usage is not None and streamed.usage.total_tokens == 53
    asked = llm.requests[0]
    assert asked["stream"] is True and asked["stream_options"] == {"include_usage": True}
    assert llm.requests[1]["stream"] is False and "stream_options" not in llm.requests[1]
    # The sink saw the count grow chunk by chunk from 0, then the server's own count at the end.
    assert told[0] == 0 and told == sorted(told) and len(set(told)) > 5
    assert told[-1] == 13


async def test_tool_call_deltas_add_up_to_the_calls() -> None:
    calls = [tool_call("read_file", {"path": "src/a very long/path.py"}), tool_call("list_tree", {})]
    body = chat_response(tool_calls_message(calls), usage=usage())
    with FakeOpenAI() as llm:
        llm.enqueue(body)
        llm.enqueue(body)
        streamed, told = await call(llm, [READ_FILE, LIST_TREE], listen=True)
        plain, _ = await call(llm, [READ_FILE, LIST_TREE], listen=False)
    assert streamed == plain
    assert streamed.tool_calls is not None
    assert [(c.id, c.name, c.args) for c in streamed.tool_calls] == [
        (calls[0]["id"], "read_file", {"path": "src/a very long/path.py"}),
        (calls[1]["id"], "list_tree", {}),
    ]
    assert streamed.finish_reason == "tool_calls" and max(told) > 1


async def test_a_stream_cut_in_the_middle_is_tried_again() -> None:
    body = chat_response(text_message(ANSWER), usage=usage())
    with FakeOpenAI() as llm:
        llm.enqueue(body, cut_after=4)
        llm.enqueue(body)
        done, told = await call(llm, [], listen=True)
    assert done.text == ANSWER and len(llm.requests) == 2
    restarts = [later for earlier, later in itertools.pairwise(told) if later < earlier]
    assert restarts[0] == 0  # the second attempt starts its count again
    assert told[-1] == 5  # and ends at the server's own count


async def test_a_stream_cut_every_time_is_bem_082_saying_so() -> None:
    body = chat_response(text_message(ANSWER))
    with FakeOpenAI() as llm:
        for _ in range(3):
            llm.enqueue(body, cut_after=3)
        with pytest.raises(BeamError) as caught:
            await call(llm, [], listen=True)
    assert caught.value.code == "BEM-082"
    assert (caught.value.detail or "").startswith("llm stream cut before its end after 2 tokens")
    assert len(llm.requests) == 3  # two retries, as for a dropped connection


async def test_an_error_sent_inside_the_stream_is_084_and_retried() -> None:
    with FakeOpenAI() as llm:
        llm.enqueue(
            "data: " + json.dumps(error_body("overloaded", type="server_error")) + "\n\n",
            headers={"Content-Type": "text/event-stream"},
        )
        llm.reply_text(ANSWER)
        done, _ = await call(llm, [], listen=True)
    assert done.text == ANSWER and len(llm.requests) == 2


async def test_events_under_another_content_type_are_read_as_events() -> None:
    events = [
        {
            "model": "relabelled",
            "choices": [{"index": 0, "delta": {"content": "Hello"}, "finish_reason": None}],
        },
        {"choices": [{"index": 0, "delta": {"content": " there"}, "finish_reason": "stop"}]},
    ]
    sse = "".join(f"data: {json.dumps(event)}\n\n" for event in events) + "data: [DONE]\n\n"
    with FakeOpenAI() as llm:
        llm.enqueue(sse, headers={"Content-Type": "application/json"})
        done, told = await call(llm, [], listen=True)
    assert (done.text, done.model, done.finish_reason) == ("Hello there", "relabelled", "stop")
    assert told == [0, 1, 2, 2] and not streaming.plain(llm.url, "m")


async def test_a_server_that_ignores_stream_is_read_plain_and_asked_plain_from_then_on() -> None:
    with FakeOpenAI(streams=False) as llm:
        llm.reply_text(ANSWER, usage=usage(5, 5))
        llm.reply_text("second")
        first, told = await call(llm, [], listen=True)
        second, _ = await call(llm, [], listen=True)
    assert first.text == ANSWER and second.text == "second"
    assert llm.requests[0]["stream"] is True and llm.requests[1]["stream"] is False
    assert streaming.plain(llm.url, "m") and told == [0]


async def test_a_server_that_refuses_stream_gets_the_call_again_plain() -> None:
    with FakeOpenAI() as llm:
        llm.enqueue(error_body("Streaming is not supported for this model"), status=400)
        llm.reply_text(ANSWER)
        llm.reply_text("second")
        first, _ = await call(llm, [], listen=True)
        second, _ = await call(llm, [], listen=True)
    assert (first.text, second.text) == (ANSWER, "second")
    assert [r["stream"] for r in llm.requests] == [True, False, False]


async def test_another_400_is_not_taken_for_a_refusal_of_the_stream() -> None:
    with FakeOpenAI() as llm:
        llm.enqueue(error_body("The model `m` does not exist"), status=400)
        with pytest.raises(BeamError) as caught:
            await call(llm, [], listen=True)
    assert caught.value.code == "BEM-084" and not streaming.plain(llm.url, "m")


def test_assembly_reads_reasoning_events_and_refuses_a_line_that_is_not_json() -> None:
    assembly = streaming.Assembly()
    for line in [
        ": keep-alive",
        'data: {"model":"m","choices":[{"index":0,"delta":{"reasoning_content":"think"}}]}',
        'data: {"choices":[{"index":0,"delta":{"content":"yes"},"finish_reason":"stop"}]}',
    ]:
        payload = streaming.event_data(line)
        if payload is not None:
            assert assembly.add(payload) is None
    assert assembly.ended and assembly.tokens == 2
    message = assembly.completion()["choices"][0]["message"]
    assert message == {"role": "assistant", "content": "yes", "reasoning_content": "think"}
    with pytest.raises(streaming.StreamError):
        assembly.add("{cut")


@pytest.mark.parametrize(
    ("status", "text", "refused"),
    [
        (400, "Unsupported value: 'stream' does not support true with this model.", True),
        (400, "Streaming is not supported for this model", True),
        (422, "stream: unsupported", True),
        (400, "Unrecognized request argument supplied: stream_options", False),  # request_fields' case
        (400, "The model `m` does not exist", False),
        (500, "Streaming is not supported for this model", False),
    ],
)
def test_refusals_of_the_stream_are_told_from_other_errors(status: int, text: str, refused: bool) -> None:
    assert streaming.refuses_stream(status, text) is refused
