"""The model check: one small call to the configured model, and what works (issue 42).

A maintainer with a key wants to know whether the key, the model name, tools and structured output
work with the server they point at: before installing anything (`beam-bot check-model`, which prints
every line) and each time the bot starts (`serve` and `action`, which print one line). Both run this
check, so they cannot disagree. The calls go through the same client as every run
(`OpenAiCompatible.from_env`), so a field the server refuses is adapted here exactly as in a run, and
said. What fails gets one line with its fix.

The calls: one at the review's temperature with one tool offered (the key, the model, the tools,
the fields the server refuses); one asking for structured output, only when the first worked; and,
for `check-model`, `GET {base}/models`, whose entry for the model gives the context size where the
server says it (vLLM's `max_model_len`, OpenRouter's `context_length`, Groq's `context_window`,
llama.cpp's `meta.n_ctx_train`).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx

from bot.beam import structured_output
from bot.beam.chat_replies import status_of
from bot.beam.errors import BeamError
from bot.beam.model_env import ModelEnv, read_model_env
from bot.beam.openai_client import OpenAiCompatible
from bot.beam.providers import KEY_VARS, OLLAMA, OLLAMA_HOST_VAR, endpoint, provider_of
from bot.beam.request_fields import Adaptation
from bot.beam.tools import ToolSpec, json_params
from bot.beam.types import AgentInput, ContentPart

PING = ToolSpec(
    "ping",
    "Answers pong. Call it when asked to check that tools work.",
    False,
    json_params({"word": {"type": "string", "description": "any word"}}, ["word"]),
)
ASK_TOOL: list[dict[str, Any]] = [
    {"role": "system", "content": "You check that tool calls work. Call the ping tool once, with any word."},
    {"role": "user", "content": "Call ping now."},
]
ASK_SCHEMA: list[dict[str, Any]] = [{"role": "user", "content": 'Answer with {"ok": true}.'}]
SCHEMA_NAME = "check"
SCHEMA = {
    "type": "object",
    "properties": {"ok": {"type": "boolean"}},
    "required": ["ok"],
    "additionalProperties": False,
}
MODELS_TIMEOUT = 10.0
# How long `serve` and `action` wait for the check before they go on: a slow or silent server
# is said in the line, and never holds the bot back longer than this.
START_TIMEOUT = 10.0
# Where servers put a model's context size in their `GET /models` entry.
_CONTEXT_KEYS = ("context_length", "max_model_len", "context_window", "max_context_length")

NO_KEY = (
    "✗ key: none set. Fix: set BEAM_API_KEY (with BEAM_API_BASE_URL and BEAM_MODEL for your server), "
    f"or your provider's own key ({', '.join(KEY_VARS)}), or {OLLAMA_HOST_VAR} with BEAM_MODEL for Ollama"
)

Emit = Callable[[str], None]


@dataclass
class ModelCheck:
    """What the check found. `code`: 0 when the key and the model answer, 1 when they do not, 2 when
    the settings are wrong or missing."""

    code: int = 2
    said: ModelEnv | None = None
    problem: str = ""  # the failing line (settings, key, model, server), with its fix
    tools: str = ""  # native, in the prompt, or answered in text
    structured: str = ""  # yes, no, off, or not kept to
    adapted: list[Adaptation] = field(default_factory=list)


async def run_check(env: Mapping[str, str], emit: Emit, *, context: bool = True) -> ModelCheck:
    """Checks the model `env` names, saying each finding through `emit` as it is known (one line
    each, no newline), and returns them all."""
    check = ModelCheck()
    try:
        said = read_model_env(env)
        client = OpenAiCompatible.from_env(env)
    except BeamError as error:
        check.problem = f"✗ settings: {error}"
        emit(check.problem)
        return check
    if said is None or client is None:
        check.problem = NO_KEY
        emit(NO_KEY)
        return check
    check.said = said
    known = provider_of(said.base_url)  # the server the URL names, whichever variable the key came from
    if said.provider is OLLAMA:  # Ollama's URL is the maintainer's own host: its variable names it
        emit(f"model {said.model} at {said.base_url} (Ollama, from {said.key_var}; no key)")
    else:
        where = known.name if known is not None else "an OpenAI-compatible server"
        emit(f"model {said.model} at {said.base_url} ({where}), key from {said.key_var}")
    async with client:
        await _first_call(client, said, emit, check)
        if check.code == 0:
            await _structured(client, said, emit, check)
            if context:
                emit(await _context(client, said))
    return check


def one_line(check: ModelCheck) -> str:
    """The check in one line, as `serve` and `action` print it at start."""
    said = check.said
    if said is None:
        if check.problem == NO_KEY:
            return (
                "model: none (no key set): the echo model answers, repeating the prompt. Set "
                f"BEAM_API_KEY, or your provider's own key ({', '.join(KEY_VARS)})"
            )
        return f"model: {check.problem}"
    head = f"model: {said.model} at {_host(said.base_url)}"
    if check.code != 0:
        return f"{head}: {check.problem}"
    parts = ["key ok", f"tools {check.tools}", f"structured output {check.structured}"]
    if check.adapted:
        parts.append("not sent: " + ", ".join(a.describe() for a in check.adapted))
    return f"{head}: {', '.join(parts)}"


async def start_line(env: Mapping[str, str], bound: float = START_TIMEOUT) -> str:
    """The one line `serve` and `action` print at start: the check, bounded by `bound` seconds. A
    failure is a line, never an exception: the bot starts either way, and each run says its own error."""
    with anyio.move_on_after(bound):
        try:
            return one_line(await run_check(env, lambda line: None, context=False))
        except Exception as error:  # the check is advice: no failure of it may stop the bot
            return f"model: ✗ the check failed ({type(error).__name__}); the first run will say more"
    said = read_model_env(env)  # read without error, or the check would have ended at once
    head = f"model: {said.model} at {_host(said.base_url)}" if said is not None else "model:"
    return f"{head}: – no answer within {bound:g} s; the first run will say whether it works"


def _host(base_url: str) -> str:
    parts = urlsplit(base_url)
    return parts.netloc or base_url


async def _first_call(client: OpenAiCompatible, said: ModelEnv, emit: Emit, check: ModelCheck) -> None:
    request = AgentInput(
        content=[ContentPart.text_part("check")],
        session_id=uuid.uuid4(),
        run_id=uuid.uuid4(),
        agent_name="review",  # the review's temperature: the call a run makes most
    )
    try:
        completion = await client.complete_for(request, ASK_TOOL, [PING])
    except BeamError as error:
        _adapted(client, said, emit, check)
        check.code = 1
        check.problem = _failure(error, said)
        emit(check.problem)
        return
    check.code = 0
    served = (
        f" (answered as {completion.model})" if completion.model and completion.model != said.model else ""
    )
    emit("✓ key: accepted")
    emit(f"✓ model: {said.model}{served}")
    _adapted(client, said, emit, check)
    if client.uses_text_tools:
        why = "BEAM_MODEL_TOOLS=text" if said.tools_mode == "text" else "the server refused `tools`"
        check.tools = "in the prompt"
        emit(f"✓ tools: described in the prompt, calls read from the text ({why})")
    elif completion.tool_calls:
        check.tools = "native"
        emit("✓ tools: native (the model called the tool)")
    else:
        check.tools = "native, but the model answered in text"
        emit("– tools: native `tools` accepted, but the model answered in text instead of calling the tool")


def _adapted(client: OpenAiCompatible, said: ModelEnv, emit: Emit, check: ModelCheck) -> None:
    check.adapted = client.adaptations()
    for adaptation in check.adapted:
        fix = _fix(adaptation, said)
        emit(f"! refused field: {adaptation.field}: {adaptation.describe()} from now on. {fix}")


def _fix(adaptation: Adaptation, said: ModelEnv) -> str:
    """What to change so the field is not sent at all (each run adapts on its own anyway)."""
    if adaptation.field == "temperature" and said.temperature is not None:
        return "Fix: unset BEAM_MODEL_TEMPERATURE (this model takes only its default)."
    if said.extra_body is not None and adaptation.field in said.extra_body:
        return "Fix: take it out of BEAM_MODEL_EXTRA_BODY."
    if adaptation.field == "chat_template_kwargs":
        return "Fix: set BEAM_MODEL_EXTRA_BODY={} to never send it (each run adapts on its own anyway)."
    return "Nothing to do: each run adapts on its own (a reasoning model takes fewer fields)."


# A key the server does not take, in the words of servers that say so with a 400 (Gemini's
# `API_KEY_INVALID`) rather than a 401.
_BAD_KEY = ("api key not valid", "api_key_invalid", "invalid api key", "invalid x-api-key")
# A model the server does not have, in the words of servers that say so with a 400 (OpenRouter).
_NO_MODEL = ("not a valid model", "does not exist", "not found", "deploymentnotfound", "no such model")


def _failure(error: BeamError, said: ModelEnv) -> str:
    """One line: what failed, and how to fix it."""
    detail = error.detail or ""
    said_lower = detail.lower()
    status = status_of(detail)
    if error.code == "BEM-082":
        return (
            f"✗ server: cannot reach {said.base_url} ({detail}). "
            "Fix: check BEAM_API_BASE_URL and that the server runs."
        )
    if status in (401, 403) or (status == 400 and any(word in said_lower for word in _BAD_KEY)):
        return (
            f"✗ key: refused by {said.base_url} ({status}). Fix: set {said.key_var} to a valid key for this "
            "server (a key for another provider, an expired or revoked key, a key without access to the API)."
        )
    names_model = "model" in said_lower or "deployment" in said_lower
    if names_model and (status == 404 or (status == 400 and any(word in said_lower for word in _NO_MODEL))):
        what = "a deployment of this resource" if "deployment" in said_lower else "a model this key may use"
        return (
            f"✗ model: {said.model!r} not found at {said.base_url} ({status}). Fix: set BEAM_MODEL to {what} "
            "(the provider's model list, or GET /models on the server)."
        )
    if status == 404:
        return (
            f"✗ server: no chat completions at {said.base_url}/chat/completions (404). Fix: set "
            "BEAM_API_BASE_URL to the part before /chat/completions (it usually ends in /v1)."
        )
    if error.code == "BEM-093":
        return "✗ tools: refused, and BEAM_MODEL_TOOLS=native. Fix: set BEAM_MODEL_TOOLS=auto (or text)."
    return f"✗ model call failed ({error.code}): {detail}. Fix: see docs/models.md, or the server's logs."


async def _structured(client: OpenAiCompatible, said: ModelEnv, emit: Emit, check: ModelCheck) -> None:
    if not said.structured:
        check.structured = "off"
        emit("– structured output: off (BEAM_MODEL_STRUCTURED=off)")
        return
    try:
        answer = await client.complete_structured(ASK_SCHEMA, SCHEMA, name=SCHEMA_NAME)
    except BeamError as error:
        check.structured = "no (the call failed)"
        emit(f"– structured output: the call failed ({error}); reviews read findings from text")
        return
    if isinstance(answer, dict) and answer.get("ok") is True:
        check.structured = "yes"
        emit("✓ structured output: yes (answers match a JSON schema)")
    elif structured_output.refused(client.base_url, client.model):
        check.structured = "no"
        emit("– structured output: refused by the server; reviews read findings from text")
    else:
        check.structured = "not kept to"
        emit(
            "– structured output: accepted but not kept to (the answer did not match); "
            "reviews read findings from text"
        )


async def _context(client: OpenAiCompatible, said: ModelEnv) -> str:
    """The context size from the server's model list, where its entry for the model has one."""
    url, headers = endpoint(client.base_url, said.api_key, "models")
    try:
        async with httpx.AsyncClient(timeout=MODELS_TIMEOUT, follow_redirects=False) as http:
            response = await http.get(url, headers=headers)
        listing = response.json() if response.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        listing = None
    size = _context_size(listing, said.model)
    return f"✓ context: {size:,} tokens (GET /models)" if size else "– context: the server does not say"


def _context_size(listing: Any, model: str) -> int | None:
    entries = listing.get("data") if isinstance(listing, dict) else None
    for entry in entries if isinstance(entries, list) else []:
        if not isinstance(entry, dict) or entry.get("id") != model:
            continue
        meta = entry.get("meta")
        found = [entry.get(key) for key in _CONTEXT_KEYS]
        found.append(meta.get("n_ctx_train") if isinstance(meta, dict) else None)
        for value in found:
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
    return None
