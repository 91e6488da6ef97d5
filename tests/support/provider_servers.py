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
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Collection
from typing import Any

from tests.support.openai_server import FakeOpenAI, Reply, _document, error_body

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
            message = f"The model `{model}` does not exist or you do not have access to it."
            return Reply(404, error_body(message, code="model_not_found"))
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
        detail = {
            "@type": "type.googleapis.com/google.rpc.BadRequest",
            "fieldViolations": [{"description": message}],
        }
        error = {"code": 400, "message": message, "status": "INVALID_ARGUMENT", "details": [detail]}
        return Reply(400, [{"error": error}])

    return refuse


def stand_in(kind: str, **kwargs: Any) -> FakeOpenAI:
    """A `FakeOpenAI` that refuses as the provider `kind` does (`openai`, `anthropic`, `gemini`).
    Anthropic ignores `response_format`, so its stand-in answers a schema request as any other."""
    models = kwargs.pop("models", None)
    refuse = {"openai": lambda: openai(models), "anthropic": anthropic, "gemini": gemini}[kind]()
    return FakeOpenAI(refuse=refuse, structured=kwargs.pop("structured", True), **kwargs)


def sent_fields(llm: FakeOpenAI) -> list[list[str]]:
    """The top-level fields of each request the stand-in answered, in order (for assertions)."""
    return [sorted(body) for body in llm.requests]
