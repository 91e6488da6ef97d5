"""A streamed chat completion (`"stream": true`), read back into the body a plain request gets.

A terminal shows the tokens a model has written so far while a call is in flight (issue 42); only a
streamed answer tells it. The server sends Server-Sent Events, each `data:` line one
`chat.completion.chunk` (a `delta` of the message: content, reasoning, or pieces of tool calls keyed
by `index`), then, with `stream_options: {"include_usage": true}`, a last chunk with `usage` and no
choices, then `data: [DONE]`. `Assembly` adds the deltas up to the `chat.completion` object a plain
request would have got, so the client reads both the same way and nothing after it changes.

`receive` sends one streamed request and reads its events as they come, telling a sink the count
(moved here from `openai_client.py`, which sends plain requests and retries both kinds). A stream
that ends before `[DONE]` or a finish reason was cut (a proxy's timeout, a server that died): it is
`Retryable`, the transport failure it is, and the client tries again. Servers that refuse
`stream` (a 400 naming it) or ignore it (a plain JSON answer) are remembered per base URL and model
for the life of the process, as a refusal of a field is (`request_fields`): their next calls are
sent plain.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from bot.beam.chat_replies import ERROR_BODY_LIMIT, MakeError, Retryable
from bot.beam.errors import BeamError

DONE = "[DONE]"
STREAM_OPTIONS = {"include_usage": True}
# A 400/422 about streaming itself: "stream is not supported", "Unrecognized request argument
# supplied: stream", "'stream' ... not allowed".
_REFUSES = re.compile(
    r"\bstream(?:ing|_options)?\b[^.]{0,60}\b(?:not supported|unsupported|not allowed)"
    r"|(?:not supported|unsupported|not allowed|unrecognized|unknown)[^.]{0,60}\bstream(?:ing)?\b",
    re.IGNORECASE,
)

# Told the tokens a streamed call has written so far (0 when a call starts).
StreamSink = Callable[[int], None]

_plain: set[tuple[str, str]] = set()


class StreamError(Exception):
    """The server's stream is unusable: cut before its end, or a `data:` line that is not JSON."""


def refuses_stream(status: int, error_text: str) -> bool:
    """Whether an error answer says the server does not stream (then the call is sent plain)."""
    return status in (400, 422) and bool(_REFUSES.search(error_text))


def plain(base_url: str, model: str) -> bool:
    """Whether this server and model refused or ignored `stream` before: send plain requests."""
    return (base_url, model) in _plain


def remember_plain(base_url: str, model: str) -> bool:
    """Remembers a server that does not stream; False when it was known already."""
    key = (base_url, model)
    if key in _plain:
        return False
    _plain.add(key)
    return True


def forget_all() -> None:
    """Tests start from a process that has seen no server."""
    _plain.clear()


def streamed(body: dict[str, Any]) -> dict[str, Any]:
    """`body` asking for a stream, with the usage at its end; the keys keep their order."""
    return {**body, "stream": True, "stream_options": dict(STREAM_OPTIONS)}


def event_data(line: str) -> str | None:
    """The payload of one SSE `data:` line; None for other lines (comments, `event:`, blanks)."""
    if not line.startswith("data:"):
        return None
    return line[5:].removeprefix(" ").rstrip("\r")


@dataclass
class _Call:
    id: str | None = None
    type: str = "function"
    name: str = ""
    arguments: str = ""


