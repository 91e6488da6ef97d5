"""Issue 8: `beam-bot serve` closes connections that send no request head in time, and answers 503
once its connection limit is reached."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.bot_process import BotProcess, bot_stack


@pytest.fixture
def bot(tmp_path: Path) -> Iterator[BotProcess]:
    with bot_stack(tmp_path, BEAM_HEADER_TIMEOUT="0.5", BEAM_MAX_CONNECTIONS="4") as bot:
        bot.start()
        yield bot


def connect(bot: BotProcess) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", bot.port), timeout=15)
    sock.settimeout(15)
    return sock


def test_a_slow_request_head_is_cut_off(bot: BotProcess) -> None:
    with connect(bot) as sock:
        sock.sendall(b"POST /webhooks HTTP/1.1\r\nHost: beam\r\nX-GitHub-Event: ping\r\n")
        assert sock.recv(1024) == b""  # closed by the server, long before our 15 s give up


def test_connections_over_the_limit_get_503(bot: BotProcess) -> None:
    idle = [connect(bot) for _ in range(4)]
    try:
        response = httpx.get(f"{bot.url}/healthz", timeout=10)
        assert response.status_code == 503
    finally:
        for sock in idle:
            sock.close()
    # The idle ones were cut off or closed: the server answers again.
    assert httpx.get(f"{bot.url}/healthz", timeout=10).status_code == 200


def test_a_busy_kept_alive_connection_is_never_cut_off(bot: BotProcess) -> None:
    """The head timer covers a request head, not the connection's age: a client (a proxy, say) that
    keeps one connection busy for longer than the timeout is never closed between two requests."""
    request = b"GET /healthz HTTP/1.1\r\nHost: beam\r\n\r\n"
    with connect(bot) as sock:
        reader = sock.makefile("rb")
        deadline = time.monotonic() + 2.0  # four header timeouts
        answered = 0
        while time.monotonic() < deadline:
            sock.sendall(request)
            status = reader.readline()
            assert status.startswith(b"HTTP/1.1 200"), (answered, status)
            length = 0
            while (line := reader.readline()) not in (b"\r\n", b""):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            reader.read(length)
            answered += 1
            time.sleep(0.05)
        assert answered > 20
