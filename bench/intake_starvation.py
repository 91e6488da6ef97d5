"""Benchmark of intake under a starvation attack (issue 32): genuine deliveries' latency with and without it.

One `beam-bot serve` as shipped (uvicorn on uvloop + httptools, SQLite in a fresh work dir, default
limits: 64 MiB of unverified bytes, 1,000 connections, a quarter of each for one address, idle
connections closed after 3 s). Two client processes:

- the attacker, from 127.0.0.2 (its sockets bound to that loopback address): 1,000 idle connections
  and 3 slow bodies that declare 25 MiB and send 64 KB every half second, each reopened as soon as
  the server closes it, for the whole round;
- the genuine sender, from 127.0.0.1: signed 14 KB `issue_comment` deliveries at a fixed rate,
  latency measured from the scheduled send time (a stall is not hidden), one connection per
  delivery as GitHub opens them.

Rounds alternate without and with the attack, after a warm-up. `--unprotected` runs the same
against a server with no share per address and idle connections held for the whole head timeout
(the limits before issue 32, but for the byte budget, which now counts bytes received).
A connection the server closes is reopened 0.1 s later: the attacker holds what it can, it
does not flood. Printed per round: deliveries accepted (202) out of
sent, and p50/p99 latency; then the p99 with the attack over the p99 without it, as a ratio
(docs/performance.md keeps the measured figure).

    .venv/bin/python bench/intake_starvation.py [--seconds 6] [--rate 50] [--rounds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import hmac
import multiprocessing
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAYLOAD = ROOT / "tests" / "data" / "github" / "webhooks" / "issue_comment.created.pull_request.json"
SECRET = "bench-secret-0123456789"
ATTACKER, GENUINE = "127.0.0.2", "127.0.0.1"
IDLE_CONNECTIONS, SLOW_BODIES = 1000, 3


def rsa_pem() -> str:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


class Server:
    """`beam-bot serve` in a fresh work directory, on a free port."""

    def __init__(self, work_dir: Path, **extra_env: str) -> None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        env = {k: v for k, v in os.environ.items() if not k.startswith(("BEAM_", "GFS_BEAM_", "NVIDIA_"))}
        env.update(
            BEAM_APP_ID="1",
            BEAM_PRIVATE_KEY=rsa_pem(),
            BEAM_WEBHOOK_SECRET=SECRET,
            BEAM_WORK_DIR=str(work_dir),
            BEAM_PORT=str(self.port),
            BEAM_GITHUB_API_URL="http://127.0.0.1:9",  # never called: these deliveries need no work
            BEAM_REDELIVERY_INTERVAL="0",
            PYTHONPATH=str(ROOT),
            **extra_env,
        )
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bot.cli", "serve"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.proc.kill()
                    raise SystemExit("beam-bot serve did not start") from None
                time.sleep(0.05)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)


# -- the attacker (a process of its own) ------------------------------------------------------------


async def _open(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
    try:
        return await asyncio.open_connection("127.0.0.1", port, local_addr=(ATTACKER, 0))
    except OSError:
        return None


async def _idle(port: int, stop: float) -> None:
    """One idle connection, reopened whenever the server closes it."""
    while time.monotonic() < stop:
        opened = await _open(port)
        if opened is None:
            await asyncio.sleep(0.05)
            continue
        reader, writer = opened
        with contextlib.suppress(TimeoutError, OSError):
            await asyncio.wait_for(reader.read(), max(0.01, stop - time.monotonic()))
        writer.close()
        await asyncio.sleep(0.1)


async def _slow_body(port: int, stop: float) -> None:
    """A body that declares 25 MiB and trickles 64 KB every half second, reopened when cut off."""
    head = (
        b"POST /webhooks HTTP/1.1\r\nHost: beam\r\nContent-Type: application/json\r\n"
        b"X-GitHub-Event: issue_comment\r\nX-GitHub-Delivery: %s\r\nContent-Length: 26214400\r\n\r\n{"
    )
    while time.monotonic() < stop:
        opened = await _open(port)
        if opened is None:
            await asyncio.sleep(0.05)
            continue
        _, writer = opened
        try:
            writer.write(head % uuid.uuid4().hex.encode())
            while time.monotonic() < stop:
                writer.write(b" " * 65536)
                await writer.drain()
                await asyncio.sleep(0.5)
        except OSError:
            pass
        writer.close()
        await asyncio.sleep(0.1)


def attack(port: int, seconds: float) -> None:
    async def main() -> None:
        stop = time.monotonic() + seconds
        tasks = [_slow_body(port, stop) for _ in range(SLOW_BODIES)]
        tasks += [_idle(port, stop) for _ in range(IDLE_CONNECTIONS)]
        await asyncio.gather(*tasks)

    asyncio.run(main())


# -- the genuine sender -----------------------------------------------------------------------------


async def _deliver(port: int, body: bytes, scheduled: float) -> tuple[int, float]:
    signature = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    head = (
        f"POST /webhooks HTTP/1.1\r\nHost: beam\r\nContent-Type: application/json\r\n"
        f"X-GitHub-Event: issue_comment\r\nX-GitHub-Delivery: {uuid.uuid4()}\r\n"
        f"X-Hub-Signature-256: {signature}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode()
    try:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection("127.0.0.1", port, local_addr=(GENUINE, 0)), 10
        )
        writer.write(head + body)
        status_line = await asyncio.wait_for(reader.readline(), 10)
        writer.close()
        status = int(status_line.split()[1]) if status_line else 0
    except (OSError, TimeoutError, ValueError, IndexError):
        status = 0
    return status, time.monotonic() - scheduled


def genuine(port: int, seconds: float, rate: float) -> tuple[int, int, list[float]]:
    body = PAYLOAD.read_bytes()

    async def main() -> list[tuple[int, float]]:
        start = time.monotonic() + 0.1
        tasks = []
        for n in range(int(seconds * rate)):
            at = start + n / rate
            await asyncio.sleep(max(0.0, at - time.monotonic()))
            tasks.append(asyncio.create_task(_deliver(port, body, at)))
        return list(await asyncio.gather(*tasks))

    results = asyncio.run(main())
    accepted = [latency for status, latency in results if status == 202]
    return len(accepted), len(results), accepted


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--rate", type=float, default=50.0, help="genuine deliveries per second")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--unprotected",
        action="store_true",
        help="no share per address and idle connections held for the head timeout (as before issue 32)",
    )
    args = parser.parse_args()
    extra = {"BEAM_PEER_SHARE": "1", "BEAM_IDLE_TIMEOUT": "10"} if args.unprotected else {}
    p99: dict[str, list[float]] = {"quiet": [], "attack": []}
    with tempfile.TemporaryDirectory(prefix="beam-starve-") as tmp:
        server = Server(Path(tmp) / "work", **extra)
        try:
            genuine(server.port, 2.0, args.rate)  # warm-up, not counted
            for round_ in range(args.rounds):
                for mode in ("quiet", "attack"):
                    attacker = None
                    if mode == "attack":
                        attacker = multiprocessing.Process(
                            target=attack, args=(server.port, args.seconds + 4)
                        )
                        attacker.start()
                        time.sleep(2.0)  # the idle connections and slow bodies are in place
                    accepted, sent, latencies = genuine(server.port, args.seconds, args.rate)
                    if attacker is not None:
                        attacker.join(30)
                    p99[mode].append(percentile(latencies, 0.99))
                    p50 = percentile(latencies, 0.5)
                    print(
                        f"round {round_ + 1} {mode:>6}: {accepted}/{sent} accepted, "
                        f"p50 {p50 * 1000:.1f} ms, p99 {p99[mode][-1] * 1000:.1f} ms"
                    )
                    time.sleep(4.0)  # the server closes what the attacker left
        finally:
            server.stop()
    quiet, attacked = statistics.median(p99["quiet"]), statistics.median(p99["attack"])
    print(
        f"p99 without the attack {quiet * 1000:.1f} ms, with it {attacked * 1000:.1f} ms: "
        f"{attacked / quiet:.2f}x"
    )


if __name__ == "__main__":
    main()
