"""`OpenAiCompatible`: the chat-completions client, the one completion client that talks to a server.

The request body, the env variables and the reply parsing are Riverbeam's (riverbeam-reference.md
section 4.1). Where we do better (ARCHITECTURE.md section 5): the HTTP status is read before the body,
tool-call arguments may be an object, transient failures are retried within the timeout, and the
server's `usage` and `model` are reported. The API key never leaves its header (`Authorization`,
or Azure's `api-key`: `providers.endpoint`).

Issue 20: replies in every common dialect are read by `tool_dialects`; `BEAM_MODEL_TOOLS` and the
fallback for servers that refuse `tools` are `text_protocol`'s; a call cut by `length` is BEM-091,
a context overflow BEM-092, a refusal of tools under `native` BEM-093.

Issue 30: the temperature is `BEAM_MODEL_TEMPERATURE` when set; unset, a review's calls (agent
`review`) go at `REVIEW_TEMPERATURE` and every other call leaves it to the server (the original sent
1.0 always, and a small model reviewing at 1.0 rambles). `complete_structured` asks for an answer
that matches a JSON schema, where the server can (`structured_output`).

Issue 42: a 400 that names a field of the request as unknown or unsupported (OpenAI refuses the
seed's `chat_template_kwargs`; its reasoning models `max_tokens`, `top_p` and a temperature of 0.2)
makes the client drop or rename that field and send again, remembered per base URL and model
(`request_fields`). `from_env` sends the extra body `BEAM_MODEL_EXTRA_BODY` names, else the seed's
default where the endpoint is not a known provider that refuses it (`providers`).

Issue 42: a client given a `stream_to` sink (a terminal's live line) asks for a streamed answer
(`"stream": true`) and tells the sink how many tokens the call has written so far; `streaming` reads
the events back into the body a plain request gets, so the `Completion` is the same. A stream cut
before its end is BEM-082 and retried like a dropped connection; a server that refuses or ignores
`stream` gets plain requests from then on.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from datetime import UTC
from email.utils import parsedate_to_datetime
from types import TracebackType
from typing import Any

import anyio
import httpx

from bot.beam import providers, request_fields, streaming, structured_output, text_protocol
from bot.beam.completion import Completion, CompletionClientBase, UsageSink
from bot.beam.errors import BeamError
from bot.beam.model_env import DEFAULT_MAX_TOKENS, DEFAULT_TIMEOUT, read_model_env
from bot.beam.text_protocol import ToolsMode
from bot.beam.tool_dialects import looks_like_call, read_message
from bot.beam.tools import ToolSpec
from bot.beam.types import AgentInput, TokenUsage

log = logging.getLogger("beam.llm")

MIN_MAX_TOKENS = 16
ERROR_BODY_LIMIT = 500
# A review wants the likeliest reading of the code, not variety (issue 30); other calls keep the
# server's own default unless BEAM_MODEL_TEMPERATURE says otherwise.
REVIEW_TEMPERATURE = 0.2
REVIEW_AGENTS = frozenset({"review"})

Sleep = Callable[[float], Awaitable[None]]
# Told the tokens a streamed call has written so far (0 when a call starts).
StreamSink = Callable[[int], None]


def default_extra_body() -> dict[str, Any]:
    """Turns off "thinking" on chat templates that have it, as the original does by default."""
    return {"chat_template_kwargs": {"thinking": False}}


class _Retryable(Exception):
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


class OpenAiCompatible(CompletionClientBase):
    """Talks to any OpenAI-compatible `POST {base_url}/chat/completions` endpoint.

    `timeout` bounds a whole `complete` call, retries and their waits included, as the original's
    60 s total timeout bounds its single request. `sleep` is there so tests can record the waits
    instead of waiting.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str,
        model: str,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        max_retries: int = 2,
        backoff: float = 0.5,
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Sleep | None = None,
        tools_mode: ToolsMode = "auto",
        temperature: float | None = None,
        structured: bool = True,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.temperature = temperature  # None: REVIEW_TEMPERATURE for reviews, the server's otherwise
        self.model = model
        self.structured = structured  # False: never ask for structured output (BEAM_MODEL_STRUCTURED=off)
        self.tools_mode: ToolsMode = tools_mode
        self.max_tokens = DEFAULT_MAX_TOKENS
        self.extra_body: Any = default_extra_body()
        self.timeout = timeout
        self.max_retries = max(0, max_retries)
        self.backoff = max(0.0, backoff)
        self._api_key = api_key
        self._transport = transport
        self._sleep: Sleep = sleep or anyio.sleep
        self._client: httpx.AsyncClient | None = None
        # Set by a caller that shows progress (the terminal): then answers are streamed.
        self.stream_to: StreamSink | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> OpenAiCompatible | None:
        """The client the environment describes, or None without a key (an empty BEAM_API_KEY included)."""
        said = read_model_env(os.environ if env is None else env)
        if said is None:
            return None
        client = cls(
            said.base_url,
            said.api_key,
            said.model,
            tools_mode=said.tools_mode,
            timeout=said.timeout,
            temperature=said.temperature,
            structured=said.structured,
        )
        if said.extra_body is not None:
            client.with_extra_body(said.extra_body)
        elif not providers.takes_extra_body(said.base_url):
            client.with_extra_body({})  # the seed's default is a field these providers refuse
        return client.with_max_tokens(said.max_tokens)

    def with_max_tokens(self, n: int) -> OpenAiCompatible:
        self.max_tokens = max(n, MIN_MAX_TOKENS)
        return self

    def with_extra_body(self, value: Any) -> OpenAiCompatible:
        """Replaces the extra body (the default included); it is not merged."""
        self.extra_body = value
        return self

    def __repr__(self) -> str:
        return f"OpenAiCompatible(base_url={self.base_url!r}, model={self.model!r})"

    @property
    def uses_text_tools(self) -> bool:
        """Whether tools go into the prompt: `text`, or `auto` once this server refused them."""
        if self.tools_mode == "text":
            return True
        return self.tools_mode == "auto" and text_protocol.refused(self.base_url, self.model)

    async def __aenter__(self) -> OpenAiCompatible:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    def _http(self) -> httpx.AsyncClient:
        # Created on first use so that building a client (from_env at start-up) opens nothing.
        if self._client is None:
            self._client = httpx.AsyncClient(
                transport=self._transport, timeout=httpx.Timeout(self.timeout), follow_redirects=False
            )
        return self._client

    def temperature_for(self, agent_name: str | None) -> float | None:
        """The temperature of a call for this agent: the setting, else the review default for a
        review, else None (not sent: the server's own)."""
        if self.temperature is not None:
            return self.temperature
        return REVIEW_TEMPERATURE if agent_name in REVIEW_AGENTS else None

    def request_body(
        self, messages: list[dict[str, Any]], tools: list[ToolSpec], *, temperature: float | None = None
    ) -> dict[str, Any]:
        """The JSON body, keys in the original's order; an extra key keeps the position it overrides.
        `temperature` (else the client's) is left out when neither is set: the server's default."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": temperature if temperature is not None else self.temperature,
            "top_p": 0.95,
            "max_tokens": self.max_tokens,
            "stream": False,
        }
        if isinstance(self.extra_body, dict):
            for key, value in self.extra_body.items():
                body[key] = value
        if body["temperature"] is None:
            del body["temperature"]
        if tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": spec.name,
                        "description": spec.description,
                        "parameters": spec.parameters,
                    },
                }
                for spec in tools
            ]
        return body

    async def complete(self, messages: list[dict[str, Any]], tools: list[ToolSpec]) -> Completion:
        return await self._complete(messages, tools, self.temperature)

    async def complete_for(
        self, input: AgentInput, messages: list[dict[str, Any]], tools: list[ToolSpec]
    ) -> Completion:
        """As `complete`, at the temperature of the agent asking (a review's is low)."""
        return await self._complete(messages, tools, self.temperature_for(input.agent_name))

    def structured_ok(self) -> bool:
        """False when `BEAM_MODEL_STRUCTURED=off`, or once this server refused a schema or answered
        without one (issue 41)."""
        return self.structured and structured_output.asks(self.base_url, self.model)

    async def complete_structured(
        self,
        messages: list[dict[str, Any]],
        schema: dict[str, Any],
        *,
        name: str = "review",
        on_usage: UsageSink | None = None,
    ) -> Any | None:
        """An answer that matches `schema`, parsed, where the server can constrain it; None when it
        cannot (refused once, then not asked again for this base URL and model), when the answer was
        cut by `max_tokens` (a cut object is no answer), or when it does not fit the schema: the
        server took the field and ignored it (issue 41), which is remembered as a refusal is. The
        caller then asks as before. Sent at the review temperature: structured answers are the
        review's findings. `on_usage` gets the tokens of the call (a usage meter), whatever it returns."""
        if not self.structured_ok():
            return None
        body = self.request_body(messages, [], temperature=self.temperature_for("review"))
        body["response_format"] = structured_output.response_format(name, schema)
        try:
            completion = await self._send(body, frozenset())
        except BeamError as error:
            detail = error.detail or ""
            if error.code != "BEM-084" or not structured_output.refuses_schema(status_of(detail), detail):
                raise
            log.info(  # a server without structured output is usual, not a fault
                "%s at %s refused response_format json_schema; reading answers as text from now on",
                self.model,
                self.base_url,
            )
            structured_output.remember_refused(self.base_url, self.model)
            return None
        if on_usage is not None and completion.usage is not None:
            on_usage(completion.usage)  # a cut or unusable answer cost tokens too
        if completion.finish_reason == "length" or not completion.text:
            return None
        try:
            value = json.loads(completion.text)
        except ValueError:
            pass
        else:
            if structured_output.fits(value, schema):
                return value
        log.warning(  # once per server and model: from now on no schema is asked of it
            "%s at %s took response_format json_schema but answered without it; reading answers "
            "as text from now on",
            self.model,
            self.base_url,
        )
        structured_output.remember_ignored(self.base_url, self.model)
        return None

    async def _complete(
        self, messages: list[dict[str, Any]], tools: list[ToolSpec], temperature: float | None
    ) -> Completion:
        offered = frozenset(spec.name for spec in tools)
        if tools and self.uses_text_tools:
            return await self._send(self._text_body(messages, tools, temperature), offered)
        try:
            return await self._send(self.request_body(messages, tools, temperature=temperature), offered)
        except BeamError as error:
            if error.code != "BEM-093" or self.tools_mode != "auto":
                raise
        log.warning(
            "%s at %s refused tools; describing them in the prompt from now on (BEAM_MODEL_TOOLS=auto)",
            self.model,
            self.base_url,
        )
        text_protocol.remember_refused(self.base_url, self.model)
        return await self._send(self._text_body(messages, tools, temperature), offered)

    def _text_body(
        self, messages: list[dict[str, Any]], tools: list[ToolSpec], temperature: float | None
    ) -> dict[str, Any]:
        return self.request_body(text_protocol.as_text_messages(messages, tools), [], temperature=temperature)

    def adaptations(self) -> list[request_fields.Adaptation]:
        """The fields this server and model refused, and what is sent instead (`request_fields`)."""
        return request_fields.adapted(self.base_url, self.model)

    def streams(self) -> bool:
        """Whether calls are streamed: someone listens, and this server did not refuse or ignore it."""
        return self.stream_to is not None and not streaming.plain(self.base_url, self.model)

    async def _send(self, body: dict[str, Any], offered: frozenset[str]) -> Completion:
        """As `_send_adapted`, streamed where the client `streams()`; a server that refuses the
        stream is remembered and the call sent again plain."""
        if not self.streams():
            return await self._send_adapted(body, offered)
        try:
            return await self._send_adapted(streaming.streamed(body), offered)
        except BeamError as error:
            detail = error.detail or ""
            if error.code != "BEM-084" or not streaming.refuses_stream(status_of(detail), detail):
                raise
        self._plain_from_now("refused")
        return await self._send_adapted(body, offered)

    def _plain_from_now(self, how: str) -> None:
        if streaming.remember_plain(self.base_url, self.model):
            log.info("%s at %s %s stream; sending plain requests from now on", self.model, self.base_url, how)

    async def _send_adapted(self, body: dict[str, Any], offered: frozenset[str]) -> Completion:
        """One request as this server takes it: each field it refused before is left out or renamed,
        and a field it refuses now is too, before one more try. Every try takes a field out of the
        body, so there are at most as many as it has fields; all of them share one timeout."""
        deadline = time.monotonic() + self.timeout
        for _ in range(len(body)):
            sent = request_fields.apply(self.base_url, self.model, body)
            try:
                return await self._send_retrying(sent, offered, deadline)
            except BeamError as error:
                detail = error.detail or ""
                adaptation = (
                    request_fields.refused_field(status_of(detail), detail, sent)
                    if error.code == "BEM-084"
                    else None
                )
                if adaptation is None:
                    raise
            # A concurrent request may have learned it first: then it was logged there.
            if request_fields.remember(self.base_url, self.model, adaptation):
                log.warning(  # once per field, server and model: the next requests are sent adapted
                    "%s at %s refused %s; %s from now on",
                    self.model,
                    self.base_url,
                    adaptation.field,
                    adaptation.describe(),
                )
        return await self._send_retrying(
            request_fields.apply(self.base_url, self.model, body), offered, deadline
        )

    async def _send_retrying(
        self, body: dict[str, Any], offered: frozenset[str], deadline: float
    ) -> Completion:
        """One request with its retries until `deadline`, read against the tools offered."""
        attempt = 0
        while True:
            try:
                return await self._attempt(body, deadline, offered)
            except _Retryable as failure:
                if attempt >= self.max_retries:
                    raise failure.error from None
                delay = failure.retry_after
                if delay is None:
                    delay = self.backoff * (2**attempt)
                if time.monotonic() + delay >= deadline:
                    log.warning("llm retry skipped: waiting %.2f s would exceed the timeout", delay)
                    raise failure.error from None
                attempt += 1
                log.warning(
                    "llm request failed (%s); retry %d of %d in %.2f s",
                    failure.error.detail,
                    attempt,
                    self.max_retries,
                    delay,
                )
                await self._sleep(delay)

    async def _attempt(self, body: dict[str, Any], deadline: float, offered: frozenset[str]) -> Completion:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise self._error("BEM-082", f"llm request timed out after {self.timeout:g} s")
        sent_tools = bool(body.get("tools"))
        try:
            url, headers = providers.endpoint(self.base_url, self._api_key, "chat/completions")
            with anyio.fail_after(remaining):
                if body.get("stream") is True:
                    return await self._attempt_streamed(url, headers, body, offered, sent_tools)
                response = await self._http().post(url, json=body, headers=headers)
        except (TimeoutError, httpx.TimeoutException):
            raise self._error("BEM-082", f"llm request timed out after {self.timeout:g} s") from None
        except httpx.ConnectError as exc:
            raise _Retryable(self._error("BEM-082", f"llm request failed: {exc}")) from None
        except httpx.HTTPError as exc:
            raise self._error("BEM-082", f"llm request failed: {exc}") from None
        return self._parse(response, offered, sent_tools)

    async def _attempt_streamed(
        self,
        url: str,
        headers: dict[str, str],
        body: dict[str, Any],
        offered: frozenset[str],
        sent_tools: bool,
    ) -> Completion:
        """One streamed request: the events added up as they come (the sink told the count), then
        read as a plain answer is. An error status, or a server that answered with plain JSON (it
        ignores `stream`), is read as a plain answer too; events sent under another content type
        (some proxies relabel them) are read once they are all there."""
        sink = self.stream_to
        if sink is not None:
            sink(0)
        assembly = streaming.Assembly()
        async with self._http().stream("POST", url, json=body, headers=headers) as response:
            ok = 200 <= response.status_code < 300
            lines: AsyncIterator[str] = response.aiter_lines()
            if not ok or not response.headers.get("content-type", "").startswith("text/event-stream"):
                await response.aread()
                if not ok or not response.content.lstrip().startswith(b"data:"):
                    if ok:
                        self._plain_from_now("ignored")
                    return self._parse(response, offered, sent_tools)
                lines = _each(response.text.splitlines())
            try:
                async for line in lines:
                    payload = streaming.event_data(line)
                    if payload is None:
                        continue
                    error = assembly.add(payload)
                    if error is not None:
                        detail = json.dumps(error, separators=(",", ":"), ensure_ascii=False)
                        raise _Retryable(
                            self._error("BEM-084", f"llm stream error: {detail[:ERROR_BODY_LIMIT]}")
                        )
                    if sink is not None:
                        sink(assembly.tokens)
                    if assembly.done:
                        break
            except httpx.TimeoutException:
                raise  # the whole call's timeout, as for a plain request
            except (httpx.TransportError, streaming.StreamError) as exc:
                raise _Retryable(self._cut(assembly, str(exc) or type(exc).__name__)) from None
        if not assembly.ended:
            raise _Retryable(self._cut(assembly, "the server closed it"))
        return self._read(assembly.completion(), offered)

    def _cut(self, assembly: streaming.Assembly, why: str) -> BeamError:
        return self._error("BEM-082", f"llm stream cut before its end after {assembly.tokens} tokens ({why})")

    def _parse(self, response: httpx.Response, offered: frozenset[str], sent_tools: bool) -> Completion:
        status = response.status_code
        if not 200 <= status < 300:
            detail = self._status_detail(response)
            if status in (400, 404, 413, 422, 501) and text_protocol.context_overflow(detail):
                raise self._error("BEM-092", detail)
            if sent_tools and status in (400, 404, 422, 500, 501) and text_protocol.refuses_tools(detail):
                raise self._error("BEM-093", detail)
            error = self._error("BEM-084", detail)
            if status == 429 or status >= 500:
                raise _Retryable(error, retry_after_seconds(response.headers.get("retry-after")))
            raise error
        try:
            data = json.loads(response.content)
        except (ValueError, UnicodeDecodeError) as exc:
            raise self._error("BEM-083", f"llm response is not JSON: {exc}") from None
        return self._read(data, offered)

    def _read(self, data: Any, offered: frozenset[str]) -> Completion:
        """A `chat.completion` object (a plain answer's body, or a stream's added up) as a Completion."""
        message = _first_message(data)
        if message is None:
            raise self._error("BEM-085", "llm response has no choices[0].message")
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
            raise self._error("BEM-091", reading.problem or "the answer ends inside a tool call")
        return Completion(
            text=reading.text, usage=usage, model=model, problem=reading.problem, finish_reason=finish
        )

    def _status_detail(self, response: httpx.Response) -> str:
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

    def _error(self, code: str, detail: str) -> BeamError:
        """A BeamError whose text cannot carry the key, even when a server or httpx echoes it back."""
        if self._api_key:
            detail = detail.replace(self._api_key, "[redacted]")
        return BeamError(code, detail)


async def _each(lines: list[str]) -> AsyncIterator[str]:
    for line in lines:
        yield line


def status_of(detail: str) -> int:
    """The HTTP status in a BEM-084 detail (`llm http 400 Bad Request: ...`), 0 when there is none."""
    parts = detail.split(" ", 3)
    return int(parts[2]) if len(parts) > 2 and parts[:2] == ["llm", "http"] and parts[2].isdigit() else 0


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
