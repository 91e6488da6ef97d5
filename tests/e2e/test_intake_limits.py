"""Issue 8: `beam-bot serve` closes connections that send no request head in time, and answers 503
once its connection limit is reached. Issue 32: idle connections are closed sooner, and one address
cannot take the connections or the byte budget everyone else needs."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.bot_process import SECRET, BotProcess, bot_stack
from tests.support.webhooks import delivery, raw_payload

PR_COMMENT = raw_payload("issue_comment.created.pull_request.json")


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


def peak_rss_bytes(pid: int) -> int:
    """The process's high-water mark of resident memory (VmHWM): a head held for a moment counts."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def send_head(bot: BotProcess, size: int) -> bytes:
    """Sends a request head of about `size` bytes (one long header, never ended) in 1 MB writes and
    returns what the server answered before it closed the connection."""
    chunk = b"a" * (1 << 20)
    with connect(bot) as sock:
        sock.sendall(b"POST /webhooks HTTP/1.1\r\nHost: beam\r\nX-Pad: ")
        sent = 0
        try:
            while sent < size:
                sock.sendall(chunk)
                sent += len(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server stopped reading: the point of the cap
        try:
            return sock.recv(4096)
        except ConnectionResetError:
            return b""


@pytest.mark.parametrize("megabytes", [1, 100])
def test_a_huge_request_head_is_refused_before_it_is_held(bot: BotProcess, megabytes: int) -> None:
    """Issue 23: httptools reads a head of any size; the server must stop at 64 KB (431, closed)
    instead of holding megabytes per connection."""
    assert bot.proc is not None
    before = peak_rss_bytes(bot.proc.pid)
    answer = send_head(bot, megabytes << 20)
    grown = peak_rss_bytes(bot.proc.pid) - before
    assert answer == b"" or answer.startswith(b"HTTP/1.1 431"), answer[:80]
    assert grown < 8 << 20, f"the server's peak RSS grew by {grown >> 20} MB for a {megabytes} MB head"
    # The server still answers, and a head under the cap is read as before.
    ok = httpx.get(f"{bot.url}/healthz", headers={"X-Pad": "a" * 40_000}, timeout=10)
    assert ok.status_code == 200


def test_the_431_answer_names_the_limit(bot: BotProcess) -> None:
    with connect(bot) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: beam\r\nX-Pad: " + b"a" * (70 * 1024) + b"\r\n\r\n")
        reader = sock.makefile("rb")
        assert reader.readline().startswith(b"HTTP/1.1 431")
        assert b"64 KB" in reader.read()


ATTACKER = "127.0.0.2"  # a second loopback address: another peer than the genuine sender


def connect_from(bot: BotProcess, source: str) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", bot.port), timeout=15, source_address=(source, 0))
    sock.settimeout(15)
    return sock


def test_an_idle_connection_is_closed_before_the_head_timeout(tmp_path: Path) -> None:
    """Issue 32: a connection that sends nothing is closed after BEAM_IDLE_TIMEOUT, not held for
    the whole time a slow request head may take."""
    with bot_stack(tmp_path, BEAM_IDLE_TIMEOUT="0.5", BEAM_HEADER_TIMEOUT="60") as bot:
        bot.start()
        with connect(bot) as sock:
            assert sock.recv(1024) == b""  # closed by the server, long before our 15 s give up


def test_one_peer_cannot_starve_intake_of_connections_or_bytes(tmp_path: Path) -> None:
    """Issue 32: while one address holds idle connections past its share and three slow 25 MiB
    bodies, deliveries from another address are accepted and /readyz answers."""
    env = {"BEAM_MAX_CONNECTIONS": "40", "BEAM_PEER_SHARE": "0.25", "BEAM_IDLE_TIMEOUT": "60"}
    with bot_stack(tmp_path, **env) as bot:
        bot.start()
        held: list[socket.socket] = []
        try:
            for _ in range(3):  # slow bodies: declared 25 MiB, 1 MiB sent, the rest never
                sock = connect_from(bot, ATTACKER)
                sock.sendall(
                    b"POST /webhooks HTTP/1.1\r\nHost: beam\r\nContent-Type: application/json\r\n"
                    b"X-GitHub-Event: issue_comment\r\nX-GitHub-Delivery: slow\r\n"
                    b"Content-Length: 26214400\r\n\r\n{" + b" " * (1 << 20)
                )
                held.append(sock)
            for _ in range(40):  # as many idle connections as the server takes in all
                held.append(connect_from(bot, ATTACKER))
            # Past its share, the attacker's connections are answered 503 and closed at once.
            refused = held[-1].recv(1024)
            assert refused.startswith(b"HTTP/1.1 503"), refused
            for n in range(5):
                sent = delivery("issue_comment", PR_COMMENT, SECRET, delivery_id=f"genuine-{n}")
                response = bot.send(sent)
                assert response.status_code == 202, response.text
            assert httpx.get(f"{bot.url}/readyz", timeout=10).status_code == 200
        finally:
            for sock in held:
                sock.close()
