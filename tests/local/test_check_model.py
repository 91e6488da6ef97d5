"""`beam-bot check-model` against provider stand-ins (tests/support/provider_servers.py): what works
is said in a few lines, and a wrong key, an unknown model or a refused field each get their fix."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.support.openai_server import FakeOpenAI, chat_response, text_message, without_model_env
from tests.support.provider_servers import STAND_INS, stand_in
from tests.support.terminal import Terminal, screen_lines

MODELS = {"object": "list", "data": [{"id": "gpt-4.1-mini", "object": "model", "context_window": 1047576}]}


def check_model(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    clean = without_model_env(os.environ)
    return subprocess.run(
        [sys.executable, "-m", "bot.cli", "check-model", *args],
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def openai_env(llm: FakeOpenAI, **more: str) -> dict[str, str]:
    return {"OPENAI_API_KEY": "sk-test-check", "BEAM_API_BASE_URL": llm.url, **more}


def test_an_openai_key_says_what_works() -> None:
    with stand_in("openai", models={"gpt-4.1-mini"}, models_listing=MODELS, answers_checks=False) as llm:
        llm.reply_tool_calls(("ping", {"word": "hello"}), model="gpt-4.1-mini-2025-04-14")
        llm.reply_text(json.dumps({"ok": True}))
        result = check_model(openai_env(llm))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines() == [
        f"model gpt-4.1-mini at {llm.url} (an OpenAI-compatible server), key from OPENAI_API_KEY",
        "✓ key: accepted",
        "✓ model: gpt-4.1-mini (answered as gpt-4.1-mini-2025-04-14)",
        "! refused field: chat_template_kwargs: chat_template_kwargs not sent from now on. Fix: set "
        "BEAM_MODEL_EXTRA_BODY={} to never send it (each run adapts on its own anyway).",
        "✓ tools: native (the model called the tool)",
        "✓ structured output: yes (answers match a JSON schema)",
        "✓ context: 1,047,576 tokens (GET /models)",
    ]
    assert len(llm.refused) == 1 and len(llm.requests) == 2


def test_a_reasoning_model_says_each_refused_field_once() -> None:
    with stand_in("openai", answers_checks=False) as llm:
        llm.reply_tool_calls(("ping", {"word": "hello"}), model="gpt-5-mini")
        llm.reply_text(json.dumps({"ok": True}), model="gpt-5-mini")
        result = check_model(openai_env(llm, BEAM_MODEL="gpt-5-mini", BEAM_MODEL_TEMPERATURE="0.2"))
    assert result.returncode == 0, result.stdout + result.stderr
    refused = [line for line in result.stdout.splitlines() if line.startswith("! refused field")]
    assert [line.split(":")[1].strip() for line in refused] == [
        "chat_template_kwargs",
        "max_tokens",
        "top_p",
        "temperature",
    ]
    assert "max_tokens sent as max_completion_tokens from now on. Nothing to do" in refused[1]
    assert refused[3].endswith("Fix: unset BEAM_MODEL_TEMPERATURE (this model takes only its default).")
    assert "– context: the server does not say" in result.stdout
    # The structured call went right the first time.
    assert len(llm.refused) == 4 and len(llm.requests) == 2


def test_a_wrong_key_gets_its_fix() -> None:
    with stand_in("openai", api_key="sk-the-right-one") as llm:
        result = check_model(openai_env(llm))
    assert result.returncode == 1
    last = result.stdout.splitlines()[-1]
    assert last.startswith(f"✗ key: refused by {llm.url} (401). Fix: set OPENAI_API_KEY to a valid key")
    assert "sk-test-check" not in result.stdout + result.stderr


def test_an_unknown_model_gets_its_fix() -> None:
    with stand_in("openai", models={"gpt-4.1-mini"}) as llm:
        result = check_model(openai_env(llm, BEAM_MODEL="gpt-9"))
    assert result.returncode == 1
    assert result.stdout.splitlines()[-1] == (
        f"✗ model: 'gpt-9' not found at {llm.url} (404). Fix: set BEAM_MODEL to a model this key may use "
        "(the provider's model list, or GET /models on the server)."
    )


def test_anthropics_layer_takes_tools_and_ignores_the_schema() -> None:
    with stand_in("anthropic", answers_checks=False) as llm:
        llm.reply_text("I would rather not call tools.", model="claude-sonnet-4-5")
        llm.reply_text("ok", model="claude-sonnet-4-5")
        result = check_model({"ANTHROPIC_API_KEY": "sk-ant", "BEAM_API_BASE_URL": llm.url})
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "model claude-sonnet-4-5 at" in out and "key from ANTHROPIC_API_KEY" in out
    assert "! refused field: chat_template_kwargs" in out
    assert "– tools: native `tools` accepted, but the model answered in text" in out
    assert "– structured output: accepted but not kept to (the answer did not match)" in out


def test_a_server_that_refuses_tools_is_read_in_text() -> None:
    with FakeOpenAI(answers_checks=False) as llm:
        llm.reply_error(400, "tools param requires --jinja flag")
        llm.reply_text('<tool_call>{"name": "ping", "arguments": {"word": "hi"}}</tool_call>')
        result = check_model({"BEAM_API_KEY": "k", "BEAM_API_BASE_URL": llm.url, "BEAM_MODEL": "qwen"})
    assert result.returncode == 0, result.stdout + result.stderr
    assert "model qwen at" in result.stdout and "key from BEAM_API_KEY" in result.stdout
    assert (
        "✓ tools: described in the prompt, calls read from the text (the server refused `tools`)"
        in result.stdout
    )
    assert "– structured output: refused by the server; reviews read findings from text" in result.stdout


def test_no_key_or_a_wrong_setting_is_exit_2() -> None:
    result = check_model({})
    assert result.returncode == 2 and result.stdout.startswith("✗ key: none set. Fix: set BEAM_API_KEY")
    assert "OPENAI_API_KEY" in result.stdout
    result = check_model({"OPENAI_API_KEY": "k", "BEAM_MODEL_EXTRA_BODY": "[]"})
    assert result.returncode == 2 and "BEAM_MODEL_EXTRA_BODY must be a JSON object" in result.stdout
    result = check_model({}, "--nope")
    assert result.returncode == 2 and "unrecognized arguments: --nope" in result.stderr


def test_ctrl_c_while_the_model_answers_is_one_line_and_130() -> None:
    with FakeOpenAI(answers_checks=False) as llm:
        llm.enqueue(chat_response(text_message("late")), delay=30)
        argv = [sys.executable, "-m", "bot.cli", "check-model"]
        env = {**without_model_env(os.environ), **openai_env(llm), "TERM": "xterm"}
        with Terminal(argv, env) as term:
            term.expect(r"model \S+ at ", timeout=30)
            term.read_for(0.5)
            term.ctrl_c()
            code = term.wait(timeout=30)
    assert code == 130, term.text
    assert "Traceback" not in term.text
    assert screen_lines(term.text)[-1].endswith("beam-bot check-model: ✗ stopped by SIGINT (Ctrl-C)"), (
        term.text
    )


# Issue 42: each provider's stand-in, with only the variables a maintainer sets for it.
# The stand-ins' URLs are not the providers' hosts, so the extra body is sent once and refused; Azure's
# deployment path says what it is, so it is never sent there; the others ignore or take it.
REFUSE_THE_EXTRA_BODY = {"openai", "anthropic", "gemini", "groq"}
READ_NO_KEY = {"ollama", "lmstudio"}
HAVE_A_MODEL_LIST = sorted(set(STAND_INS) - {"anthropic", "gemini", "llamacpp"})


@pytest.mark.parametrize("name", sorted(STAND_INS))
def test_each_providers_stand_in_says_what_works(name: str) -> None:
    stand = STAND_INS[name]
    with stand.server() as llm:
        result = check_model(stand.env(llm))
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].endswith(f"key from {stand.key_var}"), lines
    assert lines[1:3] == ["✓ key: accepted", lines[2]] and lines[2].startswith("✓ model: ")
    refused = [line for line in lines if line.startswith("! refused field")]
    if name in REFUSE_THE_EXTRA_BODY:
        [line] = refused
        assert (
            line.startswith("! refused field: chat_template_kwargs:")
            and "Fix: set BEAM_MODEL_EXTRA_BODY={}" in line
        )
    else:
        assert refused == []
    assert "✓ tools: native (the model called the tool)" in lines
    if stand.structured:
        assert "✓ structured output: yes (answers match a JSON schema)" in lines
    else:
        assert "– structured output: refused by the server; reviews read findings from text" in lines
    assert lines[-1].startswith(("✓ context: ", "– context: the server does not say"))
    assert len(llm.checks) == 1 + stand.structured and llm.requests == []


@pytest.mark.parametrize("name", sorted(set(STAND_INS) - READ_NO_KEY))
def test_each_providers_refusal_of_the_key_gets_its_fix(name: str) -> None:
    stand = STAND_INS[name]
    with stand.server(api_key="sk-the-right-one") as llm:
        result = check_model(stand.env(llm))
    assert result.returncode == 1, result.stdout + result.stderr
    last = result.stdout.splitlines()[-1]
    assert last.startswith("✗ key: refused by ") and f"Fix: set {stand.key_var} to a valid key" in last, last
    assert "sk-stand-in" not in result.stdout + result.stderr


@pytest.mark.parametrize("name", HAVE_A_MODEL_LIST)
def test_each_providers_unknown_model_gets_its_fix(name: str) -> None:
    stand = STAND_INS[name]
    with stand.server(models={"the-one-it-has"}) as llm:
        result = check_model({**stand.env(llm), "BEAM_MODEL": "no-such-model"})
    assert result.returncode == 1, result.stdout + result.stderr
    last = result.stdout.splitlines()[-1]
    assert last.startswith("✗ model: 'no-such-model' not found at "), last
    what = "a deployment of this resource" if name == "azure" else "a model this key may use"
    assert f"Fix: set BEAM_MODEL to {what}" in last, last


def test_ollama_named_by_its_host_alone_is_checked_with_no_key() -> None:
    """OLLAMA_HOST and BEAM_MODEL, as a maintainer with Ollama has them: the first line says Ollama
    and where its address came from, never a key; a model not pulled gets the model's fix."""
    with stand_in("ollama", models={"qwen2.5-coder:7b"}) as llm:
        host = f"{llm.host}:{llm.port}"
        result = check_model({"OLLAMA_HOST": host, "BEAM_MODEL": "qwen2.5-coder:7b"})
        missing = check_model({"OLLAMA_HOST": host, "BEAM_MODEL": "llama3"})
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"model qwen2.5-coder:7b at {llm.url} (Ollama, from OLLAMA_HOST; no key)"
    assert "✓ tools: native (the model called the tool)" in lines
    assert missing.returncode == 1 and missing.stdout.splitlines()[-1].startswith(
        "✗ model: 'llama3' not found"
    )
