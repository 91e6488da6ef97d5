"""Structured output: asking the server for an answer that matches a JSON schema (issue 30).

A small self-hosted model rarely calls `review_change` and often writes findings that cannot be
parsed; a server that constrains decoding to a schema makes every answer parse. The request is
OpenAI's `response_format: {"type": "json_schema", "json_schema": {name, schema, strict}}`, which
llama.cpp's `llama-server`, vLLM (guided decoding), OpenAI and Ollama's OpenAI-compatible endpoint
all accept. A server that does not know it answers 400 (or 422) naming `response_format` or
`json_schema`; that is remembered per base URL and model, as a refusal of `tools` is
(`text_protocol`), so the refusal costs one request per process, and the caller falls back to
reading the answer as text.

Some servers take the field and answer as if it were not there (issue 41): the answer is prose, or
JSON of another shape. Such an answer does not fit the schema (`fits`), and that too is remembered
for the base URL and model: a verification question answered that way could not be read, and each
finding it asked about was dropped as one the model could not back.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

# (base URL, model) pairs whose server refused `response_format` with a schema.
_REFUSED: set[tuple[str, str]] = set()
# (base URL, model) pairs whose server took it and answered without it (issue 41).
_IGNORED: set[tuple[str, str]] = set()

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


def ignored(base_url: str, model: str) -> bool:
    return (base_url, model) in _IGNORED


def remember_ignored(base_url: str, model: str) -> None:
    _IGNORED.add((base_url, model))


def asks(base_url: str, model: str) -> bool:
    """Whether this server and model are still asked for a schema: neither refused nor ignored it."""
    return not refused(base_url, model) and not ignored(base_url, model)


_TYPES: Mapping[str, Any] = {
    "object": dict,
    "array": list,
    "string": str,
    "boolean": bool,
    "null": type(None),
    "integer": int,
    "number": (int, float),
}


def _is(value: Any, name: str) -> bool:
    if name in ("integer", "number") and isinstance(value, bool):
        return False
    kind = _TYPES.get(name)
    return kind is None or isinstance(value, kind)


def fits(value: Any, schema: Mapping[str, Any]) -> bool:
    """Whether `value` has the schema's shape: its types, required keys (one that may be null may be
    missing) and items, recursively, and one of `anyOf`'s. Enums and lengths are left to the caller's
    checks of the content: an answer of the right shape is an answer to the schema, and one of
    another shape (or prose) is not."""
    if "anyOf" in schema:
        return any(fits(value, option) for option in schema["anyOf"])
    types = schema.get("type")
    names = [types] if isinstance(types, str) else list(types or [])
    if names and not any(_is(value, name) for name in names):
        return False
    if isinstance(value, dict):
        properties = schema.get("properties") or {}
        missing = [key for key in schema.get("required") or () if key not in value]
        if any(not fits(None, properties.get(key) or {"type": "object"}) for key in missing):
            return False  # a key that may be null may be left out: it says the same
        return all(fits(value[key], sub) for key, sub in properties.items() if key in value)
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return all(fits(item, schema["items"]) for item in value)
    return True


def forget_all() -> None:
    """Forgets every server that refused schemas (tests; an operator restarts the process instead)."""
    _REFUSED.clear()
    _IGNORED.clear()
