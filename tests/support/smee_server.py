"""A local webhook proxy channel server that speaks smee.io's message format, for the proxy tests.

As smee.io does (https://github.com/probot/smee.io, lib/server.js): `POST /<channel>` takes a delivery
and publishes one Server-Sent Event whose data is a JSON object of the request's headers (lower-case),
`body` (the parsed JSON payload), `query` and `timestamp`; `GET /<channel>` with
`Accept: text/event-stream` streams `ready`, then the deliveries (unnamed events), with an `id:` each.
Unlike smee it can also replay what a reconnecting reader missed (`replay="after"`, by Last-Event-ID)
or everything (`replay="all"`, to prove the reader does not run a delivery twice), refuse the next
connections with a status (`refuse`), and drop every open stream (`POST /_control/drop`).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.support.asgi_server import serve_asgi

_DROP = object()


@dataclass
class SmeeChannels:
    replay: str = "none"  # "none" (smee.io), "after" (by Last-Event-ID) or "all"
    refuse: list[int] = field(default_factory=list)  # statuses for the next connection attempts
    messages: list[tuple[str, str, str]] = field(default_factory=list)  # (channel, id, data)
    connections: list[dict[str, str | None]] = field(default_factory=list)
    attempts: int = 0
    _subscribers: list[tuple[str, asyncio.Queue[object]]] = field(default_factory=list)

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/_control/drop", self._drop, methods=["POST"]),
                Route("/{channel}", self._stream, methods=["GET"]),
                Route("/{channel}", self._post, methods=["POST"]),
            ]
        )

    async def _post(self, request: Request) -> Response:
        channel = request.path_params["channel"]
        message: dict[str, Any] = {k.lower(): v for k, v in request.headers.items()}
        message["body"] = json.loads(await request.body())
        message["query"] = dict(request.query_params)
        message["timestamp"] = int(time.time() * 1000)
        data = json.dumps(message, separators=(",", ":"), ensure_ascii=False)  # JSON.stringify
        event_id = str(len(self.messages))
        self.messages.append((channel, event_id, data))
        for name, queue in self._subscribers:
            if name == channel:
                queue.put_nowait((event_id, data))
        return PlainTextResponse("")

    async def _drop(self, request: Request) -> Response:
        for _, queue in self._subscribers:
            queue.put_nowait(_DROP)
        return JSONResponse({"dropped": len(self._subscribers)})

    async def _stream(self, request: Request) -> Response:
        channel = request.path_params["channel"]
        self.attempts += 1
        if self.refuse:
            return PlainTextResponse("refused", status_code=self.refuse.pop(0))
        if request.headers.get("accept") != "text/event-stream":
            return PlainTextResponse("<html>the channel's web page</html>", media_type="text/html")
        last = request.headers.get("last-event-id")
        self.connections.append({"channel": channel, "last_event_id": last})
        queue: asyncio.Queue[object] = asyncio.Queue()
        backlog = [(i, d) for c, i, d in self.messages if c == channel]
        if self.replay == "after" and last is not None:
            backlog = [(i, d) for i, d in backlog if int(i) > int(last)]
        elif self.replay != "all":
            backlog = []
        for item in backlog:
            queue.put_nowait(item)
        entry = (channel, queue)
        self._subscribers.append(entry)

        async def events() -> AsyncIterator[str]:
            try:
                yield "event: ready\ndata: {}\n\n"
                while True:
                    try:
                        item = await asyncio.wait_for(queue.get(), 0.5)
                    except TimeoutError:
                        yield "event: ping\ndata: {}\n\n"
                        continue
                    if item is _DROP:
                        return
                    assert isinstance(item, tuple)
                    event_id, data = item
                    yield f"id: {event_id}\ndata: {data}\n\n"
            finally:
                self._subscribers.remove(entry)

        return StreamingResponse(
            events(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"}
        )


@contextmanager
def serve_smee(channels: SmeeChannels | None = None) -> Iterator[tuple[str, SmeeChannels]]:
    """Serves the channels on 127.0.0.1 (random port) in a thread; yields the base URL and the state."""
    channels = channels or SmeeChannels()
    with serve_asgi(channels.app(), "smee server", timeout_graceful_shutdown=1) as base:
        yield base, channels
