"""Intake under abuse: a cap on the bytes of unverified bodies held, shares per peer, and timeouts.

`ByteBudget` bounds the memory that bodies not yet proven to come from GitHub can hold: a request
reserves each chunk of its body as it arrives (bytes received, never the Content-Length it declares,
which costs an attacker nothing) and gives them back once the signature is checked (or the request
ends). One peer (client address) may hold at most a share of the budget (issue 32): three slow
25 MiB bodies from one address no longer fill it for everyone. When there is no room, a request
waits up to `wait` seconds, then gets 503 with `Retry-After`. GitHub does not send a refused
delivery again by itself: the redelivery sweep (web/redelivery.py) asks it to.

`header_timeout_protocol` makes uvicorn close a connection that has sent nothing `idle` seconds
after it opened, or no whole request head within `timeout` seconds (a slowloris holds a connection
forever otherwise), or whose head grows past `max_head` bytes: httptools, unlike h11, reads and
keeps a head of any size, so 1,000 connections each sending 20 MB of headers for 10 s would otherwise
hold 20 GB before any check ran (issue 23). Such a connection gets 431 and is closed. uvicorn's own
`limit_concurrency` caps the connections (more get 503), and one peer may hold at most `per_peer` of
them (more are answered 503 and closed at once), so 1,000 idle connections from one address leave
room for GitHub and `/readyz` (issue 32). The idle timer runs only until a connection's first
byte; between two requests of a kept-alive connection uvicorn's own `timeout_keep_alive` (5 s)
closes it, and the head timer starts again with the next request's first byte. Intake bounds the
body read with its own timeout.
"""

from __future__ import annotations

import asyncio
from typing import Any

import anyio


class ByteBudget:
    """Bytes that may be held at once by unverified bodies, all peers together and per peer."""

    def __init__(self, capacity: int, per_peer: int | None = None) -> None:
        self.capacity = capacity
        self.per_peer = min(capacity, per_peer if per_peer is not None else capacity)
        self.used = 0
        self.by_peer: dict[str, int] = {}
        self._waiting = 0
        self._freed = anyio.Event()

    def _fits(self, size: int, peer: str) -> bool:
        return self.used + size <= self.capacity and self.by_peer.get(peer, 0) + size <= self.per_peer

    async def reserve(self, size: int, wait: float, peer: str = "") -> bool:
        """Take `size` bytes for `peer`, waiting up to `wait` seconds for room; False when there is none."""
        size = min(size, self.per_peer)  # one body may always use the peer's whole share
        if not self._waiting and self._fits(size, peer):
            self._take(size, peer)  # room, and nobody queued before us: no timer, no event
            return True
        self._waiting += 1
        try:
            with anyio.move_on_after(wait):
                while not self._fits(size, peer):
                    await self._freed.wait()
                self._take(size, peer)
                return True
            return False
        finally:
            self._waiting -= 1

    def _take(self, size: int, peer: str) -> None:
        self.used += size
        self.by_peer[peer] = self.by_peer.get(peer, 0) + size

    def release(self, size: int, peer: str = "") -> None:
        size = min(size, self.per_peer)
        self.used = max(0, self.used - size)
        left = self.by_peer.get(peer, 0) - size
        if left > 0:
            self.by_peer[peer] = left
        else:
            self.by_peer.pop(peer, None)
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


_BUSY_TEXT = b"too many connections from this address; try again\n"
PEER_BUSY = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain\r\nretry-after: 5\r\n"
    b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (len(_BUSY_TEXT), _BUSY_TEXT)
)


def peer_of(transport: asyncio.BaseTransport) -> str:
    """The address (not the port) a connection comes from."""
    peer = transport.get_extra_info("peername")
    return str(peer[0]) if isinstance(peer, tuple) and peer else ""


def header_timeout_protocol(
    timeout: float,
    max_head: int = MAX_REQUEST_HEAD,
    *,
    idle: float | None = None,
    per_peer: int | None = None,
) -> type[Any]:
    """uvicorn's HTTP protocol, closing connections that send nothing in `idle` seconds or no whole
    request head in `timeout` seconds, answering 431 to a head over `max_head` bytes, and 503 (then
    closing) to a connection past the `per_peer`-th one open from the same address."""
    base = _base_protocol()
    first_wait = timeout if idle is None else min(idle, timeout)
    open_by_peer: dict[str, int] = {}  # this server's connections, by address

    class HeaderTimeoutProtocol(base):  # type: ignore[misc, valid-type]
        _beam_timer: asyncio.TimerHandle | None = None
        _beam_head = 0
        _beam_tail = b""
        _beam_fresh = True  # nothing received yet: the idle timer runs, not the head timer
        _beam_peer: str | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:
            super().connection_made(transport)
            peer = self._beam_peer = peer_of(transport)
            open_by_peer[peer] = open_by_peer.get(peer, 0) + 1
            if per_peer is not None and open_by_peer[peer] > per_peer:
                # Issue 32: one address may not hold the connections everyone else needs.
                transport.write(PEER_BUSY)
                transport.close()
                return
            self._beam_timer = self.loop.call_later(first_wait, self._beam_expire)

        def data_received(self, data: bytes) -> None:
            idle = self._beam_idle()
            if self._beam_fresh:
                # The first bytes: the connection is no longer idle; its head has `timeout` from now.
                self._beam_fresh = False
                if self._beam_timer is not None:
                    self._beam_timer.cancel()
                    self._beam_timer = None
            if self._beam_timer is None and idle:
                self._beam_arm()  # the head of this (or a next, kept-alive) request
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
            peer, self._beam_peer = self._beam_peer, None
            if peer is not None:
                left = open_by_peer.get(peer, 1) - 1
                if left > 0:
                    open_by_peer[peer] = left
                else:
                    open_by_peer.pop(peer, None)
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
