"""`FakeOpenAI`: a real chat-completions server on 127.0.0.1 for tests, scripted reply by reply.

It stands in for a live LLM (the one thing besides GitHub we may fake) at the HTTP layer, so the
client under test runs its real transport. Every request is checked against OpenAI's own description
of `CreateChatCompletionRequest` (tests/data/openai/chat_completions.json); an invalid request gets a
400 and makes the `with` block fail on exit. Reply builders produce bodies that validate against
`CreateChatCompletionResponse`.

    with FakeOpenAI() as llm:
        llm.script_tool_then_text("read_file", {"path": "README.md"}, "Done.")
        client = OpenAiCompatible(llm.url, "test-key", "fake-model")
        ...
        assert llm.requests[0]["model"] == "fake-model"

A request with `"stream": true` gets its reply as Server-Sent Events (`chat.completion.chunk`s in
chunked transfer encoding, tool calls in pieces, the usage last when `stream_options` asks), as
OpenAI streams, unless the server is made with `streams=False` (one that ignores `stream`). A reply
with `cut_after=N` stops after N events and closes the connection: a stream cut in the middle.

The same server stands in for each provider (tests/support/provider_servers.py): where its endpoint
is (`prefix`), which header carries the key, what a wrong key gets, and what it refuses are
parameters. It answers the model check `serve` and `action` make at start (`bot.beam.model_check`)
itself, as a working model would, and keeps those requests in `checks`, so a test scripts only the
run's own calls.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import socket
import threading
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

from bot.beam import model_check
from bot.beam.providers import KEY_VARS as PROVIDER_KEY_VARS
from bot.beam.providers import OLLAMA_HOST_VAR

SCHEMA_PATH = Path(__file__).resolve().parent.parent / "data" / "openai" / "chat_completions.json"
PREFIX = "/v1"
CHAT_PATH = PREFIX + "/chat/completions"
DEFAULT_MODEL = "fake-model"

_ids = itertools.count(1)


@functools.cache
def _document() -> dict[str, Any]:
    with SCHEMA_PATH.open(encoding="utf-8") as handle:
        document: dict[str, Any] = json.load(handle)
    return document


@functools.cache
def schema_validator(name: str) -> Draft202012Validator:
    """A validator for one schema of the cut description, its `$ref`s resolved inside the file."""
    schema = {"$ref": f"#/components/schemas/{name}", "components": _document()["components"]}
    return Draft202012Validator(schema)


def schema_problems(name: str, instance: Any) -> list[str]:
    """What is wrong with `instance` under schema `name`; empty when it is valid."""
    validator = schema_validator(name)
    errors = list(validator.iter_errors(instance))
    if not errors:
        return []
    best = best_match(errors)
    where = "/".join(str(part) for part in best.absolute_path) or "(root)"
    return [f"{name} at {where}: {best.message}"]


def without_model_env(environ: Mapping[str, str]) -> dict[str, str]:
    """`environ` less every variable that names a model server or its key (the seed's and each
    provider's own, and OLLAMA_HOST), so a developer's OPENAI_API_KEY never sends a test's process
    to a real API, nor their OLLAMA_HOST to their Ollama."""
    return {
        name: value
        for name, value in environ.items()
        if not name.startswith(("BEAM_", "GFS_BEAM_", "NVIDIA_"))
        and name not in (*PROVIDER_KEY_VARS, OLLAMA_HOST_VAR)
    }


# Reply builders: bodies as OpenAI's server writes them.


def text_message(text: str | None) -> dict[str, Any]:
    return {"role": "assistant", "content": text, "refusal": None}


def tool_call(name: str, args: Any, call_id: str | None = None) -> dict[str, Any]:
    """A tool call with `arguments` as the JSON string OpenAI sends."""
    return {
        "id": call_id or f"call_{next(_ids)}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }


def tool_calls_message(calls: Iterable[dict[str, Any]]) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "refusal": None, "tool_calls": list(calls)}


def usage(prompt_tokens: int = 10, completion_tokens: int = 5) -> dict[str, int]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def chat_response(
    message: dict[str, Any],
    *,
    model: str = DEFAULT_MODEL,
    usage: dict[str, Any] | None = None,
    finish_reason: str | None = None,
) -> dict[str, Any]:
    """A whole `chat.completion` object around one message."""
    if finish_reason is None:
        finish_reason = "tool_calls" if message.get("tool_calls") else "stop"
    body: dict[str, Any] = {
        "id": f"chatcmpl-{next(_ids)}",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason, "logprobs": None}],
    }
    if usage is not None:
        body["usage"] = usage
    return body


def error_body(
    message: str, *, type: str = "invalid_request_error", code: str | None = None, param: str | None = None
) -> dict[str, Any]:
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


@dataclass(frozen=True, slots=True)
class Reply:
    """One scripted answer. A `body` that is str or bytes is sent as is; anything else as JSON."""

    status: int = 200
    body: Any = None
    headers: Mapping[str, str] = field(default_factory=dict)
    delay: float = 0.0
    # Streamed only: the pause before each event, and the events sent before the connection is cut.
    chunk_delay: float = 0.0
    cut_after: int | None = None

    def encode(self) -> tuple[bytes, str]:
        if isinstance(self.body, bytes):
            return self.body, "application/octet-stream"
        if isinstance(self.body, str):
            return self.body.encode("utf-8"), "text/plain; charset=utf-8"
        return json.dumps(self.body).encode("utf-8"), "application/json"


@dataclass(frozen=True, slots=True)
class Received:
    """One request as the server saw it; `headers` keys are lower case, `json` is None if unparsable."""

    method: str
    path: str
    headers: dict[str, str]
    raw: bytes
    json: Any


def _pieces(text: str, size: int = 4) -> list[str]:
    """`text` in the small pieces a server streams (about a token each)."""
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def stream_events(body: dict[str, Any], *, include_usage: bool) -> list[dict[str, Any]]:
    """A `chat.completion` body as the `chat.completion.chunk`s OpenAI streams for it: the role, the
    content in pieces, each tool call's id and name then its arguments in pieces, the finish reason,
    and the usage in a last chunk without choices when asked."""
    head: dict[str, Any] = {k: body[k] for k in ("id", "created", "model") if k in body}
    choice = body["choices"][0]
    message = choice["message"]

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            **head,
            "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
        }

    events = [chunk({"role": "assistant", "content": ""})]
    for key in ("reasoning_content", "content"):
        if isinstance(message.get(key), str) and message[key]:
            events += [chunk({key: piece}) for piece in _pieces(message[key])]
    for index, call in enumerate(message.get("tool_calls") or []):
        function = call["function"]
        events.append(
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": index,
                            "id": call["id"],
                            "type": "function",
                            "function": {"name": function["name"], "arguments": ""},
                        }
                    ]
                }
            )
        )
        events += [
            chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
            for piece in _pieces(function["arguments"], 8)
        ]
    events.append(chunk({}, choice.get("finish_reason")))
    if include_usage and "usage" in body:
        events.append({**head, "object": "chat.completion.chunk", "choices": [], "usage": body["usage"]})
    return events


class _Server(ThreadingHTTPServer):
    # Join handler threads on close so nothing outlives the test (pytest turns strays into errors).
    daemon_threads = False
    block_on_close = True

    def __init__(self, port: int, fake: FakeOpenAI, host: str = "127.0.0.1") -> None:
        self.fake = fake
        super().__init__((host, port), _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away (a test's timeout) is expected; stay quiet."""


class _Handler(BaseHTTPRequestHandler):
    # TCP_NODELAY: the handler writes the head and the body in separate sends; with Nagle on, the
    # second waits for the client's delayed ACK (about 40 ms on Linux) before it leaves.
    disable_nagle_algorithm = True
    protocol_version = "HTTP/1.1"
    server: _Server

    def setup(self) -> None:
        super().setup()
        self.server.fake._track(self.connection, add=True)

    def finish(self) -> None:
        try:
            super().finish()
        except OSError:
            pass
        finally:
            self.server.fake._track(self.connection, add=False)

    def handle(self) -> None:
        try:
            super().handle()
        except OSError:
            self.close_connection = True

    def do_POST(self) -> None:
        self.server.fake._serve(self)

    do_GET = do_PUT = do_DELETE = do_PATCH = do_POST

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the default stderr access log."""


def _is_completion(body: Any) -> bool:
    return isinstance(body, dict) and body.get("object") == "chat.completion" and bool(body.get("choices"))


class FakeOpenAI:
    """A scripted `POST /v1/chat/completions` server on a random loopback port (or `port`).

    Replies are served from a FIFO queue. With the queue empty it answers `fallback_text` if given,
    else a 500 that is also recorded as a test error. Without `structured`, it is a server that has no
    structured output: a request with `response_format` `json_schema` gets the 400 such servers
    give, uses no scripted reply, and is kept in `refused_schemas` (not in `requests`), so a test
    scripts the model's answers and not the bot's one probe of the server. `api_key`, if given, must
    be the Bearer token (a wrong one gets OpenAI's 401, which is server behaviour, not a test error).
    """

    def __init__(
        self,
        *,
        port: int = 0,
        api_key: str | None = None,
        fallback_text: str | None = None,
        validate: bool = True,
        host: str = "127.0.0.1",
        structured: bool = False,
        refuse: Callable[[dict[str, Any]], Reply | None] | None = None,
        models_listing: Any = None,
        prefix: str = PREFIX,
        key_header: str = "authorization",
        unauthorised: Reply | None = None,
        route: Callable[[Received], Reply | None] | None = None,
        answers_checks: bool = True,
        streams: bool = True,
    ) -> None:
        self.host = host
        self.streams = streams  # False: a server that ignores `stream` and answers plain JSON
        # Where the endpoint is: `{prefix}/chat/completions` and `{prefix}/models`.
        self.prefix = prefix
        # The header the key goes in: `authorization` (as `Bearer KEY`), or Azure's `api-key` (as is).
        self.key_header = key_header
        self.unauthorised = unauthorised or Reply(
            401, error_body("Incorrect API key provided.", code="invalid_api_key")
        )
        # A provider's answer to the request line itself (Azure's deployment and api-version), asked
        # before anything else; the requests it answers are kept in `refused`.
        self.route = route
        # Whether the start-up model check is answered here (kept in `checks`), or scripted like any call.
        self.answers_checks = answers_checks
        self.checks: list[dict[str, Any]] = []
        self.structured = structured
        # A provider's own refusals (tests/support/provider_servers.py): a request it refuses is
        # answered with its error, uses no scripted reply, and is kept in `refused`, not `requests`.
        self.refuse = refuse
        self.refused: list[dict[str, Any]] = []
        # What `GET /v1/models` answers (as vLLM, llama.cpp and OpenRouter do); None: a 404.
        self.models_listing = models_listing
        self.refused_schemas: list[
            Any
        ] = []  # loopback, unless namespaced hosts must reach it (tests/support/netns.py)
        self.api_key = api_key
        self.fallback_text = fallback_text
        self.validate = validate
        self.received: list[Received] = []
        self.errors: list[str] = []
        self._replies: deque[Reply] = deque()
        self._responder: Callable[[Any], Any] | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._connections: set[socket.socket] = set()
        self._server = _Server(port, self, host)
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """The base URL a client is given (ends in /v1, no trailing slash)."""
        return f"http://{self.host}:{self.port}{self.prefix}"

    @property
    def origin(self) -> str:
        """The server's address without a path (an Azure resource's endpoint)."""
        return f"http://{self.host}:{self.port}"

    @property
    def requests(self) -> list[Any]:
        """The parsed JSON bodies received so far, in order."""
        with self._lock:
            return [item.json for item in self.received]

    # Scripting.

    def enqueue(
        self,
        body: Any = None,
        *,
        status: int = 200,
        headers: Mapping[str, str] | None = None,
        delay: float = 0.0,
        chunk_delay: float = 0.0,
        cut_after: int | None = None,
    ) -> None:
        with self._lock:
            self._replies.append(Reply(status, body, dict(headers or {}), delay, chunk_delay, cut_after))

    def reply_text(
        self, text: str, *, model: str = DEFAULT_MODEL, usage: dict[str, Any] | None = None
    ) -> None:
        self.enqueue(chat_response(text_message(text), model=model, usage=usage))

    def reply_tool_calls(
        self, *calls: tuple[str, Any], model: str = DEFAULT_MODEL, usage: dict[str, Any] | None = None
    ) -> None:
        """One reply asking for each `(name, args)` in turn."""
        message = tool_calls_message(tool_call(name, args) for name, args in calls)
        self.enqueue(chat_response(message, model=model, usage=usage))

    def script_tool_then_text(self, name: str, args: Any, text: str) -> None:
        """The usual two-round run: the model calls one tool, then answers."""
        self.reply_tool_calls((name, args))
        self.reply_text(text)

    def reply_error(self, status: int, message: str, *, headers: Mapping[str, str] | None = None) -> None:
        self.enqueue(
            error_body(message, type="server_error" if status >= 500 else "invalid_request_error"),
            status=status,
            headers=headers,
        )

    def respond_with(self, responder: Callable[[Any], Any] | None) -> None:
        """With the queue empty, answer each request with `responder(request JSON)` (a chat.completion
        body): a model whose next step depends on what it was sent. None turns it off."""
        with self._lock:
            self._responder = responder

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._replies)

    # Lifecycle.

    def start(self) -> FakeOpenAI:
        # A short poll interval so close() (which waits for the loop to notice) takes milliseconds.
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.02,), name="FakeOpenAI", daemon=True
        )
        self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join()
            self._thread = None
        with self._lock:
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
        self._server.server_close()

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
        if exc_type is None and self.errors:
            raise AssertionError("FakeOpenAI got bad requests:\n" + "\n".join(self.errors))

    # Serving (handler threads).

    def _track(self, connection: socket.socket, *, add: bool) -> None:
        with self._lock:
            if add:
                self._connections.add(connection)
            else:
                self._connections.discard(connection)

    def _serve(self, handler: _Handler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length else b""
        if len(raw) < length:
            # The client went away mid-body (the kill tests kill the bot at any point): there is no
            # request to judge or answer, as a real server would see only the closed connection.
            handler.close_connection = True
            return
        headers = {key.lower(): value for key, value in handler.headers.items()}
        if handler.command == "GET" and handler.path.split("?")[0] == f"{self.prefix}/models":
            found = self.models_listing is not None
            body = self.models_listing if found else error_body("Not found", type="not_found_error")
            self._write(handler, Reply(200 if found else 404, body))
            return
        try:
            parsed: Any = json.loads(raw)
        except ValueError:
            parsed = None
        received = Received(handler.command, handler.path, headers, raw, parsed)
        problems = self._problems(received)
        reply = self._next_reply(received, problems)
        if reply.delay and self._stop.wait(reply.delay):
            handler.close_connection = True
            return
        asked = parsed if isinstance(parsed, dict) else {}
        if (
            self.streams
            and asked.get("stream") is True
            and reply.status == 200
            and _is_completion(reply.body)
        ):
            options = asked.get("stream_options")
            include_usage = isinstance(options, dict) and options.get("include_usage") is True
            self._write_stream(handler, reply, stream_events(reply.body, include_usage=include_usage))
            return
        self._write(handler, reply)

    def _write_stream(self, handler: _Handler, reply: Reply, events: list[dict[str, Any]]) -> None:
        """The events as SSE in chunked transfer encoding; cut (no last chunk) after `cut_after`."""
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream; charset=utf-8")
        handler.send_header("Transfer-Encoding", "chunked")
        handler.send_header("Cache-Control", "no-cache")
        handler.end_headers()
        lines = [f"data: {json.dumps(event)}\n\n" for event in events] + ["data: [DONE]\n\n"]
        for sent, line in enumerate(lines):
            if reply.cut_after is not None and sent >= reply.cut_after:
                handler.wfile.flush()
                handler.close_connection = True
                with contextlib.suppress(OSError):
                    handler.connection.shutdown(socket.SHUT_RDWR)
                return
            if reply.chunk_delay and self._stop.wait(reply.chunk_delay):
                handler.close_connection = True
                return
            data = line.encode("utf-8")
            handler.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            handler.wfile.flush()
        handler.wfile.write(b"0\r\n\r\n")

    def _write(self, handler: _Handler, reply: Reply) -> None:
        payload, content_type = reply.encode()
        handler.send_response(reply.status)
        extra = {key.lower(): value for key, value in reply.headers.items()}
        handler.send_header("Content-Type", extra.pop("content-type", content_type))
        handler.send_header("Content-Length", str(len(payload)))
        for key, value in extra.items():
            handler.send_header(key, value)
        handler.end_headers()
        handler.wfile.write(payload)

    def _problems(self, received: Received) -> list[str]:
        if received.method != "POST" or received.path.split("?")[0] != f"{self.prefix}/chat/completions":
            return [f"unexpected {received.method} {received.path}"]
        problems = []
        if not received.headers.get("content-type", "").startswith("application/json"):
            problems.append(f"content-type is {received.headers.get('content-type')!r}")
        if self.key_header == "authorization" and not received.headers.get("authorization", "").startswith(
            "Bearer "
        ):
            problems.append("no Bearer authorization")
        elif not received.headers.get(self.key_header):
            problems.append(f"no {self.key_header} header")
        if received.json is None:
            problems.append("body is not JSON")
        elif self.validate:
            problems.extend(schema_problems("CreateChatCompletionRequest", received.json))
        return problems

    def _authorised(self, received: Received) -> bool:
        if self.api_key is None:
            return True
        given = received.headers.get(self.key_header)
        return given == (f"Bearer {self.api_key}" if self.key_header == "authorization" else self.api_key)

    def _next_reply(self, received: Received, problems: list[str]) -> Reply:
        with self._lock:
            routed = self.route(received) if self.route is not None else None
            if routed is not None:
                self.refused.append(received.json)
                return routed
            asked = received.json.get("response_format") if isinstance(received.json, dict) else None
            if not self.structured and isinstance(asked, dict) and asked.get("type") == "json_schema":
                self.refused_schemas.append(received.json)
                return Reply(400, error_body("response_format type json_schema is not supported"))
            authorised = self._authorised(received)
            if self.refuse is not None and authorised and not problems and isinstance(received.json, dict):
                refusal = self.refuse(received.json)
                if refusal is not None:
                    self.refused.append(received.json)
                    return refusal
            if self.answers_checks and authorised and not problems and is_model_check(received.json):
                self.checks.append(received.json)
                return Reply(200, check_answer(received.json))
            self.received.append(received)
            if problems:
                self.errors.extend(problems)
                return Reply(400, error_body("; ".join(problems)))
            if not authorised:
                return self.unauthorised
            if self._replies:
                return self._replies.popleft()
            responder = self._responder
        if responder is not None:
            return Reply(200, responder(received.json))
        with self._lock:
            if self.fallback_text is not None:
                return Reply(200, chat_response(text_message(self.fallback_text)))
            self.errors.append(f"no scripted reply left for request {len(self.received)}")
            return Reply(500, error_body("FakeOpenAI has no scripted reply left", type="server_error"))


def is_model_check(body: Any) -> bool:
    """Whether a request is one of the model check's (`bot.beam.model_check`): its fixed prompts."""
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list) or not body["messages"]:
        return False
    first = body["messages"][0]
    text = first.get("content") if isinstance(first, dict) else None
    return isinstance(text, str) and (
        text.startswith(model_check.ASK_TOOL[0]["content"]) or text == model_check.ASK_SCHEMA[0]["content"]
    )


def check_answer(body: dict[str, Any]) -> dict[str, Any]:
    """What a working model answers the check: the ping call (native when `tools` was sent, else as
    text), or the object the schema asks for."""
    model = str(body.get("model") or DEFAULT_MODEL)
    if body["messages"][0]["content"] == model_check.ASK_SCHEMA[0]["content"]:
        return chat_response(text_message(json.dumps({"ok": True})), model=model)
    if body.get("tools"):
        return chat_response(tool_calls_message([tool_call("ping", {"word": "pong"})]), model=model)
    call = json.dumps({"name": "ping", "arguments": {"word": "pong"}})
    return chat_response(text_message(f"<tool_call>{call}</tool_call>"), model=model)
