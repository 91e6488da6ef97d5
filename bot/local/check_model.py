"""`beam-bot check-model`: one small call to the configured model, and a few lines on what works.

A maintainer with a key wants to know, before installing anything on a repository, whether the
key, the model name, tools and structured output work with the server they point at (issue 42).
The calls go through the same client as every run (`OpenAiCompatible.from_env`), so a field the
server refuses is adapted here exactly as in a run, and said. What fails gets one line with its fix.

The calls: one at the review's temperature with one tool offered (the key, the model, the tools,
the fields the server refuses); one asking for structured output, only when the first worked; and
`GET {base}/models`, whose entry for the model gives the context size where the server says it
(vLLM's `max_model_len`, OpenRouter's `context_length`, Groq's `context_window`, llama.cpp's
`meta.n_ctx_train`).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any, TextIO

import httpx

from bot.beam import structured_output
from bot.beam.errors import BeamError
from bot.beam.model_env import ModelEnv, read_model_env
from bot.beam.openai_client import OpenAiCompatible, status_of
from bot.beam.providers import KEY_VARS, provider_of
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
SCHEMA = {
    "type": "object",
    "properties": {"ok": {"type": "boolean"}},
    "required": ["ok"],
    "additionalProperties": False,
}
MODELS_TIMEOUT = 10.0
# Where servers put a model's context size in their `GET /models` entry.
_CONTEXT_KEYS = ("context_length", "max_model_len", "context_window", "max_context_length")

NO_KEY = (
    "✗ key: none set. Fix: set BEAM_API_KEY (with BEAM_API_BASE_URL and BEAM_MODEL for your server), "
    f"or your provider's own key ({', '.join(KEY_VARS)})"
)


async def check_model(env: Mapping[str, str], out: TextIO) -> int:
    """Prints what works; 0 when the key and the model answer, 1 when they do not, 2 when the
    settings are wrong or missing."""
    try:
        said = read_model_env(env)
        client = OpenAiCompatible.from_env(env)
    except BeamError as error:
        out.write(f"✗ settings: {error}\n")
        return 2
    if said is None or client is None:
        out.write(NO_KEY + "\n")
        return 2
    known = provider_of(said.base_url)  # the server the URL names, whichever variable the key came from
    where = known.name if known is not None else "an OpenAI-compatible server"
    out.write(f"model {said.model} at {said.base_url} ({where}), key from {said.key_var}\n")
    async with client:
        code = await _first_call(client, said, out)
        if code == 0:
            await _structured(client, said, out)
            out.write(await _context(client, said) + "\n")
    return code


async def _first_call(client: OpenAiCompatible, said: ModelEnv, out: TextIO) -> int:
    request = AgentInput(
        content=[ContentPart.text_part("check")],
        session_id=uuid.uuid4(),
        run_id=uuid.uuid4(),
        agent_name="review",  # the review's temperature: the call a run makes most
    )
    try:
        completion = await client.complete_for(request, ASK_TOOL, [PING])
    except BeamError as error:
        _adapted(client, said, out)
        out.write(_failure(error, said) + "\n")
        return 1
    served = (
        f" (answered as {completion.model})" if completion.model and completion.model != said.model else ""
    )
    out.write(f"✓ key: accepted\n✓ model: {said.model}{served}\n")
    _adapted(client, said, out)
    if client.uses_text_tools:
        why = "BEAM_MODEL_TOOLS=text" if said.tools_mode == "text" else "the server refused `tools`"
        out.write(f"✓ tools: described in the prompt, calls read from the text ({why})\n")
    elif completion.tool_calls:
        out.write("✓ tools: native (the model called the tool)\n")
    else:
        out.write(
            "– tools: native `tools` accepted, but the model answered in text instead of calling the tool\n"
        )
    return 0


def _adapted(client: OpenAiCompatible, said: ModelEnv, out: TextIO) -> None:
    for adaptation in client.adaptations():
        out.write(
            f"! refused field: {adaptation.field}: {adaptation.describe()} from now on. "
            f"{_fix(adaptation, said)}\n"
        )


def _fix(adaptation: Adaptation, said: ModelEnv) -> str:
    """What to change so the field is not sent at all (each run adapts on its own anyway)."""
    if adaptation.field == "temperature" and said.temperature is not None:
        return "Fix: unset BEAM_MODEL_TEMPERATURE (this model takes only its default)."
    if said.extra_body is not None and adaptation.field in said.extra_body:
        return "Fix: take it out of BEAM_MODEL_EXTRA_BODY."
    if adaptation.field == "chat_template_kwargs":
        return "Fix: set BEAM_MODEL_EXTRA_BODY={} to never send it (each run adapts on its own anyway)."
    return "Nothing to do: each run adapts on its own (a reasoning model takes fewer fields)."


def _failure(error: BeamError, said: ModelEnv) -> str:
    """One line: what failed, and how to fix it."""
    detail = error.detail or ""
    status = status_of(detail)
    if error.code == "BEM-082":
        return (
            f"✗ server: cannot reach {said.base_url} ({detail}). "
            "Fix: check BEAM_API_BASE_URL and that the server runs."
        )
    if status in (401, 403):
        return (
            f"✗ key: refused by {said.base_url} ({status}). Fix: set {said.key_var} to a valid key for this "
            "server (a key for another provider, an expired or revoked key, a key without access to the API)."
        )
    if status == 404 and "model" in detail.lower():
        return (
            f"✗ model: {said.model!r} not found at {said.base_url} (404). Fix: set BEAM_MODEL to a model "
            "this key may use (the provider's model list, or GET /models on the server)."
        )
    if status == 404:
        return (
            f"✗ server: no chat completions at {said.base_url}/chat/completions (404). Fix: set "
            "BEAM_API_BASE_URL to the part before /chat/completions (it usually ends in /v1)."
        )
    if error.code == "BEM-093":
        return "✗ tools: refused, and BEAM_MODEL_TOOLS=native. Fix: set BEAM_MODEL_TOOLS=auto (or text)."
    return f"✗ model call failed ({error.code}): {detail}. Fix: see docs/models.md, or the server's logs."


async def _structured(client: OpenAiCompatible, said: ModelEnv, out: TextIO) -> None:
    if not said.structured:
        out.write("– structured output: off (BEAM_MODEL_STRUCTURED=off)\n")
        return
    try:
        answer = await client.complete_structured(ASK_SCHEMA, SCHEMA, name="check")
    except BeamError as error:
        out.write(f"– structured output: the call failed ({error}); reviews read findings from text\n")
        return
    if isinstance(answer, dict) and answer.get("ok") is True:
        out.write("✓ structured output: yes (answers match a JSON schema)\n")
    elif structured_output.refused(client.base_url, client.model):
        out.write("– structured output: refused by the server; reviews read findings from text\n")
    else:
        out.write(
            "– structured output: accepted but not kept to (the answer did not match); "
            "reviews read findings from text\n"
        )


async def _context(client: OpenAiCompatible, said: ModelEnv) -> str:
    """The context size from the server's model list, where its entry for the model has one."""
    try:
        async with httpx.AsyncClient(timeout=MODELS_TIMEOUT, follow_redirects=False) as http:
            response = await http.get(
                f"{client.base_url}/models", headers={"Authorization": f"Bearer {said.api_key}"}
            )
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
