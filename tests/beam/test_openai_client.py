"""Tests of `OpenAiCompatible` against `FakeOpenAI`, a real loopback server checking OpenAI's schema."""

from __future__ import annotations

import json
import logging
import socket
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import httpx
import pytest

from bot.beam.completion import Completion
from bot.beam.errors import BeamError
from bot.beam.openai_client import OpenAiCompatible
from bot.beam.tools import ToolSpec, json_params
from tests.support.openai_server import (
    FakeOpenAI,
    chat_response,
    error_body,
    schema_problems,
    text_message,
    tool_call,
    tool_calls_message,
    usage,
)

pytestmark = pytest.mark.anyio

KEY = "sk-test-5ecret-key-0123456789"
MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": "You are a reviewer."},
    {"role": "user", "content": "Hi"},
]
HTML_502 = "<html><head><title>502 Bad Gateway</title></head><body><h1>Bad Gateway</h1></body></html>"


class Sleeps:
    """Records the client's waits instead of waiting."""

    def __init__(self) -> None:
        self.calls: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)


def make(llm: FakeOpenAI, sleeps: Sleeps | None = None, **kwargs: Any) -> OpenAiCompatible:
    return OpenAiCompatible(llm.url, KEY, "test-model", sleep=sleeps or Sleeps(), **kwargs)


async def complete_one(llm: FakeOpenAI, tools: list[ToolSpec] | None = None, **kwargs: Any) -> Completion:
    async with make(llm, **kwargs) as client:
        return await client.complete(MESSAGES, tools or [])


async def error_of(llm: FakeOpenAI, **kwargs: Any) -> BeamError:
    with pytest.raises(BeamError) as caught:
        await complete_one(llm, **kwargs)
    return caught.value


READ_FILE = ToolSpec("read_file", "Read a file.", False, json_params({"path": {"type": "string"}}, ["path"]))
GIT_PUSH = ToolSpec("git_push", "Push the branch.", True, json_params())
LIST_TREE = ToolSpec("list_tree", "List the tree.", False, json_params())


# The request.


async def test_request_body_order_values_and_tools() -> None:
    with FakeOpenAI() as llm:
        llm.reply_text("ok")
        await complete_one(llm, [READ_FILE, GIT_PUSH])
    body = llm.requests[0]
    assert list(body) == [
        "model", "messages", "top_p", "max_tokens", "stream", "chat_template_kwargs", "tools",
    ]  # fmt: skip  # no temperature unless one is set: the server's own (issue 30)
    assert body["model"] == "test-model"
    assert body["messages"] == MESSAGES
    assert (body["top_p"], body["max_tokens"], body["stream"]) == (
        0.95,
        4096,
        False,
    )
    assert body["chat_template_kwargs"] == {"thinking": False}
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "read_file",
                "description": "Read a file.",
                "parameters": {
                    "type": "object",
                    "properties": {"path": {"type": "string"}},
                    "required": ["path"],
                },
            },
        },
        {
            "type": "function",
            "function": {
                "name": "git_push",
                "description": "Push the branch.",
                "parameters": {"type": "object", "properties": {}, "required": []},
            },
        },
    ]
    raw = llm.received[0].raw
    assert b"confirm_required" not in raw
    assert b"tool_choice" not in raw


async def test_extra_body_replaces_default_and_overrides_in_place() -> None:
    with FakeOpenAI() as llm:
        llm.reply_text("ok")
        llm.reply_text("ok")
        async with make(llm) as client:
            assert client.with_extra_body({"top_k": 40, "temperature": 0.2}) is client
            await client.complete(MESSAGES, [])
            client.with_extra_body(["not", "an", "object"])
            await client.complete(MESSAGES, [])
    first, second = llm.requests
    assert list(first) == ["model", "messages", "temperature", "top_p", "max_tokens", "stream", "top_k"]
    assert (first["temperature"], first["top_k"]) == (0.2, 40)
    assert list(second) == ["model", "messages", "top_p", "max_tokens", "stream"]


