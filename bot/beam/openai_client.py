"""`OpenAiCompatible`: the chat-completions client, the one completion client that talks to a server.

This module builds the requests and sends them: the body, the retries within one timeout, the
fields and modes a server refused. What an answer means (a Completion or a coded error) is read by
`chat_replies`, and a streamed answer is received and added up by `streaming`; both are kept apart
so the same reading serves a plain and a streamed answer.

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
import os
import time
from collections.abc import Awaitable, Callable, Mapping
from types import TracebackType
from typing import Any

import anyio
import httpx

from bot.beam import chat_replies, providers, request_fields, streaming, structured_output, text_protocol
from bot.beam.chat_replies import Retryable, status_of
from bot.beam.completion import Completion, CompletionClientBase, UsageSink
from bot.beam.errors import BeamError
from bot.beam.model_env import DEFAULT_MAX_TOKENS, DEFAULT_TIMEOUT, read_model_env
from bot.beam.text_protocol import ToolsMode
from bot.beam.tools import ToolSpec
from bot.beam.types import AgentInput

log = logging.getLogger("beam.llm")

MIN_MAX_TOKENS = 16
# A review wants the likeliest reading of the code, not variety (issue 30); other calls keep the
# server's own default unless BEAM_MODEL_TEMPERATURE says otherwise.
REVIEW_TEMPERATURE = 0.2
REVIEW_AGENTS = frozenset({"review"})

Sleep = Callable[[float], Awaitable[None]]


def default_extra_body() -> dict[str, Any]:
    """Turns off "thinking" on chat templates that have it, as the original does by default."""
    return {"chat_template_kwargs": {"thinking": False}}


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
        self.stream_to: streaming.StreamSink | None = None

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
            except Retryable as failure:
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
            raise Retryable(self._error("BEM-082", f"llm request failed: {exc}")) from None
        except httpx.HTTPError as exc:
            raise self._error("BEM-082", f"llm request failed: {exc}") from None
        return chat_replies.read_response(response, offered, sent_tools, self._error)

    async def _attempt_streamed(
        self,
        url: str,
        headers: dict[str, str],
        body: dict[str, Any],
        offered: frozenset[str],
        sent_tools: bool,
    ) -> Completion:
        """One streamed request (`streaming.receive`), read as a plain answer is; a server that
        answered plain JSON ignores `stream`, and is sent plain requests from then on."""
        got = await streaming.receive(self._http(), url, headers, body, self.stream_to, self._error)
        if isinstance(got, dict):
            return chat_replies.read_completion(got, offered, self._error)
        if 200 <= got.status_code < 300:
            self._plain_from_now("ignored")
        return chat_replies.read_response(got, offered, sent_tools, self._error)

    def _error(self, code: str, detail: str) -> BeamError:
        """A BeamError whose text cannot carry the key, even when a server or httpx echoes it back."""
        if self._api_key:
            detail = detail.replace(self._api_key, "[redacted]")
        return BeamError(code, detail)
