"""What a chat-completions server's answer means: a `Completion`, or a `BeamError` with its code, and
whether another try may help (`Retryable`, with the wait a `Retry-After` asks for).

Kept apart from `openai_client.py`, which builds and sends the requests: the reading is the same for
a plain answer and for a streamed one added up (`streaming`), and it is where the codes are decided
(BEM-083 not JSON, BEM-084 an error status, BEM-085 no message, BEM-091 a call cut by `length`,
BEM-092 a context overflow, BEM-093 a refusal of tools). The status is read before the body, and
tool-call arguments may be an object (ARCHITECTURE.md section 5). Errors are made by the caller's
`MakeError`, so the client's key is redacted from whatever a server echoes back.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable
from datetime import UTC
from email.utils import parsedate_to_datetime
from typing import Any

import httpx

from bot.beam import text_protocol
from bot.beam.completion import Completion
from bot.beam.errors import BeamError
from bot.beam.tool_dialects import looks_like_call, read_message
from bot.beam.types import TokenUsage

log = logging.getLogger("beam.llm")

ERROR_BODY_LIMIT = 500

# The BeamError of a code and a detail; the client's redacts its API key from the detail.
MakeError = Callable[[str, str], BeamError]


class Retryable(Exception):
    """An attempt that failed in a way worth trying again; `error` is what to raise if we stop here."""

    def __init__(self, error: BeamError, retry_after: float | None = None) -> None:
        super().__init__(str(error))
        self.error = error
        self.retry_after = retry_after


def retry_after_seconds(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from a `Retry-After` header, given as seconds or as an HTTP date."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:  # "-0000" or no zone: HTTP dates are always GMT
            when = when.replace(tzinfo=UTC)
        current = time.time() if now is None else now
        return max(0.0, when.timestamp() - current)
    if not math.isfinite(seconds):
        return None
    return max(0.0, seconds)


def status_of(detail: str) -> int:
    """The HTTP status in a BEM-084 detail (`llm http 400 Bad Request: ...`), 0 when there is none."""
    parts = detail.split(" ", 3)
    return int(parts[2]) if len(parts) > 2 and parts[:2] == ["llm", "http"] and parts[2].isdigit() else 0


def read_response(
    response: httpx.Response, offered: frozenset[str], sent_tools: bool, error: MakeError
) -> Completion:
    """A plain answer: its status first (an error, retryable for 429 and 5xx), then its JSON body."""
    status = response.status_code
    if not 200 <= status < 300:
        detail = status_detail(response)
        if status in (400, 404, 413, 422, 501) and text_protocol.context_overflow(detail):
            raise error("BEM-092", detail)
        if sent_tools and status in (400, 404, 422, 500, 501) and text_protocol.refuses_tools(detail):
            raise error("BEM-093", detail)
        failed = error("BEM-084", detail)
        if status == 429 or status >= 500:
            raise Retryable(failed, retry_after_seconds(response.headers.get("retry-after")))
        raise failed
    try:
        data = json.loads(response.content)
    except (ValueError, UnicodeDecodeError) as exc:
        raise error("BEM-083", f"llm response is not JSON: {exc}") from None
    return read_completion(data, offered, error)


def read_completion(data: Any, offered: frozenset[str], error: MakeError) -> Completion:
    """A `chat.completion` object (a plain answer's body, or a stream's added up) as a Completion."""
    message = _first_message(data)
    if message is None:
        raise error("BEM-085", "llm response has no choices[0].message")
    usage = _usage(data.get("usage"))
    model = data.get("model") if isinstance(data.get("model"), str) else None
    reading = read_message(message, offered)
    if reading.reasoning:
        log.debug("llm reasoning (kept out of the answer): %d characters", len(reading.reasoning))
    finish = _finish_reason(data)
    if reading.calls:
        return Completion(
            tool_calls=reading.calls,
            usage=usage,
            model=model,
            problem=reading.problem,
            finish_reason=finish,
        )
    if finish == "length" and (reading.problem is not None or looks_like_call(reading.text)):
        raise error("BEM-091", reading.problem or "the answer ends inside a tool call")
    return Completion(
        text=reading.text, usage=usage, model=model, problem=reading.problem, finish_reason=finish
    )


def status_detail(response: httpx.Response) -> str:
    """`llm http <status> <reason>: <body>`, the body's `error` object when it has one, cut short."""
    code = response.status_code
    reason = httpx.codes.get_reason_phrase(code) or "<unknown status code>"
    try:
        payload = json.loads(response.content)
    except (ValueError, UnicodeDecodeError):
        text = response.content.decode("utf-8", errors="replace")
    else:
        if isinstance(payload, dict) and "error" in payload:
            payload = payload["error"]
        text = json.dumps(payload, separators=(",", ":"), ensure_ascii=False)
    if len(text) > ERROR_BODY_LIMIT:
        text = text[:ERROR_BODY_LIMIT] + "..."
    return f"llm http {code} {reason}: {text}"


def _first_message(data: Any) -> dict[str, Any] | None:
    if not isinstance(data, dict):
        return None
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return None
    message = choices[0].get("message")
    return message if isinstance(message, dict) else None


def _usage(value: Any) -> TokenUsage | None:
    if not isinstance(value, dict):
        return None

    def count(name: str) -> int:
        number = value.get(name)
        return number if isinstance(number, int) and not isinstance(number, bool) else 0

    prompt, completion = count("prompt_tokens"), count("completion_tokens")
    total = count("total_tokens") if "total_tokens" in value else prompt + completion
    return TokenUsage(prompt_tokens=prompt, completion_tokens=completion, total_tokens=total)


def _finish_reason(data: dict[str, Any]) -> str | None:
    choice = data["choices"][0]
    reason = choice.get("finish_reason")
    return reason if isinstance(reason, str) else None
