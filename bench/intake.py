"""Benchmark of POST /webhooks: `beam-bot serve` as shipped (with its workers) against a bare endpoint.

Servers, each a subprocess pinned to the same single core: `python -m bot.cli serve` exactly as an
operator runs it (uvicorn on uvloop + httptools, SQLite in a fresh work dir, the worker pool running),
and a bare Starlette endpoint that reads the body and checks the HMAC signature, on the same uvicorn
stack. A third, serve with BEAM_KEEP_IGNORED_PAYLOADS=true, shows what keeping every body costs. The
load runs on the other core. Every delivery is the signed 14 KB `issue_comment` example
(a comment without a command: it needs no work), each with its own delivery id.

1. Throughput: `wrk` (16 connections, a Lua script adds the delivery id), rounds interleaved.
   Target: serve >= 0.5x the bare endpoint.
2. Latency at a fixed 1,000 deliveries/s (an asyncio client in its own process that sends on a
   schedule and measures from the scheduled time, so a stall is not hidden). Target: p99 <= 10 ms.
3. Group commit: serve with batching off (one transaction per delivery) against serve as shipped,
   at 1,000/s and at 10/s.
4. Memory: RSS of serve idle after start, and after every delivery above (> 10,000). Target < 120 MB,
   flat.

    .venv/bin/python bench/intake.py [--seconds 5] [--rounds 3]

Needs `wrk` on PATH (apt-get install wrk). Stops by itself.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import hmac
import json
import os
import re
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
SERVER_CPU, LOAD_CPU = 1, 0

LUA = """
local counter = 0
local prefix = ""
function setup(thread)
  thread:set("tid", tostring(math.random(1, 1e9)))
end
function init(args)
  prefix = args[1] .. "-" .. tid .. "-"
end
request = function()
  counter = counter + 1
  wrk.headers["X-GitHub-Delivery"] = prefix .. counter
  return wrk.format()
end
"""


# -- servers (child processes) ----------------------------------------------------------------------


def serve_baseline(port: int) -> None:
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    key = SECRET.encode()

    async def webhooks(request: Request) -> Response:
        body = await request.body()
        expected = "sha256=" + hmac.new(key, body, hashlib.sha256).hexdigest()
        if not hmac.compare_digest(expected, request.headers.get("x-hub-signature-256", "")):
            return JSONResponse({"error": "signature"}, status_code=401)
        return JSONResponse({"status": "accepted"}, status_code=202)

    app = Starlette(routes=[Route("/webhooks", webhooks, methods=["POST"])])
    uvicorn.run(
        app,
        host="127.0.0.1",
        port=port,
        loop="uvloop",
        http="httptools",
        access_log=False,
        log_level="warning",
        server_header=False,
    )


def serve_unbatched() -> None:
    """`beam-bot serve` with intake's group commit off: one transaction per delivery."""
    from bot.app.jobs import group_commit
    from bot.cli import main as cli_main

    original = group_commit.IntakeBatcher.__init__

    def one_at_a_time(self: group_commit.IntakeBatcher, write: object, max_batch: int = 200) -> None:
        original(self, write, 1)  # type: ignore[arg-type]

    group_commit.IntakeBatcher.__init__ = one_at_a_time  # type: ignore[method-assign]
    sys.argv = ["beam-bot", "serve"]
    cli_main()


def rsa_pem() -> str:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


class Server:
    def __init__(self, kind: str, work_dir: Path, pem: str, **extra_env: str) -> None:
        self.kind = kind
        self.work_dir = work_dir
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        env = {k: v for k, v in os.environ.items() if not k.startswith(("BEAM_", "GFS_BEAM_", "NVIDIA_"))}
        env.update(
            BEAM_APP_ID="1",
            BEAM_PRIVATE_KEY=pem,
            BEAM_WEBHOOK_SECRET=SECRET,
            BEAM_WORK_DIR=str(work_dir),
            BEAM_PORT=str(self.port),
            BEAM_GITHUB_API_URL="http://127.0.0.1:9",  # never called: no delivery here needs work
            PYTHONPATH=str(ROOT),
            **extra_env,
        )
        if kind in ("serve", "keeping"):
            command = [sys.executable, "-m", "bot.cli", "serve"]
        else:
            command = [sys.executable, __file__, f"--{kind}", str(self.port)]
        self.proc = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        os.sched_setaffinity(self.proc.pid, {SERVER_CPU})
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.proc.kill()
                    raise SystemExit(f"the {kind} server did not start") from None
                time.sleep(0.05)

    def rss_mb(self) -> float:
        status = Path(f"/proc/{self.proc.pid}/status").read_text()
        return int(re.search(r"VmRSS:\s+(\d+)", status).group(1)) / 1024  # type: ignore[union-attr]

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)

    def stored(self) -> tuple[int, int]:
        with sqlite3.connect(self.work_dir / "beam.db") as db:
            deliveries = db.execute("SELECT count(*) FROM deliveries").fetchone()[0]
            jobs = db.execute("SELECT count(*) FROM jobs").fetchone()[0]
        return int(deliveries), int(jobs)


