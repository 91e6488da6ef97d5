"""Stand-ins for hosted providers: `FakeOpenAI` servers that refuse what each provider refuses, with
the provider's own error body, so the client meets the 400s a maintainer's key would meet.

- OpenAI (`openai`): a top-level field that is not in OpenAI's description of the request is
  refused (`Unrecognized request argument supplied: chat_template_kwargs`); a model in a list of
  known ones may be asked for, any other is a 404 (`model_not_found`). Its reasoning models
  (o-series, GPT-5, told by their name as the API tells them) also refuse `max_tokens`, `top_p` and
  a temperature other than 1, one field per 400, with the `param` and `code` the API sends.
- Anthropic's OpenAI SDK compatibility (`anthropic`): the documented table
  (https://docs.anthropic.com/en/api/openai-sdk) takes `max_tokens`, `max_completion_tokens`,
  `top_p`, `temperature` (0 to 1) and `tools`, and ignores `response_format`, `seed`, `metadata`
  and the rest of OpenAI's fields; a field that is not OpenAI's is refused in Anthropic's error form
  (`{"type": "error", "error": {"type": "invalid_request_error", "message": "...: Extra inputs are not
  permitted"}}`), and `n` other than 1 too.
- Gemini's OpenAI compatibility (`gemini`): a field Google's JSON mapping does not know is refused
  with Google's error, a list around one `error` with `INVALID_ARGUMENT`
  (`Invalid JSON payload received. Unknown name "chat_template_kwargs": Cannot find field.`).
- Azure OpenAI (`azure`): a deployment's URL, `/openai/deployments/NAME/chat/completions?api-version=…`,
  with the key in an `api-key` header; no `api-version` is a 404 (`Resource not found`), another
  deployment a 404 (`DeploymentNotFound`), a wrong key Azure's 401; the body's `model` is not read (the
  deployment is the model); the body is refused as OpenAI's is.
- OpenRouter (`openrouter`, `/api/v1`): passes the request on and ignores a field the model does not
  take; an unknown model is a 400 (`… is not a valid model ID`), a wrong key a 401 (`User not found.`).
- Groq (`groq`, `/openai/v1`): refuses a field it does not know (`property 'chat_template_kwargs' is
  unsupported`); its default model has no `json_schema` structured output; an unknown model is
  OpenAI's 404.
- Ollama (`ollama`): reads no key, ignores unknown fields, a model not pulled is a 404 (`model "x"
  not found, try pulling it first`).
- vLLM (`vllm`): takes `chat_template_kwargs`, ignores other unknown fields (a warning in its log),
  an unknown model is a 404 ("The model x does not exist.", vLLM's `object: error` body), lists
  `max_model_len` in `GET /v1/models`; with `--api-key`, a wrong key is `{"error": "Unauthorized"}`.
- llama.cpp `llama-server` (`llamacpp`): serves the one model it loaded whatever `model` says, takes
  `chat_template_kwargs`, ignores unknown fields, lists `meta.n_ctx_train`.
- LM Studio (`lmstudio`): reads no key, ignores unknown fields, a model not loaded is a 404.

Each stand-in is one `FakeOpenAI` with the provider's parameters (`StandIn`), and `StandIn.env` is
what a maintainer sets for it: the provider's own key variable (the stand-in's URL as the base URL,
as the provider's own would be), Azure's key and endpoint, or a local server's key, URL and model.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

from bot.beam import providers
from tests.support.openai_server import (
    FakeOpenAI,
    Received,
    Reply,
    _document,
    chat_response,
    error_body,
    text_message,
    tool_call,
    tool_calls_message,
)

Refuse = Callable[[dict[str, Any]], Reply | None]
_REASONING = re.compile(r"^(?:o\d|gpt-5)")


@functools.cache
def openai_fields() -> frozenset[str]:
    """The top-level fields OpenAI's description of `CreateChatCompletionRequest` names."""
    schemas = _document()["components"]["schemas"]

    def fields(schema: dict[str, Any]) -> set[str]:
        if "$ref" in schema:
            return fields(schemas[schema["$ref"].rsplit("/", 1)[-1]])
        found = set(schema.get("properties", {}))
        for part in schema.get("allOf", []):
            found |= fields(part)
        return found

    return frozenset(fields(schemas["CreateChatCompletionRequest"]))


