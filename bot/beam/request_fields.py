"""Request fields a server refused, and the body adapted to them (issue 42).

Servers differ in the fields they take. OpenAI's API refuses a field it does not know
(`Unrecognized request argument supplied: chat_template_kwargs`), and its reasoning models
(o-series, GPT-5) refuse `max_tokens` ("Use 'max_completion_tokens' instead"), `top_p`, and any
`temperature` but the default. Gemini's OpenAI-compatible endpoint refuses an unknown field too
(`Unknown name "chat_template_kwargs": Cannot find field.`), and pydantic-based servers say `Extra
inputs are not permitted`. A 400 (or 422) that names one field of the body as unknown or unsupported
makes the client drop that field, or rename it where the server says what to use instead
(`max_tokens` → `max_completion_tokens`), and try again. A refused temperature is dropped: the
server's own default is the only one such a model takes.

What was adapted is remembered per base URL and model for the life of the process, as a refusal of
`tools` (`text_protocol`) or `response_format` (`structured_output`) is, so the next request is sent
right the first time; each adaptation is logged once. `model`, `messages`, `stream`, `tools` and
`response_format` are never adapted here: a server without tools or schemas has its own fallbacks.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# Fields the body cannot do without, or whose refusal another module handles.
_KEPT = frozenset({"model", "messages", "stream", "tools", "response_format"})
# A refused field and what to send instead; a field not listed is dropped.
RENAMES: Mapping[str, str] = {"max_tokens": "max_completion_tokens"}
_STATUSES = (400, 422)

# How servers name the field they refuse. The name is group 1.
_REFUSALS = (
    # OpenAI and Azure OpenAI.
    re.compile(r"Unrecognized request arguments? supplied: ([A-Za-z_][\w]*)"),
    re.compile(r"Unsupported parameter: \\?['\"]([A-Za-z_]\w*)\\?['\"]"),
    re.compile(r"Unsupported value: \\?['\"]([A-Za-z_]\w*)\\?['\"] does not support"),
    # Gemini (Google's JSON mapping) at the top level of the body; a nested one says `at '...'`.
    re.compile(r"Unknown name \\*\"([A-Za-z_]\w*)\\*\": Cannot find field"),
    # pydantic (vLLM, LM Studio and other Python servers that forbid extras).
    re.compile(r"\"loc\":\[\"body\",\"([A-Za-z_]\w*)\"\][^}]{0,80}Extra inputs are not permitted"),
    re.compile(r"\b([A-Za-z_]\w*)\W{0,4}Extra inputs are not permitted"),
    # Plain wordings: "property 'x' is unsupported", "'x' is not supported with this model".
    re.compile(r"\\?['\"`]([A-Za-z_]\w*)\\?['\"`] is (?:not supported|unsupported|not allowed)"),
)


@dataclass(frozen=True)
class Adaptation:
    """One refused field: dropped (`rename` None) or sent under `rename`."""

    field: str
    rename: str | None

    def describe(self) -> str:
        if self.rename is not None:
            return f"{self.field} sent as {self.rename}"
        if self.field == "temperature":
            return "temperature left to the server's default"
        return f"{self.field} not sent"


# (base URL, model) -> the adaptations learned for it, in the order they were learned.
_ADAPTED: dict[tuple[str, str], list[Adaptation]] = {}


def refused_field(status: int, error_text: str, body: Mapping[str, Any]) -> Adaptation | None:
    """The adaptation a server's error asks for: a field of `body` it names as unknown or
    unsupported, which may be dropped or renamed; None for any other error."""
    if status not in _STATUSES:
        return None
    for pattern in _REFUSALS:
        for match in pattern.finditer(error_text):
            name = match.group(1)
            if name in body and name not in _KEPT:
                return Adaptation(name, RENAMES.get(name))
    return None


def adapted(base_url: str, model: str) -> list[Adaptation]:
    """What was learned for this server and model (a copy)."""
    return list(_ADAPTED.get((base_url, model), ()))


def remember(base_url: str, model: str, adaptation: Adaptation) -> bool:
    """Remembers an adaptation; False when it was known already."""
    known = _ADAPTED.setdefault((base_url, model), [])
    if adaptation in known:
        return False
    known.append(adaptation)
    return True


def apply(base_url: str, model: str, body: dict[str, Any]) -> dict[str, Any]:
    """`body` as this server and model take it: each refused field dropped or renamed in place
    (a renamed key keeps its position, so the body's order stays the original's)."""
    known = _ADAPTED.get((base_url, model))
    if not known:
        return body
    for adaptation in known:
        body = _adapt(body, adaptation)
    return body


def _adapt(body: dict[str, Any], adaptation: Adaptation) -> dict[str, Any]:
    if adaptation.field not in body:
        return body
    out: dict[str, Any] = {}
    for key, value in body.items():
        if key != adaptation.field:
            out[key] = value
        elif adaptation.rename is not None and adaptation.rename not in body:
            out[adaptation.rename] = value
    return out


def forget_all() -> None:
    """Forgets every adaptation (tests; an operator restarts the process instead)."""
    _ADAPTED.clear()
