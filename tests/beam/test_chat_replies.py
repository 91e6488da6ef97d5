"""Reading a chat-completions answer (`chat_replies`): the text or the tool calls, the usage and the
model, and the codes of answers that are none (BEM-083, BEM-084's detail, BEM-085), through
`OpenAiCompatible` against `FakeOpenAI` on loopback; and the `Retry-After` and status readers."""

from __future__ import annotations

from typing import Any

import pytest

from bot.beam.chat_replies import retry_after_seconds, status_of
from bot.beam.completion import Completion, PendingToolCall
from bot.beam.errors import BeamError
from bot.beam.openai_client import OpenAiCompatible
from bot.beam.tools import ToolSpec, json_params
from bot.beam.types import TokenUsage
from tests.support.openai_server import FakeOpenAI, chat_response, tool_call, tool_calls_message, usage

pytestmark = pytest.mark.anyio

KEY = "sk-test-5ecret-key-0123456789"
MESSAGES: list[dict[str, Any]] = [{"role": "user", "content": "Hi"}]
READ_FILE = ToolSpec("read_file", "Read a file.", False, json_params({"path": {"type": "string"}}, ["path"]))
LIST_TREE = ToolSpec("list_tree", "List the tree.", False, json_params())


async def no_sleep(seconds: float) -> None:
    """Retries go at once: the waits are the client's tests' business (test_openai_client.py)."""


async def complete_one(llm: FakeOpenAI, tools: list[ToolSpec] | None = None, **kwargs: Any) -> Completion:
    async with OpenAiCompatible(llm.url, KEY, "test-model", sleep=no_sleep, **kwargs) as client:
        return await client.complete(MESSAGES, tools or [])


async def error_of(llm: FakeOpenAI, **kwargs: Any) -> BeamError:
    with pytest.raises(BeamError) as caught:
        await complete_one(llm, **kwargs)
    return caught.value


async def test_text_answer_reports_usage_and_model() -> None:
    with FakeOpenAI() as llm:
        llm.reply_text("Looks good.", model="served-model-v2", usage=usage(12, 3))
        result = await complete_one(llm)
    assert result == Completion.of_text(
        "Looks good.",
        usage=TokenUsage(prompt_tokens=12, completion_tokens=3, total_tokens=15),
        model="served-model-v2",
    )
    assert len(llm.requests) == 1


async def test_missing_usage_is_none() -> None:
    with FakeOpenAI() as llm:
        llm.reply_text("ok")
        result = await complete_one(llm)
    assert result.usage is None
    assert result.model == "fake-model"


async def test_tool_calls_with_string_arguments() -> None:
    with FakeOpenAI() as llm:
        message = tool_calls_message(
            [tool_call("read_file", {"path": "a.txt"}, "call_a"), tool_call("list_tree", {}, "call_b")]
        )
        message["content"] = "ignored when tools are called"
        llm.enqueue(chat_response(message))
        result = await complete_one(llm, [READ_FILE, LIST_TREE])
    assert result.text is None
    assert result.tool_calls == (
        PendingToolCall("call_a", "read_file", {"path": "a.txt"}),
        PendingToolCall("call_b", "list_tree", {}),
    )


async def test_tool_call_arguments_as_object_missing_or_broken() -> None:
    """Issue 20: a call counts only for an offered tool with arguments that are a JSON object; the
    others are reported as the completion's problem (before, every call was passed on as it was)."""
    calls = [
        {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": {"path": "b"}}},
        {"id": "c2", "type": "function", "function": {"name": "read_file", "arguments": "{not json"}},
        {"type": "function", "function": {}},
        {"id": "c4", "type": "function", "function": {"name": "n", "arguments": "[1, 2]"}},
        {"id": "c5", "type": "function", "function": {"name": "read_file", "arguments": "[1, 2]"}},
    ]
    with FakeOpenAI() as llm:
        llm.enqueue({"choices": [{"message": {"role": "assistant", "tool_calls": calls}}]})
        result = await complete_one(llm, [READ_FILE])
    assert result.tool_calls == (PendingToolCall("c1", "read_file", {"path": "b"}),)
    assert result.problem == (
        "the arguments of `read_file` are not valid JSON; a tool call has no name; "
        "`n` is not one of the tools offered (read_file); the arguments of `read_file` are not a JSON object"
    )


@pytest.mark.parametrize(
    ("message", "text"),
    [
        ({"content": "  kept as is  "}, "  kept as is  "),
        ({"content": [{"type": "text", "text": "Hel"}, "lo", {"type": "image"}, 7]}, "Hello"),
        # Issue 20: reasoning is never the answer (it was the fallback for a blank content).
        ({"content": "  ", "reasoning_content": "thought"}, "  "),
        ({"content": [{"text": " "}], "reasoning_content": "", "reasoning": "plan"}, " "),
        ({"content": None, "tool_calls": [], "reasoning_content": "via reasoning"}, ""),
        ({"content": "<think>private</think>\n\nThe answer.", "reasoning_content": "more"}, "The answer."),
        ({"content": None}, ""),
    ],
)
async def test_text_fallbacks(message: dict[str, Any], text: str) -> None:
    with FakeOpenAI() as llm:
        llm.enqueue({"choices": [{"message": {"role": "assistant", **message}}]})
        result = await complete_one(llm)
    assert result.is_text
    assert result.text == text


async def test_500_html_is_084() -> None:
    with FakeOpenAI() as llm:
        llm.enqueue("<html>" + "x" * 2000 + "</html>", status=500, headers={"Content-Type": "text/html"})
        error = await error_of(llm, max_retries=0)
    assert error.code == "BEM-084"
    assert error.detail is not None
    assert error.detail.startswith("llm http 500 Internal Server Error: <html>xxx")
    assert len(error.detail) < 600


async def test_json_error_body_without_error_key_is_quoted_whole() -> None:
    with FakeOpenAI() as llm:
        llm.enqueue({"detail": "nope"}, status=422)
        error = await error_of(llm)
    assert error.detail == 'llm http 422 Unprocessable Entity: {"detail":"nope"}'


def test_retry_after_parsing() -> None:
    assert retry_after_seconds("7") == 7.0
    assert retry_after_seconds(" 1.5 ") == 1.5
    assert retry_after_seconds("-3") == 0.0
    assert retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412470.0) == 10.0
    assert retry_after_seconds("Wed, 21 Oct 2015 07:28:00 -0000", now=1445412470.0) == 10.0
    assert retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412490.0) == 0.0
    for bad in (None, "", "soon", "nan", "inf"):
        assert retry_after_seconds(bad) is None


async def test_non_json_200_is_083() -> None:
    with FakeOpenAI() as llm:
        llm.enqueue('{"choices": [', headers={"Content-Type": "application/json"})
        error = await error_of(llm)
    assert error.code == "BEM-083"
    assert len(llm.requests) == 1


@pytest.mark.parametrize(
    "body",
    [{}, {"choices": []}, {"choices": [{"index": 0}]}, {"choices": [{"message": "hi"}]}, [1, 2]],
)
async def test_missing_message_is_085(body: Any) -> None:
    with FakeOpenAI() as llm:
        llm.enqueue(body)
        error = await error_of(llm)
    assert error.code == "BEM-085"


def test_status_of_reads_the_status_of_an_http_error_only() -> None:
    assert status_of('llm http 400 Bad Request: {"message":"no"}') == 400
    assert status_of("llm http 503 Service Unavailable: ") == 503
    assert status_of('llm stream error: {"message":"overloaded"}') == 0
    assert status_of("llm http") == 0