# -- load -------------------------------------------------------------------------------------------


def wrk(port: int, seconds: float, script: Path, body_path: Path) -> tuple[float, int, int]:
    """Requests/s, completed requests, non-2xx responses."""
    out = subprocess.run(
        [
            "taskset",
            "-c",
            str(LOAD_CPU),
            "wrk",
            "-t1",
            "-c16",
            f"-d{seconds:g}s",
            "-s",
            str(script),
            f"http://127.0.0.1:{port}/webhooks",
            "--",
            uuid.uuid4().hex[:8],
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=seconds + 60,
    ).stdout
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    done = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return rate, done, int(bad.group(1)) if bad else 0


def write_wrk_script(tmp: Path, body: bytes) -> Path:
    signature = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    body_path = tmp / "body.json"
    body_path.write_bytes(body)
    head = (
        f'wrk.method = "POST"\nwrk.body = io.open("{body_path}", "rb"):read("*a")\n'
        'wrk.headers["Content-Type"] = "application/json"\n'
        'wrk.headers["X-GitHub-Event"] = "issue_comment"\n'
        f'wrk.headers["X-Hub-Signature-256"] = "{signature}"\n'
    )
    script = tmp / "signed.lua"
    script.write_text(head + LUA)
    return script


def fixed_rate(port: int, rate: float, seconds: float) -> list[float]:
    """Run the scheduled client in its own process on the load core; latencies in seconds."""
    out = subprocess.run(
        [
            "taskset",
            "-c",
            str(LOAD_CPU),
            sys.executable,
            __file__,
            "--client",
            str(port),
            str(rate),
            str(seconds),
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=seconds + 120,
    ).stdout
    return [float(x) for x in json.loads(out)]


async def scheduled_client(port: int, rate: float, seconds: float) -> list[float]:
    body = PAYLOAD.read_bytes()
    signature = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    head = (
        f"POST /webhooks HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nX-GitHub-Event: issue_comment\r\n"
        f"X-Hub-Signature-256: {signature}\r\n"
    )
    free: asyncio.Queue[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = asyncio.Queue()
    for _ in range(16):
        free.put_nowait(await asyncio.open_connection("127.0.0.1", port))
    latencies: list[float] = []
    prefix = uuid.uuid4().hex[:8]

    async def one(n: int, due: float) -> None:
        reader, writer = await free.get()
        writer.write(f"{head}X-GitHub-Delivery: {prefix}-{n}\r\n\r\n".encode() + body)
        response = await reader.readuntil(b"\r\n\r\n")
        length = int(re.search(rb"(?i)content-length: (\d+)", response).group(1))  # type: ignore[union-attr]
        await reader.readexactly(length)
        latencies.append(time.perf_counter() - due)
        if not response.startswith(b"HTTP/1.1 202"):
            raise SystemExit(response.decode(errors="replace"))
        free.put_nowait((reader, writer))

    tasks = []
    start = time.perf_counter() + 0.05
    for n in range(int(rate * seconds)):
        due = start + n / rate
        delay = due - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(n, due)))
    await asyncio.gather(*tasks)
    return latencies


def quantile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=1000, method="inclusive")[int(q * 1000) - 1]


