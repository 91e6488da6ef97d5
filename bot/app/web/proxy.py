"""The webhook proxy channel (BEAM_WEBHOOK_PROXY_URL, like Probot's WEBHOOK_PROXY_URL) for servers GitHub
cannot reach, such as a laptop: GitHub posts each delivery to a smee.io channel, and this module reads
the channel's Server-Sent Events and hands every delivery to the same intake as `POST /webhooks`, so
the size, header and signature checks, the store and the dedupe by delivery id all apply unchanged.

smee's message format (https://github.com/probot/smee.io, lib/server.js): events `ready` and `ping`
carry nothing; a delivery is an unnamed event whose data is one JSON object holding the request's
headers (lower-case names), `body` (the JSON payload, parsed), `query` and `timestamp`. smee parsed
the body, so we serialise it again exactly as smee-client does (JavaScript's `JSON.stringify`:
compact, non-ASCII kept as is), which gives GitHub's bytes back and lets the signature check pass.

The connection is kept open for good: after an error or a close it reconnects with exponential
backoff (with jitter, reset once the channel answers), sending `Last-Event-ID` so that a channel
that keeps a backlog can replay what was missed. A replayed delivery is answered "duplicate" by the
store, never run twice. smee.io itself keeps no backlog: what GitHub sent while no reader was
connected can be redelivered from the App's settings page (Advanced).
"""

from __future__ import annotations

import json
import logging
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx
from httpx_sse import SSEError, aconnect_sse
from starlette.types import Message, Receive, Scope

log = logging.getLogger("beam.proxy")

Headers = list[tuple[str, str]]
Deliver = Callable[[Headers, bytes], Awaitable[int]]
# Headers that describe smee's hop, not GitHub's delivery; content type and length are set anew.
_HOP_HEADERS = frozenset(
    {
        "host",
        "connection",
        "content-length",
        "content-type",
        "transfer-encoding",
        "accept-encoding",
        "x-forwarded-for",
        "x-forwarded-proto",
        "x-forwarded-host",
        "x-forwarded-port",
    }
)
_MESSAGE_FIELDS = frozenset({"body", "query", "timestamp"})


def delivery_from_message(data: str) -> tuple[Headers, bytes] | None:
    """The headers and raw body of the delivery in one smee message, or None if it holds none."""
    try:
        message = json.loads(data)
    except ValueError:
        return None
    if not isinstance(message, dict) or not isinstance(message.get("body"), dict | list):
        return None
    # JSON.stringify's bytes: no spaces, non-ASCII as UTF-8, the same escapes as Python's json.
    body = json.dumps(message["body"], ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    headers: Headers = []
    for name, value in message.items():
        key = str(name).lower()
        if key in _MESSAGE_FIELDS or key in _HOP_HEADERS or not isinstance(value, str):
            continue
        if not value.isascii() or "\n" in value or "\r" in value:
            continue
        headers.append((key, value))
    headers += [("content-type", "application/json"), ("content-length", str(len(body)))]
    return headers, body


# `WebhookIntake.answer`: status, body and extra headers for one request.
Answer = Callable[[Scope, Receive], Awaitable[tuple[int, bytes, list[tuple[bytes, bytes]]]]]


def intake_deliverer(answer: Answer) -> Deliver:
    """Hands a delivery to the intake endpoint as the request GitHub would have sent; returns the status."""

    async def deliver(headers: Headers, body: bytes) -> int:
        sent = False

        async def receive() -> Message:
            nonlocal sent
            if sent:
                return {"type": "http.disconnect"}
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        scope: Scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": "/webhooks",
            "raw_path": b"/webhooks",
            "root_path": "",
            "query_string": b"",
            "headers": [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers],
            "server": ("webhook-proxy", 80),
            "client": None,
        }
        status, _body, _headers = await answer(scope, receive)
        return status

    return deliver


class WebhookProxy:
    """Reads one channel for as long as it runs; `run` returns only when cancelled."""

    def __init__(
        self,
        url: str,
        deliver: Deliver,
        *,
        min_backoff: float = 1.0,
        max_backoff: float = 60.0,
        read_timeout: float = 90.0,
    ) -> None:
        self.url = url
        self.deliver = deliver
        self.min_backoff = min_backoff
        self.max_backoff = max_backoff
        # smee pings every 30 s; a connection silent for longer than this is dead.
        self.read_timeout = read_timeout
        self.last_event_id: str | None = None
        self.connected = False
        self.connections = 0
        self.delivered: dict[int, int] = {}  # intake status -> count

    async def run(self) -> None:
        failures = 0
        timeout = httpx.Timeout(10.0, read=self.read_timeout)
        async with httpx.AsyncClient(timeout=timeout, follow_redirects=False) as client:
            while True:
                try:
                    if await self._read(client):
                        failures = 0
                    reason = "the channel closed the stream"
                except (httpx.HTTPError, SSEError, _ChannelRefused) as exc:
                    reason = str(exc) or type(exc).__name__
                finally:
                    self.connected = False
                delay = min(self.max_backoff, self.min_backoff * 2**failures) * random.uniform(0.5, 1.0)  # noqa: S311
                failures = min(failures + 1, 16)
                log.warning("webhook proxy: lost %s (%s); reconnecting in %.1f s", self.url, reason, delay)
                await anyio.sleep(delay)

    async def _read(self, client: httpx.AsyncClient) -> bool:
        """One connection; True once the channel answered with an event stream."""
        headers = {"Last-Event-ID": self.last_event_id} if self.last_event_id else {}
        answered = False
        async with aconnect_sse(client, "GET", self.url, headers=headers) as source:
            status = source.response.status_code
            if status != 200:
                raise _ChannelRefused(f"HTTP {status}")
            async for event in source.aiter_sse():
                if not answered:
                    answered = True
                    self.connected = True
                    self.connections += 1
                    log.info("webhook proxy: reading deliveries from %s", self.url)
                if event.id:
                    self.last_event_id = event.id
                if event.event != "message":
                    continue  # ready, ping
                await self._forward(event.data)
        return answered

    async def _forward(self, data: str) -> None:
        delivery = delivery_from_message(data)
        if delivery is None:
            log.warning("webhook proxy: a message without a JSON body was skipped")
            return
        headers, body = delivery
        try:
            status = await self.deliver(headers, body)
        except Exception:
            # The intake answers every bad delivery itself; reaching here is a bug, not a reason
            # to drop the connection and the deliveries behind it.
            log.exception("webhook proxy: the intake failed on a delivery")
            status = 500
        self.delivered[status] = self.delivered.get(status, 0) + 1


class _ChannelRefused(Exception):
    pass


@asynccontextmanager
async def proxy_running(
    url: str | None, deliver: Deliver, **options: Any
) -> AsyncIterator[WebhookProxy | None]:
    """Reads the channel in the background while the block runs (nothing when `url` is None)."""
    if url is None:
        yield None
        return
    proxy = WebhookProxy(url, deliver, **options)
    async with anyio.create_task_group() as tg:
        tg.start_soon(proxy.run)
        try:
            yield proxy
        finally:
            tg.cancel_scope.cancel()
