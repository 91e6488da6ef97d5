"""A hosted provider's refusals of request fields (issue 42), against stand-ins that refuse what the
provider refuses with its own error body (tests/support/provider_servers.py): the client drops or
renames the field, tries again, and sends the next request right the first time."""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from bot.beam import request_fields, structured_output, text_protocol
from bot.beam.errors import BeamError
from bot.beam.openai_client import OpenAiCompatible
from bot.beam.tools import ToolSpec, json_params
from bot.beam.types import AgentInput, ContentPart
from tests.support.openai_server import FakeOpenAI, chat_response, text_message
from tests.support.provider_servers import stand_in

pytestmark = pytest.mark.anyio

KEY = "sk-test-provider-0123456789"
MESSAGES: list[dict[str, Any]] = [{"role": "user", "content": "Hi"}]
READ_FILE = ToolSpec("read_file", "Read a file.", False, json_params({"path": {"type": "string"}}, ["path"]))
REVIEW = AgentInput(
    content=[ContentPart.text_part("r")], session_id=uuid.uuid4(), run_id=uuid.uuid4(), agent_name="review"
)


@pytest.fixture(autouse=True)
def _forget() -> Iterator[None]:
    request_fields.forget_all()
    text_protocol.forget_all()
    structured_output.forget_all()
    yield
    request_fields.forget_all()
    text_protocol.forget_all()
    structured_output.forget_all()


def client(llm: FakeOpenAI, model: str) -> OpenAiCompatible:
    """A client with the framework's own defaults: the seed's extra body, max_tokens, top_p."""
    return OpenAiCompatible(llm.url, KEY, model)


async def test_openai_refuses_the_seeds_extra_body_once_and_it_is_not_sent_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="beam.llm")
    with stand_in("openai") as llm:
        llm.reply_text("First.")
        llm.reply_text("Second.")
        async with client(llm, "gpt-4.1-mini") as model:
            first = await model.complete(MESSAGES, [READ_FILE])
            second = await model.complete_for(REVIEW, MESSAGES, [READ_FILE])
    assert (first.text, second.text) == ("First.", "Second.")
    assert [sorted(body) for body in llm.refused] == [
        ["chat_template_kwargs", "max_tokens", "messages", "model", "stream", "tools", "top_p"]
    ]
    # Both answered requests go without the field; the second was right the first time.
    assert all("chat_template_kwargs" not in body for body in llm.requests) and len(llm.requests) == 2
    assert llm.requests[1]["temperature"] == 0.2 and llm.requests[1]["max_tokens"] == 4096
    said = [record.getMessage() for record in caplog.records if "refused" in record.getMessage()]
    assert said == [
        f"gpt-4.1-mini at {llm.url} refused chat_template_kwargs; chat_template_kwargs not sent from now on"
    ]


async def test_a_reasoning_model_gets_max_completion_tokens_and_no_sampling_fields() -> None:
    with stand_in("openai") as llm:
        llm.reply_text("Reviewed.")
        llm.reply_text("Again.")
        async with client(llm, "gpt-5-mini") as model:
            first = await model.complete_for(REVIEW, MESSAGES, [READ_FILE])
            assert [adaptation.describe() for adaptation in model.adaptations()] == [
                "chat_template_kwargs not sent",
                "max_tokens sent as max_completion_tokens",
                "top_p not sent",
                "temperature left to the server's default",
            ]
        # A second client for the same server and model (another run) is right the first time.
        async with client(llm, "gpt-5-mini") as model:
            second = await model.complete_for(REVIEW, MESSAGES, [READ_FILE])
    assert (first.text, second.text) == ("Reviewed.", "Again.")
    assert len(llm.refused) == 4 and len(llm.requests) == 2
    for body in llm.requests:
        assert list(body) == ["model", "messages", "max_completion_tokens", "stream", "tools"]
        assert body["max_completion_tokens"] == 4096


async def test_the_memory_is_per_model() -> None:
    with stand_in("openai") as llm:
        llm.reply_text("Reasoned.")
        llm.reply_text("Chatted.")
        async with client(llm, "o4-mini") as model:
            await model.complete_for(REVIEW, MESSAGES, [])
        async with client(llm, "gpt-4.1-mini") as model:
            await model.complete_for(REVIEW, MESSAGES, [])
    # The chat model lost only the extra body, which it refused itself; it keeps its sampling fields.
    assert len(llm.refused) == 5
    assert llm.requests[1]["max_tokens"] == 4096 and llm.requests[1]["top_p"] == 0.95


async def test_a_structured_call_is_adapted_too() -> None:
    with stand_in("openai") as llm:
        llm.reply_text('{"ok": true}')
        async with client(llm, "o3") as model:
            answer = await model.complete_structured(MESSAGES, {"type": "object"})
    assert answer == {"ok": True}
    assert "response_format" in llm.requests[0] and "max_completion_tokens" in llm.requests[0]


