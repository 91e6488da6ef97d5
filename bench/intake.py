"""Benchmark of POST /webhooks: signature check + durable SQLite insert, against a bare signed endpoint.

Starts two real uvicorn servers on loopback, each in its own process (access log off, as `serve`
runs it): beam-bot's app (`create_app`, a fresh SQLite database in a temporary work directory) and a
minimal Starlette endpoint that only reads the body and verifies the signature. Then sends the same
signed 14 KB `issue_comment` delivery (each with its own delivery id) over keep-alive connections
from a small raw-socket client, a bounded number of requests per round, and prints deliveries per
second and p50/p99 latency of each, and their ratio. Stops by itself.

    .venv/bin/python bench/intake.py [--requests 3000] [--concurrency 16] [--rounds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import hmac
import os
import socket
import sqlite3
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


# -- servers (run in child processes) -----------------------------------------------------------------


def baseline_app():  # type: ignore[no-untyped-def]
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    key = SECRET.encode()

    async def webhooks(request):  # type: ignore[no-untyped-def]
        body = await request.body()
        expected = "sha256=" + hmac.new(key, body, hashlib.sha256).hexdigest()
        if not hmac.compare_digest(expected, request.headers.get("x-hub-signature-256", "")):
            return JSONResponse({"error": "signature"}, status_code=401)
        return JSONResponse({"status": "accepted"}, status_code=202)

    return Starlette(routes=[Route("/webhooks", webhooks, methods=["POST"])])


def full_app(work_dir: str):  # type: ignore[no-untyped-def]
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    from bot.app.settings import Settings
    from bot.app.web.app import create_app
    from bot.app.web.server import configure_logging

    pem = (
        rsa.generate_private_key(public_exponent=65537, key_size=2048)
        .private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        .decode()
    )
    configure_logging()  # one log line per delivery, as in production (stderr goes to /dev/null)
    settings = Settings(
        _env_file=None, work_dir=Path(work_dir), app_id=1, private_key=pem, webhook_secret=SECRET
    )
    return create_app(settings)


def serve(kind: str, port: int, work_dir: str) -> None:
    import uvicorn

    app = baseline_app() if kind == "baseline" else full_app(work_dir)
    uvicorn.run(app, host="127.0.0.1", port=port, access_log=False, log_level="warning", lifespan="on")


def start(kind: str, work_dir: str) -> tuple[subprocess.Popen[bytes], int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, __file__, "--serve", kind, "--port", str(port), "--work-dir", work_dir],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc, port
        except OSError:
            if proc.poll() is not None:
                raise SystemExit(f"the {kind} server exited with {proc.returncode}") from None
            time.sleep(0.05)
    proc.kill()
    raise SystemExit(f"the {kind} server did not start")


# -- load -------------------------------------------------------------------------------------------


def request_bytes(body: bytes, port: int) -> bytes:
    head = (
        f"POST /webhooks HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nX-GitHub-Event: issue_comment\r\n"
        f"X-GitHub-Delivery: {uuid.uuid4()}\r\n"
        f"X-Hub-Signature-256: sha256={hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()}\r\n\r\n"
    )
    return head.encode() + body


async def one_connection(port: int, requests: list[bytes], latencies: list[float]) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        for raw in requests:
            started = time.perf_counter()
            writer.write(raw)
            head = await reader.readuntil(b"\r\n\r\n")
            status = int(head.split(b" ", 2)[1])
            length = next(
                int(line.split(b":", 1)[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            )
            await reader.readexactly(length)
            latencies.append(time.perf_counter() - started)
            if status != 202:
                raise SystemExit(f"unexpected status {status}")
    finally:
        writer.close()
        await writer.wait_closed()


async def load(port: int, body: bytes, total: int, concurrency: int) -> tuple[float, list[float]]:
    per_connection = [
        [request_bytes(body, port) for _ in range(total // concurrency)] for _ in range(concurrency)
    ]
    latencies: list[float] = []
    started = time.perf_counter()
    await asyncio.gather(*(one_connection(port, reqs, latencies) for reqs in per_connection))
    elapsed = time.perf_counter() - started
    return len(latencies) / elapsed, latencies


def quantile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[int(q * 100) - 1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--serve", choices=["baseline", "full"])
    parser.add_argument("--port", type=int)
    parser.add_argument("--work-dir")
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.port, args.work_dir)
        return

    body = PAYLOAD.read_bytes()
    results: dict[str, list[tuple[float, list[float]]]] = {"baseline": [], "full": []}
    sent = 0
    with tempfile.TemporaryDirectory(prefix="beam-bench-") as work_dir:
        procs = {kind: start(kind, work_dir) for kind in ("baseline", "full")}
        try:
            for kind, (_, port) in procs.items():
                asyncio.run(load(port, body, 400, args.concurrency))  # warm-up
                sent += 400 if kind == "full" else 0
            for _ in range(args.rounds):  # alternate, so a noisy neighbour hurts both alike
                for kind, (_, port) in procs.items():
                    results[kind].append(asyncio.run(load(port, body, args.requests, args.concurrency)))
                    if kind == "full":
                        sent += len(results[kind][-1][1])
        finally:
            for proc, _ in procs.values():
                proc.terminate()
                proc.wait(10)
        with sqlite3.connect(Path(work_dir) / "beam.db") as db:
            stored = db.execute("SELECT count(*) FROM deliveries").fetchone()[0]
            jobs = db.execute("SELECT count(*) FROM jobs").fetchone()[0]

    print(
        f"POST /webhooks, {len(body)} B payload, {args.concurrency} keep-alive connections, "
        f"{args.rounds} x {args.requests} requests each, cpu count {os.cpu_count()}"
    )
    summary = {}
    for kind, label in (("baseline", "signature only (baseline)"), ("full", "beam-bot intake + SQLite")):
        rate = statistics.median(r for r, _ in results[kind])
        lat = [x for _, lats in results[kind] for x in lats]
        p50, p99 = quantile(lat, 0.50) * 1000, quantile(lat, 0.99) * 1000
        summary[kind] = (rate, p50, p99)
        print(f"  {label:28s} {rate:8.0f} deliveries/s   p50 {p50:6.2f} ms   p99 {p99:6.2f} ms")
    base, full = summary["baseline"], summary["full"]
    print(
        f"  ratio full/baseline: throughput {full[0] / base[0]:.2f}x, p50 {full[1] / base[1]:.2f}x, "
        f"p99 {full[2] / base[2]:.2f}x"
    )
    print(f"  stored: {stored} deliveries and {jobs} jobs for {sent} sent")
    if stored != sent or jobs != sent:
        raise SystemExit("deliveries were lost")


if __name__ == "__main__":
    main()
