"""`OpenAiCompatible` against servers that refuse tools, cut answers or overflow (issue 20), over HTTP.

The fake is a real loopback server that checks every request against OpenAI's description, so a
text-protocol request (no `tools`, no `tool` roles) is checked as strictly as a native one.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from bot.beam import text_protocol
from bot.beam.completion import Completion, PendingToolCall
from bot.beam.errors import BeamError
from bot.beam.openai_client import OpenAiCompatible
from bot.beam.tool_dialects import stable_id
from bot.beam.tools import ToolSpec, json_params
from tests.support.openai_server import FakeOpenAI, chat_response, text_message, tool_call, tool_calls_message

pytestmark = pytest.mark.anyio

READ_FILE = ToolSpec("read_file", "Read a file.", False, json_params({"path": {"type": "string"}}, ["path"]))
MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": "You are a reviewer."},
    {"role": "user", "content": "Review it."},
]
TAGGED = '<tool_call>\n{"name": "read_file", "arguments": {"path": "a.py"}}\n</tool_call>'

# How servers say they take no tools, as they say it.
REFUSALS = [
    "tools param requires --jinja flag",  # llama.cpp's llama-server started without --jinja
    '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set',  # vLLM
    "registry.ollama.ai/library/gemma:2b does not support tools",  # Ollama
    "deepseek-reasoner does not support Function Calling",  # a hosted reasoning model
    "'tools' is not supported with this model.",
]
# How servers say the prompt does not fit.
OVERFLOWS = [
    "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens "
    "(4000 in the messages, 1000 in the completion). Please reduce the length of the messages.",  # OpenAI
    "request (9000 tokens) exceeds the available context size (8192 tokens), try increasing it",  # llama.cpp
    "The decoder prompt (length 9000) is longer than the maximum model length of 8192.",  # vLLM V1
    "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 4096.",  # TGI
    "prompt is too long: 210000 tokens > 200000 maximum",
]


@pytest.fixture(autouse=True)
def forget_servers() -> Iterator[None]:
    text_protocol.forget_all()
    yield
    text_protocol.forget_all()


def make(llm: FakeOpenAI, mode: text_protocol.ToolsMode = "auto", model: str = "m") -> OpenAiCompatible:
    async def no_wait(seconds: float) -> None:
        return None

    return OpenAiCompatible(llm.url, "k", model, sleep=no_wait, tools_mode=mode)


def text_reply(text: str, finish_reason: str | None = None) -> dict[str, Any]:
    return chat_response(text_message(text), finish_reason=finish_reason)


@pytest.mark.parametrize("refusal", REFUSALS)
async def test_auto_falls_back_to_the_text_protocol_and_remembers(refusal: str) -> None:
    with FakeOpenAI() as llm:
        llm.reply_error(400, refusal)
        llm.enqueue(text_reply(TAGGED))
        llm.enqueue(text_reply("Looks fine."))
        async with make(llm) as client:
            first = await client.complete(MESSAGES, [READ_FILE])
            second = await client.complete(MESSAGES, [READ_FILE])
        native, fallback, remembered = llm.requests
    assert "tools" in native
    assert "tools" not in fallback and "tools" not in remembered  # asked once, then remembered
    assert fallback["messages"][0]["content"].startswith("You are a reviewer.\n\n# Tools")
    assert '"path"' in fallback["messages"][0]["content"]
    assert first.tool_calls == (
        PendingToolCall(stable_id(0, "read_file", {"path": "a.py"}), "read_file", {"path": "a.py"}),
    )
    assert second == Completion(text="Looks fine.", model="fake-model")


async def test_the_memory_is_per_base_url_and_model() -> None:
    with FakeOpenAI() as llm:
        llm.reply_error(400, REFUSALS[0])
        llm.enqueue(text_reply("a"))
        llm.enqueue(text_reply("b"))
        async with make(llm, model="small") as small, make(llm, model="large") as large:
            await small.complete(MESSAGES, [READ_FILE])
            await large.complete(MESSAGES, [READ_FILE])
    assert ["tools" in body for body in llm.requests] == [True, False, True]


async def test_native_never_falls_back() -> None:
    with FakeOpenAI() as llm:
        llm.reply_error(400, REFUSALS[0])
        async with make(llm, "native") as client:
            with pytest.raises(BeamError) as caught:
                await client.complete(MESSAGES, [READ_FILE])
    assert caught.value.code == "BEM-093"
    assert "tools param requires --jinja flag" in str(caught.value)
    assert "BEAM_MODEL_TOOLS=auto or text" in str(caught.value)
    assert len(llm.requests) == 1


async def test_another_400_is_not_taken_for_a_refusal() -> None:
    with FakeOpenAI() as llm:
        llm.reply_error(400, "temperature must be at most 2")
        async with make(llm) as client:
            with pytest.raises(BeamError) as caught:
                await client.complete(MESSAGES, [READ_FILE])
    assert caught.value.code == "BEM-084"
    assert len(llm.requests) == 1


async def test_text_mode_rewrites_earlier_rounds_the_same_way_every_time() -> None:
    """Calls become tags and results user turns; round 2's prompt starts with round 1's exactly."""
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "read_file", "arguments": '{"path":"a.py"}'},
    }
    round_two = [
        *MESSAGES,
        {"role": "assistant", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": '{"content":"x = 1"}'},
    ]
    with FakeOpenAI() as llm:
        llm.enqueue(text_reply(TAGGED))
        llm.enqueue(text_reply("Done."))
        async with make(llm, "text") as client:
            await client.complete(MESSAGES, [READ_FILE])
            done = await client.complete(round_two, [READ_FILE])
        first, second = (body["messages"] for body in llm.requests)
    assert done.text == "Done."
    assert all("tools" not in body for body in llm.requests)
    assert second[: len(first)] == first
    assert second[2] == {
        "role": "assistant",
        "content": '<tool_call>\n{"name": "read_file", "arguments": {"path": "a.py"}}\n</tool_call>',
    }
    assert second[3]["role"] == "user"
    assert json.loads(
        second[3]["content"].removeprefix("<tool_response>\n").removesuffix("\n</tool_response>")
    ) == {
        "name": "read_file",
        "content": '{"content":"x = 1"}',
    }


async def test_text_mode_without_a_system_prompt_adds_one() -> None:
    with FakeOpenAI() as llm:
        llm.enqueue(text_reply("ok"))
        async with make(llm, "text") as client:
            await client.complete([{"role": "user", "content": "hi"}], [READ_FILE])
    messages = llm.requests[0]["messages"]
    assert messages[0]["role"] == "system" and messages[0]["content"].startswith("# Tools")
    assert messages[1] == {"role": "user", "content": "hi"}


async def test_no_tools_means_no_protocol() -> None:
    with FakeOpenAI() as llm:
        llm.enqueue(text_reply("ok"))
        async with make(llm, "text") as client:
            await client.complete(MESSAGES, [])
    assert llm.requests[0]["messages"] == MESSAGES


@pytest.mark.parametrize("overflow", OVERFLOWS)
async def test_a_context_overflow_is_its_own_code(overflow: str) -> None:
    with FakeOpenAI() as llm:
        llm.reply_error(400, overflow)
        async with make(llm) as client:
            with pytest.raises(BeamError) as caught:
                await client.complete(MESSAGES, [READ_FILE])
    assert caught.value.code == "BEM-092"
    assert "larger context" in str(caught.value)
    assert len(llm.requests) == 1  # neither retried as it is nor taken for a refusal of tools


@pytest.mark.parametrize(
    "message",
    [
        text_message('I will read it.\n```json\n{"name": "read_file", "arguments": {"path": "src/a'),
        text_message('<tool_call>\n{"name": "read_file", "arguments": {"pa'),
        tool_calls_message(
            [{"id": "c", "type": "function", "function": {"name": "read_file", "arguments": '{"pa'}}]
        ),
    ],
    ids=["fenced", "tagged", "native"],
)
async def test_a_call_cut_by_length_is_bem_091(message: dict[str, Any]) -> None:
    with FakeOpenAI() as llm:
        llm.enqueue(chat_response(message, finish_reason="length"))
        async with make(llm) as client:
            with pytest.raises(BeamError) as caught:
                await client.complete(MESSAGES, [READ_FILE])
    assert caught.value.code == "BEM-091"
    assert "max_tokens" in str(caught.value)


async def test_a_prose_answer_cut_by_length_stays_an_answer() -> None:
    with FakeOpenAI() as llm:
        llm.enqueue(text_reply("The change looks fine, but the loop in", finish_reason="length"))
        async with make(llm) as client:
            result = await client.complete(MESSAGES, [READ_FILE])
    assert result.text == "The change looks fine, but the loop in"


async def test_a_whole_call_with_finish_reason_length_is_still_a_call() -> None:
    with FakeOpenAI() as llm:
        llm.enqueue(
            chat_response(
                tool_calls_message([tool_call("read_file", {"path": "a"}, "c1")]), finish_reason="length"
            )
        )
        async with make(llm) as client:
            result = await client.complete(MESSAGES, [READ_FILE])
    assert result.tool_calls == (PendingToolCall("c1", "read_file", {"path": "a"}),)


@pytest.mark.parametrize(
    ("value", "mode"),
    [(None, "auto"), ("", "auto"), ("text", "text"), (" Native ", "native"), ("auto", "auto")],
)
def test_from_env_reads_beam_model_tools(value: str | None, mode: str) -> None:
    env = {"BEAM_API_KEY": "k"} | ({} if value is None else {"BEAM_MODEL_TOOLS": value})
    client = OpenAiCompatible.from_env(env)
    assert client is not None and client.tools_mode == mode


def test_a_wrong_beam_model_tools_is_a_clear_error() -> None:
    with pytest.raises(BeamError) as caught:
        OpenAiCompatible.from_env({"BEAM_API_KEY": "k", "BEAM_MODEL_TOOLS": "json"})
    assert caught.value.code == "BEM-042"
    assert "BEAM_MODEL_TOOLS must be auto, native or text, not 'json'" in str(caught.value)