@pytest.mark.parametrize(("asked", "sent"), [(1, 16), (16, 16), (-5, 16), (300, 300)])
async def test_with_max_tokens_has_a_floor_of_16(asked: int, sent: int) -> None:
    with FakeOpenAI() as llm:
        llm.reply_text("ok")
        async with make(llm) as client:
            assert client.with_max_tokens(asked) is client
            assert client.max_tokens == sent
            await client.complete(MESSAGES, [])
    assert llm.requests[0]["max_tokens"] == sent


async def test_headers_path_and_trailing_slashes() -> None:
    with FakeOpenAI(api_key=KEY) as llm:
        llm.reply_text("ok")
        client = OpenAiCompatible(llm.url + "///", KEY, "m")
        assert client.base_url == llm.url
        async with client:
            await client.complete(MESSAGES, [])
    seen = llm.received[0]
    assert (seen.method, seen.path) == ("POST", "/v1/chat/completions")
    assert seen.headers["authorization"] == f"Bearer {KEY}"
    assert seen.headers["content-type"] == "application/json"


async def test_custom_transport_is_used() -> None:
    class Counting(httpx.AsyncHTTPTransport):
        count = 0

        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            Counting.count += 1
            return await super().handle_async_request(request)

    with FakeOpenAI() as llm:
        llm.reply_text("one")
        llm.reply_text("two")
        async with make(llm, transport=Counting()) as client:
            assert (await client.complete(MESSAGES, [])).text == "one"
            assert (await client.complete(MESSAGES, [])).text == "two"
    assert Counting.count == 2


async def test_fake_rejects_a_request_outside_the_schema() -> None:
    """An invalid request gets a 400 and fails the `with` block: the schema check can fail a test."""
    with pytest.raises(AssertionError, match="messages"), FakeOpenAI() as llm:
        async with make(llm) as client:
            with pytest.raises(BeamError) as caught:
                await client.complete([], [])
        assert caught.value.code == "BEM-084"
        assert "llm http 400 Bad Request" in str(caught.value)


# Errors, by status first.


async def test_4xx_json_error_is_084_and_not_retried() -> None:
    sleeps = Sleeps()
    with FakeOpenAI() as llm:
        llm.enqueue(error_body("bad model", code="model_not_found"), status=404)
        error = await error_of(llm, sleeps=sleeps)
    assert error.code == "BEM-084"
    assert error.detail == (
        'llm http 404 Not Found: {"message":"bad model","type":"invalid_request_error",'
        '"param":null,"code":"model_not_found"}'
    )
    assert len(llm.requests) == 1
    assert sleeps.calls == []


async def test_502_html_retries_then_gives_up_with_084() -> None:
    sleeps = Sleeps()
    with FakeOpenAI() as llm:
        for _ in range(3):
            llm.enqueue(HTML_502, status=502, headers={"Content-Type": "text/html"})
        error = await error_of(llm, sleeps=sleeps, backoff=0.25)
    assert error.code == "BEM-084"
    assert error.detail == f"llm http 502 Bad Gateway: {HTML_502}"
    assert len(llm.requests) == 3
    assert sleeps.calls == [0.25, 0.5]


async def test_5xx_then_success() -> None:
    sleeps = Sleeps()
    with FakeOpenAI() as llm:
        llm.reply_error(503, "overloaded")
        llm.reply_text("recovered")
        result = await complete_one(llm, sleeps=sleeps, backoff=0.1)
    assert result.text == "recovered"
    assert len(llm.requests) == 2
    assert sleeps.calls == [0.1]


async def test_429_honours_retry_after_seconds() -> None:
    sleeps = Sleeps()
    with FakeOpenAI() as llm:
        llm.reply_error(429, "slow down", headers={"Retry-After": "3"})
        llm.reply_text("ok")
        result = await complete_one(llm, sleeps=sleeps)
    assert result.text == "ok"
    assert len(llm.requests) == 2
    assert sleeps.calls == [3.0]


