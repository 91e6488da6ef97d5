"""Issue 8: `beam-bot serve` closes connections that send no request head in time, and answers 503
once its connection limit is reached."""

from __future__ import annotations

import socket
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
