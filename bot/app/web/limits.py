"""Intake under abuse: a cap on the bytes of unverified bodies in flight, and a header read timeout.

`ByteBudget` bounds the memory that bodies not yet proven to come from GitHub can hold: a request
reserves its bytes before they are read and gives them back once the signature is checked (or the
request ends). When the budget is spent, a request waits up to `wait` seconds for room, then gets
503 with `Retry-After` (GitHub redelivers; nothing is lost).

`header_timeout_protocol` makes uvicorn close a connection that has not sent a whole request head
within `timeout` seconds (a slowloris holds a connection forever otherwise), or whose head grows past
`max_head` bytes: httptools, unlike h11, reads and keeps a head of any size, so 1,000 connections each
sending 20 MB of headers for 10 s would otherwise hold 20 GB before any check ran (issue 23). Such a
connection gets 431 and is closed. uvicorn's own `limit_concurrency` caps the connections, and intake
bounds the body read with its own timeout.
"""

from __future__ import annotations

import asyncio
from typing import Any

import anyio


class ByteBudget:
    """Bytes that may be held at once by unverified bodies."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.used = 0
        self._waiting = 0
        self._freed = anyio.Event()

    async def reserve(self, size: int, wait: float) -> bool:
        """Take `size` bytes, waiting up to `wait` seconds for room; False when there is none."""
        size = min(size, self.capacity)  # one body may always use the whole budget
        if not self._waiting and self.used + size <= self.capacity:
            self.used += size  # room, and nobody queued before us: no timer, no event
            return True
        self._waiting += 1
        try:
            with anyio.move_on_after(wait):
                while self.used + size > self.capacity:
                    await self._freed.wait()
                self.used += size
                return True
            return False
        finally:
            self._waiting -= 1

    def release(self, size: int) -> None:
        self.used = max(0, self.used - min(size, self.capacity))
        if self._waiting:
            self._freed.set()
            self._freed = anyio.Event()


def _base_protocol() -> type[Any]:
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

        return HttpToolsProtocol
    except ImportError:  # httptools is optional; h11 is what uvicorn always has
        from uvicorn.protocols.http.h11_impl import H11Protocol

        return H11Protocol


MAX_REQUEST_HEAD = 64 * 1024
_HEAD_TOO_LARGE_TEXT = b"request head over 64 KB: refused\n"
HEAD_TOO_LARGE = (
    b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: text/plain\r\n"
    b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (len(_HEAD_TOO_LARGE_TEXT), _HEAD_TOO_LARGE_TEXT)
)


def head_bytes(seen: int, tail: bytes, data: bytes) -> tuple[int, bool]:
    """Bytes of a request head read so far after `data`, and whether the head is complete.

    `tail` is the last three bytes read before `data`, so a `\\r\\n\\r\\n` split across two reads is
    found; only the bytes up to the end of the head count (the body that follows may be large).
    """
    window = tail + data if tail else data
    end = window.find(b"\r\n\r\n")
    if end < 0:
        return seen + len(data), False
    return seen + max(0, end + 4 - len(tail)), True


def header_timeout_protocol(timeout: float, max_head: int = MAX_REQUEST_HEAD) -> type[Any]:
    """uvicorn's HTTP protocol, closing connections that send no whole request head in `timeout`
    seconds, and answering 431 to a head over `max_head` bytes."""
    base = _base_protocol()

    class HeaderTimeoutProtocol(base):  # type: ignore[misc, valid-type]
        _beam_timer: asyncio.TimerHandle | None = None
        _beam_head = 0
        _beam_tail = b""

        def connection_made(self, transport: asyncio.Transport) -> None:
            super().connection_made(transport)
            self._beam_arm()

        def data_received(self, data: bytes) -> None:
            idle = self._beam_idle()
            if self._beam_timer is None and idle:
                self._beam_arm()  # the head of a next request on a kept-alive connection
            if idle and not self._beam_head_fits(data):
                return
            super().data_received(data)
            if not self._beam_idle():
                self._beam_head, self._beam_tail = 0, b""  # the next head on this connection counts anew
                if self._beam_timer is not None:
                    # The head is in (a request is being answered): the timer has done its job. Left
                    # armed, it closed busy kept-alive connections between two requests once it fired.
                    self._beam_timer.cancel()
                    self._beam_timer = None

        def _beam_head_fits(self, data: bytes) -> bool:
            """Counts the head's bytes before the parser sees them; over the cap: 431, closed."""
            seen, complete = head_bytes(self._beam_head, self._beam_tail, data)
            if seen > max_head:
                if not self.transport.is_closing():
                    self.transport.write(HEAD_TOO_LARGE)
                    self.transport.close()
                return False
            self._beam_head = 0 if complete else seen
            self._beam_tail = b"" if complete else (self._beam_tail + data)[-3:]
            return True

        def connection_lost(self, exc: Exception | None) -> None:
            if self._beam_timer is not None:
                self._beam_timer.cancel()
                self._beam_timer = None
            super().connection_lost(exc)

        def _beam_idle(self) -> bool:
            cycle = self.cycle
            return cycle is None or bool(cycle.response_complete)

        def _beam_arm(self) -> None:
            self._beam_timer = self.loop.call_later(timeout, self._beam_expire)

        def _beam_expire(self) -> None:
            self._beam_timer = None
            if self._beam_idle() and not self.transport.is_closing():
                self.transport.close()

    return HeaderTimeoutProtocol
