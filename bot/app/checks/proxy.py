"""The allowlisting HTTP(S) proxy that `checks_setup` reaches the package registries through.

The jail has an empty network namespace, so no TCP proxy on the host is reachable from it. The proxy
listens on a Unix socket instead, which is bound into the setup's jail; `forward.py`, in the jail,
turns it back into 127.0.0.1:3128 for pip and friends (HTTP(S)_PROXY). What is allowed is decided
here, on the host side, by the host the proxy itself connects to, so nothing the setup sends can widen
it: CONNECT host:port (HTTPS) and absolute-form requests (`GET http://host/...`, plain HTTP, one
request per connection) to a host of BEAM_CHECKS_ALLOWED_HOSTS. Everything else gets a 403.

It holds at most `max_connections` at once (each is two descriptors of the bot's: the jail's end and
the upstream one); one more is answered 503 and closed at once, so a setup that opens connections in
a loop can never take the descriptors the bot needs for its own files, sockets and git.

An allowed entry is `host` (ports 443 and 80), `host:port` (that port), or `*.domain` (any name under
it, not the domain itself). A small asyncio proxy of our own: the maintained ones (squid, tinyproxy)
are daemons to install and configure per run, for two request forms and a list of names.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("beam.checks.proxy")

_HEAD_LIMIT = 16 * 1024
_BUSY = b"HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
_DROPPED_HEADERS = frozenset({"proxy-connection", "proxy-authorization", "connection", "keep-alive"})


@dataclass(frozen=True, slots=True)
class _Rule:
    host: str
    port: int | None  # None: 443 and 80
    wildcard: bool


def _rules(entries: Sequence[str]) -> list[_Rule]:
    rules = []
    for entry in entries:
        text = entry.strip().lower().rstrip(".")
        port: int | None = None
        if ":" in text:
            text, _, digits = text.rpartition(":")
            port = int(digits)
        wildcard = text.startswith("*.")
        rules.append(_Rule(text[2:] if wildcard else text, port, wildcard))
    return rules


def allowed(host: str, port: int, entries: Sequence[str]) -> bool:
    name = host.strip().lower().rstrip(".")
    for rule in _rules(entries):
        if rule.port is None and port not in (443, 80):
            continue
        if rule.port is not None and port != rule.port:
            continue
        if rule.wildcard and name.endswith("." + rule.host):
            return True
        if not rule.wildcard and name == rule.host:
            return True
    return False


def _split_hostport(text: str, default: int) -> tuple[str, int]:
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        return host, int(rest[1:]) if rest.startswith(":") else default
    host, sep, port = text.rpartition(":")
    if sep and port.isdigit():
        return host, int(port)
    return text, default


def _target(method: str, target: str) -> tuple[str, int, str] | None:
    """(host, port, origin-form path) of a request, or None when it is not a proxy request."""
    if method == "CONNECT":
        host, port = _split_hostport(target, 443)
        return host, port, ""
    if not target.lower().startswith("http://"):
        return None
    rest = target[len("http://") :]
    authority, slash, path = rest.partition("/")
    host, port = _split_hostport(authority, 80)
    return host, port, "/" + path if slash else "/"


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(1 << 16):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(ConnectionError, OSError, RuntimeError):
            if writer.can_write_eof():
                writer.write_eof()


class AllowlistProxy:
    """One per setup run: `await start(socket_path)`, then `await close()` when the setup is done."""

    def __init__(
        self, allowed_hosts: Sequence[str], *, connect_timeout_s: float = 30, max_connections: int = 64
    ) -> None:
        self.allowed_hosts = tuple(allowed_hosts)
        self.connect_timeout_s = connect_timeout_s
        self.max_connections = max_connections
        self.refused: list[str] = []
        self.over_cap = 0  # connections refused because `max_connections` were open
        self._listener: socket.socket | None = None
        self._acceptor: asyncio.Future[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self, path: Path) -> None:
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            listener.bind(str(path))
            os.chmod(path, 0o666)  # noqa: S103 - a socket the jail (another uid) must connect to
            listener.listen(self.max_connections)
            listener.setblocking(False)
        except OSError:
            listener.close()
            raise
        self._listener = listener
        self._acceptor = asyncio.ensure_future(self._accept())

    async def close(self) -> None:
        if self._acceptor is not None:
            self._acceptor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._acceptor
        if self._listener is not None:
            self._listener.close()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def _accept(self) -> None:
        """Our own accept loop rather than asyncio's server: one over the cap is closed at once, before
        it becomes a transport (asyncio's would accept a whole backlog per turn and close them later)."""
        assert self._listener is not None
        loop = asyncio.get_running_loop()
        while True:
            try:
                conn, _ = await loop.sock_accept(self._listener)
            except OSError as exc:  # out of descriptors after all: wait rather than spin and log
                log.warning("checks proxy: accept failed (%s)", exc)
                await asyncio.sleep(0.5)
                continue
            if len(self._tasks) >= self.max_connections:
                self.over_cap += 1
                if self.over_cap == 1:  # once per setup: a flood must not flood the log too
                    log.warning("checks proxy: %d connections open, refusing more", self.max_connections)
                with contextlib.suppress(OSError):
                    conn.send(_BUSY)
                conn.close()
                continue
            conn.setblocking(False)
            task = asyncio.ensure_future(self._serve(conn))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _serve(self, conn: socket.socket) -> None:
        try:
            reader, writer = await asyncio.open_unix_connection(sock=conn)
        except OSError:
            conn.close()
            return
        try:
            await self._handle(reader, writer)
        except (ConnectionError, OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
            pass
        finally:
            writer.close()

    async def _refuse(self, writer: asyncio.StreamWriter, status: str, why: str) -> None:
        body = f"beam-bot checks proxy: {why}\n".encode()
        writer.write(
            f"HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n".encode()
            + body
        )
        with contextlib.suppress(ConnectionError, OSError):
            await writer.drain()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), self.connect_timeout_s)
        if len(head) > _HEAD_LIMIT:
            await self._refuse(writer, "431 Request Header Fields Too Large", "request head too large")
            return
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3:
            await self._refuse(writer, "400 Bad Request", "not an HTTP request")
            return
        method, target, version = parts
        where = _target(method.upper(), target)
        if where is None:
            await self._refuse(writer, "400 Bad Request", "only CONNECT and absolute http:// requests")
            return
        host, port, path = where
        if not allowed(host, port, self.allowed_hosts):
            self.refused.append(f"{host}:{port}")
            log.warning("checks proxy refused %s:%d (not in BEAM_CHECKS_ALLOWED_HOSTS)", host, port)
            await self._refuse(
                writer, "403 Forbidden", f"{host}:{port} is not in BEAM_CHECKS_ALLOWED_HOSTS (BEM-354)"
            )
            return
        try:
            up_reader, up_writer = await asyncio.wait_for(
                asyncio.open_connection(host, port), self.connect_timeout_s
            )
        except (OSError, TimeoutError) as exc:
            await self._refuse(writer, "502 Bad Gateway", f"could not reach {host}:{port} ({exc})")
            return
        try:
            if method.upper() == "CONNECT":
                writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            else:
                kept = [
                    line
                    for line in lines[1:]
                    if line and line.split(":", 1)[0].strip().lower() not in _DROPPED_HEADERS
                ]
                request = "\r\n".join([f"{method} {path} {version}", *kept, "Connection: close", "", ""])
                up_writer.write(request.encode("latin-1"))
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        finally:
            up_writer.close()
