"""The model check's one line (`serve` and `action` print it at start): what works, a failure as a
line with its fix, the echo model said as such, and a server that does not answer within the bound."""

from __future__ import annotations

import anyio

from bot.beam.model_check import run_check, start_line
from tests.support.openai_server import FakeOpenAI, chat_response, text_message
from tests.support.provider_servers import stand_in


def line(env: dict[str, str], bound: float = 30.0) -> str:
    return anyio.run(start_line, env, bound)


def test_a_working_model_is_one_line() -> None:
    with FakeOpenAI(structured=True) as llm:
        said = line({"BEAM_API_KEY": "k", "BEAM_API_BASE_URL": llm.url, "BEAM_MODEL": "qwen"})
    assert said == f"model: qwen at 127.0.0.1:{llm.port}: key ok, tools native, structured output yes"
    assert len(llm.checks) == 2 and llm.requests == []


def test_what_the_server_refused_is_in_the_line() -> None:
    with stand_in("openai") as llm:
        said = line({"OPENAI_API_KEY": "sk", "BEAM_API_BASE_URL": llm.url, "BEAM_MODEL": "gpt-5-mini"})
    assert said.startswith(f"model: gpt-5-mini at 127.0.0.1:{llm.port}: key ok, tools native")
    assert said.endswith(
        "not sent: chat_template_kwargs not sent, max_tokens sent as max_completion_tokens, top_p not sent, "
        "temperature left to the server's default"
    )


def test_a_refused_key_is_a_line_with_its_fix_not_an_error() -> None:
    with stand_in("groq", api_key="gsk-right") as llm:
        said = line({"GROQ_API_KEY": "gsk-wrong", "BEAM_API_BASE_URL": llm.url})
    assert said.startswith(f"model: llama-3.3-70b-versatile at 127.0.0.1:{llm.port}: ✗ key: refused by ")
    assert "Fix: set GROQ_API_KEY to a valid key" in said and "gsk-wrong" not in said


def test_without_a_key_it_says_the_echo_model_answers() -> None:
    said = line({})
    assert said.startswith("model: none (no key set): the echo model answers, repeating the prompt.")
    assert "OPENAI_API_KEY" in said
    assert line({"OPENAI_API_KEY": "k", "BEAM_MODEL_TOOLS": "sometimes"}).startswith(
        "model: ✗ settings: Invalid model configuration. (BEM-042): BEAM_MODEL_TOOLS must be"
    )


def test_a_server_that_does_not_answer_is_said_within_the_bound() -> None:
    with FakeOpenAI(answers_checks=False) as llm:
        llm.enqueue(chat_response(text_message("late")), delay=30)
        said = line({"BEAM_API_KEY": "k", "BEAM_API_BASE_URL": llm.url, "BEAM_MODEL": "slow"}, bound=0.5)
    head = f"model: slow at 127.0.0.1:{llm.port}"
    assert said == f"{head}: – no answer within 0.5 s; the first run will say whether it works"


def test_an_unreachable_server_is_a_line() -> None:
    with FakeOpenAI() as llm:
        url = llm.url
    said = line({"BEAM_API_KEY": "k", "BEAM_API_BASE_URL": url, "BEAM_MODEL": "gone"})
    assert said.startswith(
        f"model: gone at 127.0.0.1:{url.split(':')[2].split('/')[0]}: ✗ server: cannot reach"
    )


def test_the_check_says_each_finding_as_it_is_known() -> None:
    seen: list[str] = []
    with FakeOpenAI(structured=False) as llm:
        check = anyio.run(
            run_check, {"BEAM_API_KEY": "k", "BEAM_API_BASE_URL": llm.url, "BEAM_MODEL": "m"}, seen.append
        )
    assert check.code == 0 and check.tools == "native" and check.structured == "no"
    assert seen[0] == f"model m at {llm.url} (an OpenAI-compatible server), key from BEAM_API_KEY"
    assert seen[1:] == [
        "✓ key: accepted",
        "✓ model: m",
        "✓ tools: native (the model called the tool)",
        "– structured output: refused by the server; reviews read findings from text",
        "– context: the server does not say",
    ]
