"""Intake under abuse: a cap on the bytes of unverified bodies in flight, and a header read timeout.

`ByteBudget` bounds the memory that bodies not yet proven to come from GitHub can hold: a request
reserves its bytes before they are read and gives them back once the signature is checked (or the
request ends). When the budget is spent, a request waits up to `wait` seconds for room, then gets
503 with `Retry-After` (GitHub redelivers; nothing is lost).

`header_timeout_protocol` makes uvicorn close a connection that has not sent a whole request head
within `timeout` seconds (a slowloris holds a connection forever otherwise); uvicorn's own
`limit_concurrency` caps the connections, and intake bounds the body read with its own timeout.
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


def header_timeout_protocol(timeout: float) -> type[Any]:
    """uvicorn's HTTP protocol, closing connections that send no whole request head in `timeout`."""
    base = _base_protocol()

    class HeaderTimeoutProtocol(base):  # type: ignore[misc, valid-type]
        _beam_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:
            super().connection_made(transport)
            self._beam_arm()

        def data_received(self, data: bytes) -> None:
            if self._beam_timer is None and self._beam_idle():
                self._beam_arm()  # the head of a next request on a kept-alive connection
            super().data_received(data)
            if self._beam_timer is not None and not self._beam_idle():
                # The head is in (a request is being answered): the timer has done its job. Left
                # armed, it closed busy kept-alive connections between two requests once it fired.
                self._beam_timer.cancel()
                self._beam_timer = None

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
