"""The run's meter and guard (runs/usage.py): what a review answered only as structured output is
signed with, and the token caps a call's prompt would reach before it is sent."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from bot.app.limits.policy import Limits
from bot.app.runs.usage import Meter, RunGuard, Stop
from bot.beam import structured_output
from bot.beam.completion import ScriptedClient
from bot.beam.openai_client import OpenAiCompatible
from tests.support.openai_server import FakeOpenAI, usage

pytestmark = pytest.mark.anyio

MESSAGES = [{"role": "user", "content": "Review this change."}]
SCHEMA = {"type": "object", "properties": {"body": {"type": "string"}}, "required": ["body"]}


@pytest.fixture(autouse=True)
def _forget() -> Iterator[None]:
    structured_output.forget_all()
    yield
    structured_output.forget_all()


async def test_a_structured_answer_is_counted_and_signed_with_the_model_asked_for() -> None:
    """A structured call's answer reaches the meter as tokens only: a review that was nothing else was
    signed "model `unknown`" on GitHub and in `run review`. The model asked for names it instead,
    until a completion names the one that answered."""
    with FakeOpenAI(structured=True) as llm:
        llm.reply_text(json.dumps({"body": "Fine."}), usage=usage(700, 40))
        llm.reply_text("Done.", model="served-model", usage=usage(10, 2))
        async with OpenAiCompatible(llm.url, "k", "asked-model", timeout=10) as client:
            meter = Meter(client)
            assert meter.model == "asked-model"
            answer = await meter.complete_structured(MESSAGES, SCHEMA, name="review_change")
            assert answer == {"body": "Fine."}
            assert (meter.model, meter.calls, meter.tokens) == ("asked-model", 1, 740)
            await meter.complete(MESSAGES, [])
    assert (meter.model, meter.calls, meter.tokens) == ("served-model", 2, 752)
    assert meter.token_usage().to_json() == {
        "prompt_tokens": 710,
        "completion_tokens": 42,
        "total_tokens": 752,
    }


async def test_before_a_call_its_prompt_counts_against_the_run_cap_and_the_monthly_budget() -> None:
    """A run of one call (an answer in a review thread) meets its caps only here: the guard's check
    before each step sees zero tokens, however large the prompt."""

    async def nobody() -> str | None:
        return None

    meter = Meter(ScriptedClient([]))
    limits = Limits(max_tokens_per_run=1000, tokens_per_installation_per_month=5000)
    guard = RunGuard(meter, limits, month_used=4200, cancelled_by=nobody)
    assert await guard() is None
    assert guard.before_call(799) is None
    assert guard.before_call(800) == Stop("tokens_per_installation_per_month", 5000)
    guard.month_used = 0
    meter.input_tokens = 600  # what the run used so far counts too
    assert guard.before_call(399) is None
    assert guard.before_call(400) == Stop("max_tokens_per_run", 1000)
    assert RunGuard(meter, Limits(), month_used=0, cancelled_by=nobody).before_call(10**9) is None