async def test_429_honours_retry_after_http_date() -> None:
    sleeps = Sleeps()
    when = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    with FakeOpenAI() as llm:
        llm.reply_error(429, "slow down", headers={"Retry-After": when})
        llm.reply_text("ok")
        await complete_one(llm, sleeps=sleeps)
    assert len(sleeps.calls) == 1
    assert 20 < sleeps.calls[0] <= 30


async def test_no_retry_that_would_exceed_the_timeout() -> None:
    sleeps = Sleeps()
    with FakeOpenAI() as llm:
        llm.reply_error(429, "come back in two minutes", headers={"Retry-After": "120"})
        error = await error_of(llm, sleeps=sleeps, timeout=5.0)
    assert error.code == "BEM-084"
    assert error.detail is not None and error.detail.startswith("llm http 429 Too Many Requests: ")
    assert len(llm.requests) == 1
    assert sleeps.calls == []


async def test_timeout_is_082() -> None:
    with FakeOpenAI() as llm:
        llm.enqueue(chat_response(text_message("too late")), delay=30)
        error = await error_of(llm, timeout=0.3)
    assert error.code == "BEM-082"
    assert error.detail == "llm request timed out after 0.3 s"
    assert len(llm.requests) == 1


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


async def test_connect_errors_exhaust_retries_with_082() -> None:
    sleeps = Sleeps()
    client = OpenAiCompatible(f"http://127.0.0.1:{free_port()}/v1", KEY, "m", sleep=sleeps, backoff=0.05)
    async with client:
        with pytest.raises(BeamError) as caught:
            await client.complete(MESSAGES, [])
    assert caught.value.code == "BEM-082"
    assert caught.value.detail is not None and caught.value.detail.startswith("llm request failed: ")
    assert sleeps.calls == [0.05, 0.1]


async def test_connect_error_then_success() -> None:
    """The server comes up during the client's back-off, as after a restart."""
    port = free_port()
    servers: list[FakeOpenAI] = []

    async def start_server(seconds: float) -> None:
        llm = FakeOpenAI(port=port).start()
        llm.reply_text("up again")
        servers.append(llm)

    client = OpenAiCompatible(f"http://127.0.0.1:{port}/v1", KEY, "m", sleep=start_server)
    try:
        async with client:
            result = await client.complete(MESSAGES, [])
    finally:
        for llm in servers:
            llm.close()
    assert result.text == "up again"
    assert len(servers) == 1
    assert len(servers[0].requests) == 1


# from_env: the original's precedence, quirks included.

FULL = {"BEAM_API_BASE_URL": "http://a/v1/", "BEAM_MODEL": "m-a"}
GFS = {"GFS_BEAM_BASE_URL": "http://g/", "GFS_BEAM_MODEL": "m-g"}
DEFAULTS = ("https://integrate.api.nvidia.com/v1", "deepseek-ai/deepseek-v4-pro-0813")


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, None),
        ({"NVIDIA_API_KEY": "n"}, ("n", *DEFAULTS)),
        ({"GFS_BEAM_API_KEY": "g", "NVIDIA_API_KEY": "n"}, ("g", None, None)),
        ({"BEAM_API_KEY": "b", "GFS_BEAM_API_KEY": "g", "NVIDIA_API_KEY": "n"}, ("b", None, None)),
        ({"BEAM_API_KEY": "", "NVIDIA_API_KEY": "n"}, None),
        ({"BEAM_API_KEY": "\udcff", "NVIDIA_API_KEY": "n"}, ("n", None, None)),
        ({"BEAM_API_KEY": "b", **FULL, **GFS}, ("b", "http://a/v1", "m-a")),
        ({"BEAM_API_KEY": "b", **GFS}, ("b", "http://g", "m-g")),
        ({"BEAM_API_KEY": "b", "BEAM_API_BASE_URL": "", "GFS_BEAM_BASE_URL": "http://g"}, ("b", "", None)),
        ({"BEAM_API_KEY": "b", "BEAM_MODEL": "", "GFS_BEAM_MODEL": "m-g"}, ("b", None, "")),
        ({"BEAM_API_KEY": "b", "GFS_BEAM_API_BASE_URL": "http://wrong-name"}, ("b", None, None)),
    ],
)  # fmt: skip
def test_from_env(env: dict[str, str], expected: tuple[str, str | None, str | None] | None) -> None:
    client = OpenAiCompatible.from_env(env)
    if expected is None:
        assert client is None
        return
    assert client is not None
    key, base_url, model = expected
    assert client._api_key == key
    assert client.base_url == (base_url if base_url is not None else "https://integrate.api.nvidia.com/v1")
    assert client.model == (model if model is not None else "deepseek-ai/deepseek-v4-pro-0813")
    assert client.max_tokens == 4096
    assert client.extra_body == {"chat_template_kwargs": {"thinking": False}}