def _unknown(body: dict[str, Any]) -> str | None:
    return next((key for key in body if key not in openai_fields()), None)


def openai(models: Collection[str] | None = None) -> Refuse:
    """OpenAI's chat completions: unknown fields, unknown models and, for its reasoning models, the
    sampling fields they do not take."""

    def refuse(body: dict[str, Any]) -> Reply | None:
        unknown = _unknown(body)
        if unknown is not None:
            return Reply(400, error_body(f"Unrecognized request argument supplied: {unknown}"))
        model = str(body.get("model"))
        if models is not None and model not in models:
            return _openai_not_found(model)
        if not _REASONING.match(model):
            return None
        if "max_tokens" in body:
            message = (
                "Unsupported parameter: 'max_tokens' is not supported with this model. "
                "Use 'max_completion_tokens' instead."
            )
            return Reply(400, error_body(message, param="max_tokens", code="unsupported_parameter"))
        if "top_p" in body:
            message = "Unsupported parameter: 'top_p' is not supported with this model."
            return Reply(400, error_body(message, param="top_p", code="unsupported_parameter"))
        if "temperature" in body and body["temperature"] != 1:
            message = (
                f"Unsupported value: 'temperature' does not support {body['temperature']} with this model. "
                "Only the default (1) value is supported."
            )
            return Reply(400, error_body(message, param="temperature", code="unsupported_value"))
        return None

    return refuse


def anthropic() -> Refuse:
    """Anthropic's OpenAI SDK compatibility layer."""

    def refuse(body: dict[str, Any]) -> Reply | None:
        unknown = _unknown(body)
        if unknown is not None:
            return _anthropic_error(f"{unknown}: Extra inputs are not permitted")
        if body.get("n", 1) != 1:
            return _anthropic_error("n: only n=1 is supported")
        return None

    return refuse


def _anthropic_error(message: str) -> Reply:
    return Reply(400, {"type": "error", "error": {"type": "invalid_request_error", "message": message}})


def gemini() -> Refuse:
    """Gemini's OpenAI compatibility endpoint."""

    def refuse(body: dict[str, Any]) -> Reply | None:
        unknown = _unknown(body)
        if unknown is None:
            return None
        message = f'Invalid JSON payload received. Unknown name "{unknown}": Cannot find field.'
        return _google_error(message)

    return refuse


