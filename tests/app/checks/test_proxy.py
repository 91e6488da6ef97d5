"""The setup's only network: the allowlisting proxy (unit and over its real Unix socket), and
`checks_setup` installing from a package index on loopback through it, in the real jail."""

from __future__ import annotations

import asyncio
import base64
import functools
import hashlib
import http.server
import os
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.app.checks.jail import CheckSpec, JailLimits, run_checks
from bot.app.checks.proxy import AllowlistProxy, allowed
from tests.app.checks.test_jail_support import MODE, make_tree, need_jail, run_checks_as

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("host", "port", "ok"),
    [
        ("pypi.org", 443, True),
        ("PyPI.org.", 80, True),
        ("pypi.org", 8443, False),
        ("evil-pypi.org", 443, False),
        ("files.pythonhosted.org", 443, True),
        ("a.b.pythonhosted.org", 443, True),
        ("pythonhosted.org", 443, False),
        ("127.0.0.1", 8080, True),
        ("127.0.0.1", 5432, False),
        ("localhost", 8080, False),
    ],
)
def test_the_allowlist(host: str, port: int, ok: bool) -> None:
    assert allowed(host, port, ["pypi.org", "*.pythonhosted.org", "127.0.0.1:8080"]) is ok


def _wheel(root: Path) -> Path:
    """A one-module wheel, built by hand (a zip with its dist-info), so no build tool is needed."""
    files = {
        "tinypkg/__init__.py": b"X = 'installed through the proxy'\n",
        "tinypkg-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: tinypkg\nVersion: 1.0\n",
        "tinypkg-1.0.dist-info/WHEEL": (
            b"Wheel-Version: 1.0\nGenerator: beam-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }
    record = []
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
    record.append("tinypkg-1.0.dist-info/RECORD,,")
    path = root / "tinypkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as whl:
        for name, data in files.items():
            whl.writestr(name, data)
        whl.writestr("tinypkg-1.0.dist-info/RECORD", "\n".join(record) + "\n")
    return path


@pytest.fixture
def index(tmp_path: Path) -> Iterator[int]:
    """A PEP 503 index with tinypkg, served on loopback; yields its port."""
    root = tmp_path / "index"
    (root / "simple" / "tinypkg").mkdir(parents=True)
    wheel = _wheel(root)
    (root / "simple" / "index.html").write_text('<a href="tinypkg/">tinypkg</a>\n')
    link = f'<a href="../../{wheel.name}">{wheel.name}</a>\n'
    (root / "simple" / "tinypkg" / "index.html").write_text(link)
    handler = functools.partial(_QuietHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


async def _ask(sock: Path, request: bytes) -> bytes:
    reader, writer = await asyncio.open_unix_connection(str(sock))
    writer.write(request)
    await writer.drain()
    data = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    return data


async def test_the_proxy_forwards_allowed_requests_and_refuses_the_rest(tmp_path: Path, index: int) -> None:
    proxy = AllowlistProxy([f"127.0.0.1:{index}"])
    sock = tmp_path / "proxy.sock"
    await proxy.start(sock)
    try:
        ok = await _ask(sock, f"GET http://127.0.0.1:{index}/simple/ HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        assert ok.startswith(b"HTTP/1.0 200") and b"tinypkg" in ok
        tunnel = await _ask(
            sock,
            f"CONNECT 127.0.0.1:{index} HTTP/1.1\r\n\r\nGET /simple/ HTTP/1.0\r\n\r\n".encode(),
        )
        assert tunnel.startswith(b"HTTP/1.1 200 Connection established") and b"tinypkg" in tunnel
        for request in (
            b"CONNECT 127.0.0.1:5432 HTTP/1.1\r\n\r\n",
            b"GET http://example.org/ HTTP/1.1\r\n\r\n",
            f"GET http://localhost:{index}/ HTTP/1.1\r\n\r\n".encode(),
        ):
            refused = await _ask(sock, request)
            assert refused.startswith(b"HTTP/1.1 403"), refused
            assert b"BEAM_CHECKS_ALLOWED_HOSTS" in refused
        assert (await _ask(sock, b"GET /relative HTTP/1.1\r\n\r\n")).startswith(b"HTTP/1.1 400")
        assert proxy.refused == ["127.0.0.1:5432", "example.org:80", f"localhost:{index}"]
    finally:
        await proxy.close()


_PIP = (
    "python -m pip install -q --retries 0 --timeout 5 --no-cache-dir"
    " --index-url http://127.0.0.1:{port}/simple/ tinypkg"
)
_USE = CheckSpec("uses-it", "python -c 'import tinypkg; print(tinypkg.X)'")


async def test_setup_installs_from_an_allowed_index_and_the_checks_use_it(tmp_path: Path, index: int) -> None:
    need_jail()
    outcomes = await run_checks(
        make_tree(tmp_path),
        [_USE, CheckSpec("read-only", "! touch /deps/x 2>/dev/null")],
        limits=JailLimits(timeout_s=120),
        setup=_PIP.format(port=index),
        allowed_hosts=[f"127.0.0.1:{index}"],
        scratch=tmp_path / "scratch",
    )
    assert [(o.name, o.status) for o in outcomes] == [
        ("setup", "passed"),
        ("uses-it", "passed"),
        ("read-only", "passed"),
    ], outcomes
    assert "installed through the proxy" in outcomes[1].output_tail
    assert not (tmp_path / "scratch" / "deps").exists()  # removed once the checks are done


async def test_setup_reaches_no_host_outside_the_allowlist(tmp_path: Path, index: int) -> None:
    need_jail()
    url = f"http://127.0.0.1:{index}/simple/"
    outcomes = await run_checks(
        make_tree(tmp_path),
        [_USE],
        limits=JailLimits(timeout_s=120),
        setup=_PIP.format(port=index) + f" || python -c \"import urllib.request as u; u.urlopen('{url}')\"",
        allowed_hosts=["pypi.org"],
        scratch=tmp_path / "scratch",
    )
    assert [(o.name, o.status) for o in outcomes] == [("setup", "failed")], outcomes
    assert "HTTP Error 403: Forbidden" in outcomes[0].output_tail


async def test_setup_without_allowed_hosts_has_no_network_at_all(tmp_path: Path, index: int) -> None:
    need_jail()
    probe = (
        "python -c \"import socket\ntry:\n socket.create_connection(('127.0.0.1', {port}), 3)\n"
        "except OSError: print('NO-NETWORK'); raise SystemExit(1)\""
    )
    outcomes = await run_checks(
        make_tree(tmp_path),
        [_USE],
        limits=JailLimits(timeout_s=60),
        setup=probe.format(port=index),
        scratch=tmp_path / "scratch",
    )
    assert [(o.name, o.status) for o in outcomes] == [("setup", "failed")]
    assert "NO-NETWORK" in outcomes[0].output_tail


# Four processes of the setup open 150 connections each straight to the proxy's socket and hold them.
# The first waits for the other three: when it exits, the jail's namespace ends and takes them with it,
# maybe before they print.
_FLOOD = (
    'python3 -c "\nimport os, socket, time\nheld, kids = [], []\nfor _ in range(3):\n'
    "    pid = os.fork()\n    if pid == 0:\n        kids = []\n        break\n    kids.append(pid)\n"
    "for _ in range(150):\n    s = socket.socket(socket.AF_UNIX)\n    s.connect('/beam/proxy.sock')\n"
    "    held.append(s)\ntime.sleep(2)\nprint('HELD', len(held), flush=True)\n"
    'for pid in kids: os.waitpid(pid, 0)"'
)


async def test_a_setup_cannot_flood_the_proxy_into_the_bots_descriptors(
    tmp_path: Path, index: int, jail_mode: str
) -> None:
    """Issue 27: setup code opened connections until the bot ran out of file descriptors (then it
    could not open files or sockets or spawn git). The proxy holds 64 and refuses the rest."""
    before = len(os.listdir("/proc/self/fd"))

    async def flood(name: str, weaken: frozenset[str]) -> int:
        outcomes = await run_checks_as(
            make_tree(tmp_path / name),
            [],
            limits=JailLimits(timeout_s=60, open_files=256),
            setup=_FLOOD,
            allowed_hosts=[f"127.0.0.1:{index}"],
            scratch=tmp_path / name / "scratch",
            weaken=weaken,
        )
        assert outcomes[0].output_tail.count("HELD 150") == 4, outcomes[0].output_tail
        return MODE.peak_fds

    capped = await flood("capped", frozenset())
    uncapped = await flood("uncapped", frozenset({"proxy-cap"}))  # proof: every connection is held
    baseline = before if jail_mode == "root" else 0
    assert capped - baseline < 64 * 2 + 40, (capped, baseline)
    assert uncapped - baseline > 500, (uncapped, baseline)