def test_from_env_reads_os_environ_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("BEAM_API_KEY", "GFS_BEAM_API_KEY", "NVIDIA_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    assert OpenAiCompatible.from_env() is None
    monkeypatch.setenv("NVIDIA_API_KEY", "from-os")
    client = OpenAiCompatible.from_env()
    assert client is not None and client._api_key == "from-os"


# The key stays secret.


async def test_api_key_absent_from_repr_errors_and_logs(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    sleeps = Sleeps()
    with FakeOpenAI() as llm:
        llm.enqueue(error_body(f"Incorrect API key provided: {KEY}."), status=503)
        llm.enqueue(error_body(f"Incorrect API key provided: {KEY}.", code="invalid_api_key"), status=401)
        async with make(llm, sleeps) as client:
            assert KEY not in repr(client)
            assert KEY not in str(client)
            with pytest.raises(BeamError) as caught:
                await client.complete(MESSAGES, [])
    error = caught.value
    assert error.code == "BEM-084"
    assert "Incorrect API key provided: [redacted]." in str(error)
    for text in (str(error), repr(error), json.dumps(error.to_json()), caplog.text):
        assert KEY not in text
    assert len(llm.requests) == 2
    assert "retry 1 of 2" in caplog.text


# The fake's own replies follow OpenAI's description.


def test_fake_replies_validate_against_the_response_schema() -> None:
    assert (
        schema_problems("CreateChatCompletionResponse", chat_response(text_message("hi"), usage=usage()))
        == []
    )
    calls = tool_calls_message([tool_call("read_file", {"path": "x"})])
    assert schema_problems("CreateChatCompletionResponse", chat_response(calls)) == []
    assert schema_problems("ErrorResponse", error_body("nope")) == []
    assert schema_problems("CreateChatCompletionResponse", {"choices": []}) != []


async def test_fake_fails_the_test_when_out_of_replies() -> None:
    with pytest.raises(AssertionError, match="no scripted reply left"), FakeOpenAI() as llm:
        llm.script_tool_then_text("read_file", {"path": "a"}, "done")
        async with make(llm, max_retries=0) as client:
            first = await client.complete(MESSAGES, [READ_FILE])
            second = await client.complete(MESSAGES, [READ_FILE])
            with pytest.raises(BeamError):
                await client.complete(MESSAGES, [READ_FILE])
    assert first.tool_calls is not None and first.tool_calls[0].args == {"path": "a"}
    assert second.text == "done"


async def test_a_client_killed_mid_body_is_not_a_bad_request_and_the_next_one_is_answered() -> None:
    """The kill tests kill the bot at any point, also halfway through a request to the model: the
    fake then saw a closed connection, not a malformed request (the soak once failed on that)."""
    with FakeOpenAI() as llm:
        with socket.create_connection(("127.0.0.1", llm.port), timeout=5) as killed:
            killed.sendall(
                b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Authorization: Bearer k\r\nContent-Length: 200\r\n\r\n"
                b'{"model": "m", "mess'
            )
            killed.shutdown(socket.SHUT_WR)  # the rest never comes
            assert killed.recv(1024) == b""  # closed without an answer
        llm.reply_text("fine")
        completion = await complete_one(llm)
        assert completion.text == "fine"
        assert llm.errors == [] and len(llm.requests) == 1
