"""Structured output: asking the server for an answer that matches a JSON schema (issue 30).

A small self-hosted model rarely calls `review_change` and often writes findings that cannot be
parsed; a server that constrains decoding to a schema makes every answer parse. The request is
OpenAI's `response_format: {"type": "json_schema", "json_schema": {name, schema, strict}}`, which
llama.cpp's `llama-server`, vLLM (guided decoding), OpenAI and Ollama's OpenAI-compatible endpoint
all accept. A server that does not know it answers 400 (or 422) naming `response_format` or
`json_schema`; that is remembered per base URL and model, as a refusal of `tools` is
(`text_protocol`), so the refusal costs one request per process, and the caller falls back to
reading the answer as text.
"""

from __future__ import annotations

import re
from typing import Any

# (base URL, model) pairs whose server refused `response_format` with a schema.
_REFUSED: set[tuple[str, str]] = set()

_REFUSES_SCHEMA = re.compile(
    r"response_format|json_schema|guided_json|structured output|grammar", re.IGNORECASE
)


def response_format(name: str, schema: dict[str, Any]) -> dict[str, Any]:
    """The request field, in OpenAI's form (`strict`: the server must keep to the schema)."""
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}


def refuses_schema(status: int, error_text: str) -> bool:
    """Whether a server's error refuses the schema (and not something else about the request)."""
    return status in (400, 404, 422, 501) and bool(_REFUSES_SCHEMA.search(error_text))


def refused(base_url: str, model: str) -> bool:
    return (base_url, model) in _REFUSED


def remember_refused(base_url: str, model: str) -> None:
    _REFUSED.add((base_url, model))


def forget_all() -> None:
    """Forgets every server that refused schemas (tests; an operator restarts the process instead)."""
    _REFUSED.clear()