def _google_error(message: str, reason: str | None = None) -> Reply:
    """Google's error body: a list around one `error` with `INVALID_ARGUMENT`."""
    if reason is None:
        detail = {
            "@type": "type.googleapis.com/google.rpc.BadRequest",
            "fieldViolations": [{"description": message}],
        }
    else:
        detail = {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": reason}
    error = {"code": 400, "message": message, "status": "INVALID_ARGUMENT", "details": [detail]}
    return Reply(400, [{"error": error}])


def _ignores(models: Collection[str] | None, not_found: Callable[[str], Reply]) -> Refuse:
    """A server that ignores what it does not know, and has only `models` (None: any)."""

    def refuse(body: dict[str, Any]) -> Reply | None:
        model = str(body.get("model"))
        return not_found(model) if models is not None and model not in models else None

    return refuse


def groq(models: Collection[str] | None = None) -> Refuse:
    """Groq's OpenAI-compatible endpoint: an unknown property is refused by name."""

    def refuse(body: dict[str, Any]) -> Reply | None:
        unknown = _unknown(body)
        if unknown is not None:
            return Reply(400, error_body(f"property '{unknown}' is unsupported"))
        return (
            _openai_not_found(str(body.get("model")))
            if models is not None and body.get("model") not in models
            else None
        )

    return refuse


def _openai_not_found(model: str) -> Reply:
    message = f"The model `{model}` does not exist or you do not have access to it."
    return Reply(404, error_body(message, code="model_not_found"))


def _openrouter_not_found(model: str) -> Reply:
    return Reply(400, {"error": {"message": f"{model} is not a valid model ID", "code": 400}})


def _ollama_not_found(model: str) -> Reply:
    return Reply(404, error_body(f'model "{model}" not found, try pulling it first', type="api_error"))


def _vllm_not_found(model: str) -> Reply:
    message = f"The model `{model}` does not exist."
    return Reply(
        404, {"object": "error", "message": message, "type": "NotFoundError", "param": None, "code": 404}
    )


def _lmstudio_not_found(model: str) -> Reply:
    return Reply(
        404,
        {"error": {"message": f'Model "{model}" not found. Load it first.', "type": "invalid_request_error"}},
    )


def _azure_route(deployment: str) -> Callable[[Received], Reply | None]:
    """Azure's answers to the URL: the deployment must exist and the query name an API version."""

    def route(received: Received) -> Reply | None:
        path, _, query = received.path.partition("?")
        if "api-version" not in parse_qs(query):
            return Reply(404, {"error": {"code": "404", "message": "Resource not found"}})
        if path != f"/openai/deployments/{deployment}/chat/completions":
            message = (
                "The API deployment for this resource does not exist. If you created the deployment "
                "within the last 5 minutes, please wait a moment and try again."
            )
            return Reply(404, {"error": {"code": "DeploymentNotFound", "message": message}})
        return None

    return route


_AZURE_401 = Reply(
    401,
    {
        "error": {
            "code": "401",
            "message": "Access denied due to invalid subscription key or wrong API endpoint. Make sure to "
            "provide a valid key for an active subscription and use a correct regional API endpoint "
            "for your resource.",
        }
    },
)


@dataclass(frozen=True)
class StandIn:
    """One provider as a stand-in: its endpoint, its refusals, and what a maintainer sets for it."""

    name: str
    prefix: str
    refuse: Callable[[Collection[str] | None], Refuse]
    structured: bool = True
    key_header: str = "authorization"
    unauthorised: Reply | None = None
    # A local server: BEAM_API_KEY, BEAM_API_BASE_URL and (unless it serves one model whatever is
    # asked) BEAM_MODEL are its settings; a hosted one needs only its key.
    local_model: str | None = None
    models_listing: Any = None
    azure_deployment: str | None = None

    @property
    def key_var(self) -> str:
        """The variable a maintainer puts the key in: the provider's own, as bot/beam/providers.py
        reads it, or BEAM_API_KEY for a server of their own (with its URL and model)."""
        known = providers.by_name(self.name)
        return known.key_var if known is not None else "BEAM_API_KEY"

    def server(self, **kwargs: Any) -> FakeOpenAI:
        models = kwargs.pop("models", None)
        route = _azure_route(self.azure_deployment) if self.azure_deployment else None
        options: dict[str, Any] = {
            "refuse": self.refuse(models),
            "structured": self.structured,
            "prefix": self.prefix,
            "key_header": self.key_header,
            "unauthorised": self.unauthorised,
            "route": route,
            "models_listing": self.models_listing,
        }
        options.update(kwargs)
        return FakeOpenAI(**options)

    def env(self, llm: FakeOpenAI, key: str = "sk-stand-in") -> dict[str, str]:
        """What a maintainer sets, and nothing more (the URL stands for the provider's own)."""
        if self.azure_deployment is not None:
            return {self.key_var: key, "AZURE_OPENAI_ENDPOINT": llm.origin}
        env = {self.key_var: key, "BEAM_API_BASE_URL": llm.url}
        if self.local_model is not None:
            env["BEAM_MODEL"] = self.local_model
        return env


def _models(*entries: dict[str, Any]) -> dict[str, Any]:
    return {"object": "list", "data": [{"object": "model", **entry} for entry in entries]}


STAND_INS: dict[str, StandIn] = {
    stand.name: stand
    for stand in (
        StandIn("openai", "/v1", openai),
        StandIn(
            "azure",
            f"/openai/deployments/{providers.AZURE.default_model}",
            lambda models: openai(None),
            key_header="api-key",
            unauthorised=_AZURE_401,
            azure_deployment=providers.AZURE.default_model,
        ),
        StandIn(
            "anthropic",
            "/v1",
            lambda models: anthropic(),
            unauthorised=Reply(
                401,
                {"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}},
            ),
        ),
        StandIn(
            "gemini",
            "/v1beta/openai",
            lambda models: gemini(),
            # Google says a wrong key with a 400, not a 401.
            unauthorised=_google_error("API key not valid. Please pass a valid API key.", "API_KEY_INVALID"),
        ),
        StandIn(
            "openrouter",
            "/api/v1",
            lambda models: _ignores(models, _openrouter_not_found),
            unauthorised=Reply(401, {"error": {"message": "User not found.", "code": 401}}),
            models_listing=_models({"id": "openai/gpt-4.1-mini", "context_length": 1047576}),
        ),
        StandIn(
            "groq",
            "/openai/v1",
            groq,
            structured=False,
            unauthorised=Reply(401, error_body("Invalid API Key", code="invalid_api_key")),
            models_listing=_models({"id": "llama-3.3-70b-versatile", "context_window": 131072}),
        ),
        StandIn(
            "ollama",
            "/v1",
            lambda models: _ignores(models, _ollama_not_found),
            local_model="qwen2.5-coder:7b",
            models_listing=_models({"id": "qwen2.5-coder:7b", "owned_by": "library"}),
        ),
        StandIn(
            "vllm",
            "/v1",
            lambda models: _ignores(models, _vllm_not_found),
            local_model="Qwen/Qwen2.5-Coder-7B-Instruct",
            unauthorised=Reply(401, {"error": "Unauthorized"}),
            models_listing=_models({"id": "Qwen/Qwen2.5-Coder-7B-Instruct", "max_model_len": 32768}),
        ),
        StandIn(
            "llamacpp",
            "/v1",
            lambda models: _ignores(None, _openai_not_found),  # serves its one model, whatever is asked
            unauthorised=Reply(
                401, {"error": {"code": 401, "message": "Invalid API Key", "type": "authentication_error"}}
            ),
            models_listing=_models(
                {"id": "qwen2.5-coder-7b-instruct-q4_k_m.gguf", "meta": {"n_ctx_train": 32768}}
            ),
        ),
        StandIn(
            "lmstudio",
            "/v1",
            lambda models: _ignores(models, _lmstudio_not_found),
            local_model="qwen2.5-coder-7b-instruct",
        ),
    )
}


def stand_in(kind: str, **kwargs: Any) -> FakeOpenAI:
    """A `FakeOpenAI` that behaves as the provider `kind` does (a key of `STAND_INS`); `models`, if
    given, are the only ones it has. Anthropic ignores `response_format`, so its stand-in answers a
    schema request as any other."""
    return STAND_INS[kind].server(**kwargs)


def sent_fields(llm: FakeOpenAI) -> list[list[str]]:
    """The top-level fields of each request the stand-in answered, in order (for assertions)."""
    return [sorted(body) for body in llm.requests]


def reviewer(path: str, line: int, model: str | None = None) -> Callable[[Any], dict[str, Any]]:
    """A model that reviews any change the same way, whatever way it is asked (for
    `FakeOpenAI.respond_with`): one finding at `path:line`, as structured output when a schema is
    asked for (the review, then the check of each finding), as a `review_change` call in a tool
    loop, and a short text once a tool answered. `model` is the name it answers as (else the one asked)."""

    def answer(body: Any) -> dict[str, Any]:
        name = model or str(body.get("model"))
        schema = (body.get("response_format") or {}).get("json_schema") or {}
        if schema.get("name") == "verdict":
            verdict = {"real": True, "line": line, "evidence": "return a + b"}
            return chat_response(text_message(json.dumps(verdict)), model=name)
        if schema:
            claim = {
                "path": path,
                "line": line,
                "severity": "major",
                "claim": "Check this line.",
                "suggestion": None,
            }
            return chat_response(
                text_message(json.dumps({"body": "One bug.", "comments": [claim]})), model=name
            )
        answered = any(m.get("role") == "tool" for m in body["messages"] if isinstance(m, dict))
        offered = {tool["function"]["name"] for tool in body.get("tools") or []}
        if "review_change" in offered and not answered:
            args = {
                "body": "One bug.",
                "comments": [{"path": path, "line": line, "body": "Check this line."}],
            }
            return chat_response(tool_calls_message([tool_call("review_change", args)]), model=name)
        return chat_response(text_message("Reviewed."), model=name)

    return answer