@dataclass
class Assembly:
    """The chunks of one streamed answer, added up. `tokens` counts the chunks that wrote something
    (servers send about one token a chunk) until the final usage gives the server's own count."""

    content: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    calls: dict[int, _Call] = field(default_factory=dict)
    refusal: list[str] = field(default_factory=list)
    model: str | None = None
    id: str | None = None
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    tokens: int = 0
    done: bool = False

    @property
    def ended(self) -> bool:
        """`[DONE]` came, or a finish reason did (some servers close the stream without `[DONE]`)."""
        return self.done or self.finish_reason is not None

    def add(self, payload: str) -> dict[str, Any] | None:
        """Adds one `data:` payload; returns the server's error object when the chunk is one."""
        if payload.strip() == DONE:
            self.done = True
            return None
        try:
            chunk = json.loads(payload)
        except ValueError as exc:
            raise StreamError(f"a stream event is not JSON: {exc}") from None
        if not isinstance(chunk, dict):
            raise StreamError("a stream event is not a JSON object")
        if "error" in chunk:  # an error sent inside the stream, after the 200 went out
            error = chunk["error"]
            return error if isinstance(error, dict) else {"message": str(error)}
        if isinstance(chunk.get("model"), str):
            self.model = chunk["model"]
        if isinstance(chunk.get("id"), str):
            self.id = chunk["id"]
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]
            completion = self.usage.get("completion_tokens")
            if isinstance(completion, int) and not isinstance(completion, bool):
                self.tokens = completion
        choices = chunk.get("choices")
        if isinstance(choices, list) and choices and isinstance(choices[0], dict):
            self._choice(choices[0])
        return None

    def _choice(self, choice: dict[str, Any]) -> None:
        if isinstance(choice.get("finish_reason"), str):
            self.finish_reason = choice["finish_reason"]
        delta = choice.get("delta")
        if not isinstance(delta, dict):
            return
        wrote = False
        for key, parts in (("content", self.content), ("refusal", self.refusal)):
            if isinstance(text := delta.get(key), str) and text:
                parts.append(text)
                wrote = True
        for key in ("reasoning_content", "reasoning"):
            if isinstance(text := delta.get(key), str) and text:
                self.reasoning.append(text)
                wrote = True
        pieces = delta.get("tool_calls")
        if isinstance(pieces, list):
            for position, piece in enumerate(pieces):
                if isinstance(piece, dict):
                    wrote = self._call_piece(position, piece) or wrote
        self.tokens += wrote

    def _call_piece(self, position: int, piece: dict[str, Any]) -> bool:
        index = piece.get("index")
        call = self.calls.setdefault(index if isinstance(index, int) else position, _Call())
        if isinstance(piece.get("id"), str) and piece["id"]:
            call.id = piece["id"]
        if isinstance(piece.get("type"), str):
            call.type = piece["type"]
        function = piece.get("function")
        if not isinstance(function, dict):
            return False
        if isinstance(function.get("name"), str):
            call.name += function["name"]
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            call.arguments += arguments
            return bool(arguments)
        if isinstance(arguments, dict):  # a server that sends the whole object at once
            call.arguments = json.dumps(arguments)
            return True
        return False

    def completion(self) -> dict[str, Any]:
        """The `chat.completion` object a plain request would have got."""
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self.content) or None}
        if self.refusal:
            message["refusal"] = "".join(self.refusal)
        if self.reasoning:
            message["reasoning_content"] = "".join(self.reasoning)
        if self.calls:
            message["tool_calls"] = [
                {
                    **({"id": call.id} if call.id else {}),
                    "type": call.type,
                    "function": {"name": call.name, "arguments": call.arguments},
                }
                for _, call in sorted(self.calls.items())
            ]
        body: dict[str, Any] = {
            "object": "chat.completion",
            "choices": [{"index": 0, "message": message, "finish_reason": self.finish_reason}],
        }
        if self.id is not None:
            body["id"] = self.id
        if self.model is not None:
            body["model"] = self.model
        if self.usage is not None:
            body["usage"] = self.usage
        return body


async def receive(
    http: httpx.AsyncClient,
    url: str,
    headers: dict[str, str],
    body: dict[str, Any],
    sink: StreamSink | None,
    error: MakeError,
) -> dict[str, Any] | httpx.Response:
    """One streamed request: the events added up as they come (the sink told the count) into the
    `chat.completion` object. An error status, or a server that answered with plain JSON (it
    ignores `stream`), comes back as the response, read, for the caller to read as a plain answer;
    events sent under another content type (some proxies relabel them) are read once they are all
    there. A cut stream, or an error sent inside it, is `Retryable`; a timeout is the caller's."""
    if sink is not None:
        sink(0)
    assembly = Assembly()
    async with http.stream("POST", url, json=body, headers=headers) as response:
        ok = 200 <= response.status_code < 300
        lines: AsyncIterator[str] = response.aiter_lines()
        if not ok or not response.headers.get("content-type", "").startswith("text/event-stream"):
            await response.aread()
            if not ok or not response.content.lstrip().startswith(b"data:"):
                return response
            lines = _each(response.text.splitlines())
        try:
            async for line in lines:
                payload = event_data(line)
                if payload is None:
                    continue
                sent_error = assembly.add(payload)
                if sent_error is not None:
                    detail = json.dumps(sent_error, separators=(",", ":"), ensure_ascii=False)
                    raise Retryable(error("BEM-084", f"llm stream error: {detail[:ERROR_BODY_LIMIT]}"))
                if sink is not None:
                    sink(assembly.tokens)
                if assembly.done:
                    break
        except httpx.TimeoutException:
            raise  # the whole call's timeout, as for a plain request
        except (httpx.TransportError, StreamError) as exc:
            raise Retryable(_cut(assembly, str(exc) or type(exc).__name__, error)) from None
    if not assembly.ended:
        raise Retryable(_cut(assembly, "the server closed it", error))
    return assembly.completion()


def _cut(assembly: Assembly, why: str, error: MakeError) -> BeamError:
    return error("BEM-082", f"llm stream cut before its end after {assembly.tokens} tokens ({why})")


async def _each(lines: list[str]) -> AsyncIterator[str]:
    for line in lines:
        yield line