# -- main -------------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--baseline", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--unbatched", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--client", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.baseline:
        serve_baseline(args.baseline)
        return
    if args.unbatched:
        serve_unbatched()
        return
    if args.client:
        port, rate, seconds = int(args.client[0]), float(args.client[1]), float(args.client[2])
        import uvloop

        print(json.dumps(uvloop.run(scheduled_client(port, rate, seconds))))
        return

    body = PAYLOAD.read_bytes()
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        "?",
    )
    print(
        f"POST /webhooks, {len(body)} B issue_comment without a command, servers pinned to one core, "
        f"load on another; nproc {os.cpu_count()}, {cpu}"
    )
    pem = rsa_pem()
    with tempfile.TemporaryDirectory(prefix="beam-bench-intake-") as tmp_name:
        tmp = Path(tmp_name)
        script = write_wrk_script(tmp, body)
        servers = {
            "baseline": Server("baseline", tmp / "baseline", pem),
            "serve": Server("serve", tmp / "serve", pem),
        }
        # The same serve, told to keep the bodies of deliveries that need no work (off by default).
        keeping = Server("keeping", tmp / "keeping", pem, BEAM_KEEP_IGNORED_PAYLOADS="true")
        time.sleep(1.0)
        idle_rss = servers["serve"].rss_mb()
        acked = 0
        try:
            # 1. Throughput, interleaved rounds.
            rates: dict[str, list[float]] = {"baseline": [], "serve": [], "keeping": []}
            for server in (*servers.values(), keeping):  # warm-up
                wrk(server.port, 1, script, tmp / "body.json")
            for _ in range(args.rounds):
                for kind, server in (*servers.items(), ("keeping", keeping)):
                    rate, done, bad = wrk(server.port, args.seconds, script, tmp / "body.json")
                    if bad:
                        raise SystemExit(f"{kind}: {bad} responses were not 2xx")
                    rates[kind].append(rate)
                    acked += done if kind == "serve" else 0
            base, full = statistics.median(rates["baseline"]), statistics.median(rates["serve"])
            print(f"  throughput (wrk, 16 connections, {args.rounds} x {args.seconds:g} s each):")
            print(f"    bare Starlette HMAC endpoint   {base:8.0f} deliveries/s")
            print(f"    beam-bot serve with workers    {full:8.0f} deliveries/s")
            kept = statistics.median(rates["keeping"])
            print(f"    serve keeping ignored bodies   {kept:8.0f} deliveries/s ({kept / base:.2f}x)")
            print(f"    ratio serve/bare: {full / base:.2f}x (target >= 0.5x)")

            # 2. Fixed 1,000/s, interleaved.
            lat: dict[str, list[float]] = {"baseline": [], "serve": []}
            for _ in range(2):
                for kind, server in servers.items():
                    got = fixed_rate(server.port, 1000, args.seconds)
                    lat[kind].extend(got)
                    acked += len(got) if kind == "serve" else 0
            print(f"  latency at a fixed 1,000 deliveries/s (2 x {args.seconds:g} s each):")
            for kind, label in (
                ("baseline", "bare Starlette HMAC endpoint"),
                ("serve", "beam-bot serve with workers"),
            ):
                p50, p99 = quantile(lat[kind], 0.5) * 1e3, quantile(lat[kind], 0.99) * 1e3
                print(f"    {label:30s} p50 {p50:6.2f} ms   p99 {p99:6.2f} ms")
            print(f"    serve p99 {quantile(lat['serve'], 0.99) * 1e3:.2f} ms (target <= 10 ms)")
            busy_rss = servers["serve"].rss_mb()
        finally:
            for server in (*servers.values(), keeping):
                server.stop()
        stored, jobs = servers["serve"].stored()
        print(
            f"  memory of serve: idle {idle_rss:.0f} MB, after {stored:,} deliveries {busy_rss:.0f} MB "
            f"({busy_rss / idle_rss:.2f}x; target < 120 MB idle, flat)"
        )
        print(f"  stored: {stored:,} deliveries ({acked:,} acknowledged and counted), {jobs} jobs")
        if stored < acked or jobs:
            raise SystemExit("deliveries were lost, or a delivery without work made a job")

        # 3. Group commit on and off, at 1,000/s and 10/s.
        print("  group commit (serve as shipped against one transaction per delivery):")
        pair = {
            "batched": Server("serve", tmp / "batched", pem),
            "unbatched": Server("unbatched", tmp / "unbatched", pem),
        }
        try:
            for rate, seconds in ((1000, args.seconds), (10, max(args.seconds, 10.0))):
                got: dict[str, list[float]] = {"batched": [], "unbatched": []}
                for _ in range(2):
                    for kind, server in pair.items():
                        got[kind].extend(fixed_rate(server.port, rate, seconds))
                line = ", ".join(
                    f"{kind} p50 {quantile(v, 0.5) * 1e3:.2f} ms p99 {quantile(v, 0.99) * 1e3:.2f} ms"
                    for kind, v in got.items()
                )
                print(f"    {rate:>5}/s: {line}")
        finally:
            for server in pair.values():
                server.stop()


if __name__ == "__main__":
    main()