async def test_anthropics_compat_layer_refuses_the_extra_body_in_its_own_error_form() -> None:
    with stand_in("anthropic") as llm:
        llm.reply_text("Claude here.")
        llm.reply_text("Again.")
        async with client(llm, "claude-sonnet-4-5") as model:
            await model.complete_for(REVIEW, MESSAGES, [READ_FILE])
            await model.complete_for(REVIEW, MESSAGES, [READ_FILE])
    assert len(llm.refused) == 1 and len(llm.requests) == 2
    # It takes max_tokens, top_p, a temperature of 0.2 and tools as they are.
    assert all(body["max_tokens"] == 4096 and body["temperature"] == 0.2 for body in llm.requests)
    assert all("tools" in body and "chat_template_kwargs" not in body for body in llm.requests)


async def test_geminis_compat_endpoint_refuses_the_extra_body_in_googles_error_form() -> None:
    with stand_in("gemini") as llm:
        llm.reply_text("Gemini here.")
        async with client(llm, "gemini-2.5-flash") as model:
            answer = await model.complete(MESSAGES, [READ_FILE])
    assert answer.text == "Gemini here."
    assert len(llm.refused) == 1 and "chat_template_kwargs" not in llm.requests[0]


async def test_an_extra_field_the_user_set_is_dropped_when_refused_and_others_stay() -> None:
    with stand_in("gemini") as llm:
        llm.reply_text("Fine.")
        async with client(llm, "gemini-2.5-flash") as model:
            model.with_extra_body({"reasoning_effort": "low", "chat_template_kwargs": {}})
            await model.complete(MESSAGES, [])
    assert llm.requests[0]["reasoning_effort"] == "low" and "chat_template_kwargs" not in llm.requests[0]


async def test_a_400_that_names_no_field_of_the_request_is_not_retried() -> None:
    with FakeOpenAI() as llm:
        llm.reply_error(400, "Unsupported parameter: 'logit_bias' is not supported with this model.")
        llm.reply_error(400, "Invalid 'messages[0].content': string too long.")
        async with client(llm, "gpt-5") as model:
            for _ in range(2):
                with pytest.raises(BeamError) as raised:
                    await model.complete(MESSAGES, [])
                assert raised.value.code == "BEM-084"
            assert model.adaptations() == []
    assert len(llm.requests) == 2


def test_refusals_are_read_in_each_providers_words() -> None:
    body = {"model": "m", "messages": [], "max_tokens": 1, "top_p": 1, "temperature": 0.2, "x_extra": 1}
    pydantic = '{"detail":[{"loc":["body","x_extra"],"msg":"Extra inputs are not permitted"}]}'
    google = json.dumps(
        [{"error": {"message": 'Invalid JSON payload received. Unknown name "x_extra": Cannot find field.'}}]
    )
    said = {
        "llm http 400 Bad Request: Unrecognized request argument supplied: x_extra": "x_extra",
        f"llm http 422 Unprocessable Entity: {pydantic}": "x_extra",
        "llm http 400 Bad Request: property 'top_p' is unsupported": "top_p",
        f"llm http 400 Bad Request: {google}": "x_extra",
    }
    for detail, field in said.items():
        found = request_fields.refused_field(int(detail.split(" ")[2]), detail, body)
        assert found is not None and found.field == field, detail
    # Never the fields a request cannot do without, nor one nested inside another.
    nested = "Invalid JSON payload received. Unknown name \\\"const\\\" at 'tools[0]': Cannot find field."
    assert request_fields.refused_field(400, nested, {**body, "const": 1}) is None
    assert request_fields.refused_field(400, "Unrecognized request argument supplied: messages", body) is None
    assert request_fields.refused_field(500, "Unrecognized request argument supplied: x_extra", body) is None


async def test_requests_refused_at_once_both_go_through_and_the_refusal_is_said_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Two calls in flight meet the same refusal; the one that learns it second still tries again."""
    caplog.set_level(logging.WARNING, logger="beam.llm")
    with stand_in("openai") as llm:
        llm.enqueue(chat_response(text_message("One.")), delay=0.2)
        llm.enqueue(chat_response(text_message("Two.")))
        answers: list[str | None] = []
        async with client(llm, "gpt-4.1-mini") as model:

            async def ask() -> None:
                answers.append((await model.complete(MESSAGES, [])).text)

            with anyio.fail_after(10):
                async with anyio.create_task_group() as group:
                    group.start_soon(ask)
                    group.start_soon(ask)
    assert sorted(answers, key=str) == ["One.", "Two."]
    assert len(llm.refused) == 2 and len(llm.requests) == 2
    assert len([record for record in caplog.records if "refused" in record.getMessage()]) == 1
