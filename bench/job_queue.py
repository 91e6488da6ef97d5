"""Benchmark of the job queue: claim cost against backlog size, and no-op job throughput.

Three measurements, each printed with its ratio against a baseline measured in the same run:

1. Claim cost at 50,000 queued against 100 queued (target <= 1.5x), on SQLite and, with `--postgres`
   (or BEAM_TEST_POSTGRES_URL), on PostgreSQL. Each size is a fresh database filled in bulk; claims
   (`JobQueue.claim` as workers call it, then `complete`) alternate between the two sizes.
2. No-op jobs per second on SQLite, one process, the worker pool as `serve` runs it (concurrency 2),
   against the target of 1,000 jobs/s.
3. On PostgreSQL, more worker processes against one, draining the same backlog, timed from a common
   start once every process is connected to the last job done. No-op jobs with 1 and 2 processes
   (target >= 1.5x) measure the per-job cost; it also prints how many cores one process and its
   database keep busy: on a machine with C cores, no number of processes can pass C / that, so on
   2 cores the no-op ratio says as much about the machine as about the queue. Jobs that wait 5 ms on
   I/O (as a call to GitHub would) with 1, 2 and 4 processes (targets >= 1.8x and >= 3x), on one
   host and then spread over network namespaces as hosts (issue 23; skipped, with the reason, where
   namespaces cannot be made: it needs root and iproute2).

    .venv/bin/python bench/job_queue.py [--postgres URL] [--claims 400] [--jobs 5000] [--pg-jobs 15000]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import anyio
from sqlalchemy import create_engine, insert, select
from sqlalchemy.engine import make_url

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.queue_placement import Spread, postgres_cpu_seconds  # noqa: E402
from bot.app.jobs.queue import Job, JobQueue  # noqa: E402
from bot.app.jobs.schema import jobs, queued_job  # noqa: E402
from bot.app.jobs.store import Store  # noqa: E402
from bot.app.jobs.workers import WorkerPool  # noqa: E402

SMALL, LARGE = 100, 50_000


def fill(url: str, count: int, *, keyed: bool = True) -> None:
    """`count` queued jobs, each for its own pull request, inserted in bulk with a sync engine."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        anyio.run(_fill_async, url, count, keyed)
        return
    engine = create_engine(parsed.set(drivername="sqlite"))
    with engine.begin() as conn:
        conn.execute(insert(jobs), _rows(count, keyed))
    engine.dispose()


async def _fill_async(url: str, count: int, keyed: bool) -> None:
    store = await Store.open(url)
    try:
        async with store.write() as conn:
            for start in range(0, count, 5000):
                await conn.execute(insert(jobs), _rows(min(5000, count - start), keyed, start))
    finally:
        await store.close()


def _rows(count: int, keyed: bool, start: int = 0) -> list[dict[str, Any]]:
    now = time.time() - 1
    return [queued_job("noop", f"o/r#{start + i}" if keyed else None, now) for i in range(count)]


# -- 1. claim cost against backlog size -------------------------------------------------------------


async def claim_costs(urls: dict[int, str], claims: int, rounds: int) -> dict[int, list[float]]:
    stores = {size: await Store.open(url) for size, url in urls.items()}
    per_claim: dict[int, list[float]] = {size: [] for size in urls}
    try:
        queues = {size: JobQueue(store) for size, store in stores.items()}
        for queue in queues.values():  # warm-up: connections, statement caches
            await _claims(queue, 20)
        for _ in range(rounds):
            for size, queue in queues.items():
                per_claim[size].extend(await _claims(queue, claims // rounds))
    finally:
        for store in stores.values():
            await store.close()
    return per_claim


async def _claims(queue: JobQueue, count: int) -> list[float]:
    times = []
    for _ in range(count):
        started = time.perf_counter()
        job = await queue.claim("bench", 60)
        times.append(time.perf_counter() - started)
        if job is None:
            raise SystemExit("the backlog ran out: fill more jobs")
        await queue.complete(job)
    return times


def claim_scaling(label: str, make_url_for: Any, claims: int) -> float:
    urls = {size: make_url_for(size) for size in (SMALL, LARGE)}
    for size, url in urls.items():
        anyio.run(_create, url)
        fill(url, size + claims + 40)
    per_claim = anyio.run(claim_costs, urls, claims, 4)
    small, large = (statistics.median(per_claim[s]) * 1e3 for s in (SMALL, LARGE))
    ratio = large / small
    print(
        f"  {label:10s} claim+index probe at {SMALL:>6,} queued {small:6.3f} ms, at {LARGE:,} queued "
        f"{large:6.3f} ms: ratio {ratio:.2f}x (target <= 1.5x)"
    )
    return ratio


async def _create(url: str) -> None:
    store = await Store.open(url)
    await store.close()


# -- 2. no-op throughput ----------------------------------------------------------------------------


async def drain(url: str, total: int, concurrency: int) -> float:
    """Run a worker pool with a no-op handler until `total` jobs are done; return jobs/s."""
    store = await Store.open(url)
    done = 0
    finished = anyio.Event()

    async def handler(job: Job) -> None:
        nonlocal done
        done += 1
        if done >= total:
            finished.set()

    try:
        pool = WorkerPool(JobQueue(store), handler, concurrency=concurrency, poll_interval=0.05)
        started = time.perf_counter()
        async with anyio.create_task_group() as tg:
            tg.start_soon(pool.run)
            with anyio.fail_after(300):
                await finished.wait()
            pool.stop()
        elapsed = time.perf_counter() - started
    finally:
        await store.close()
    return total / elapsed


def sqlite_throughput(tmp: Path, total: int) -> float:
    rates = []
    for run in range(2):
        url = f"sqlite+aiosqlite:///{tmp / f'throughput-{run}.db'}"
        anyio.run(_create, url)
        fill(url, total, keyed=True)
        rates.append(anyio.run(drain, url, total, 2))
    rate = statistics.median(rates)
    print(
        f"  sqlite     no-op jobs, one process, concurrency 2: {rate:7.0f} jobs/s "
        f"({rate / 1000:.2f}x the target of 1,000)"
    )
    return rate


# -- 3. PostgreSQL: two worker processes against one ------------------------------------------------


def worker_process(url: str, seconds: float, wait: float = 0.0) -> None:
    """Child: drain no-op jobs for at most `seconds`; print how many this process finished and the
    wall-clock time of its last one (the parent times the drain to the last job, not to the idle
    wait that tells a child the queue is empty)."""

    async def main() -> None:
        store = await Store.open(url)
        count, last = 0, 0.0

        async def handler(job: Job) -> None:
            nonlocal count, last
            if wait:
                await anyio.sleep(wait)
            count += 1
            last = time.time()

        pool = WorkerPool(JobQueue(store), handler, concurrency=2, poll_interval=0.05)
        await _queued(store)  # the connection is open and the statements are warm
        print("ready", flush=True)
        await anyio.to_thread.run_sync(sys.stdin.readline)  # the parent's "go": all start together
        cpu_at_go = time.process_time()  # start-up (imports, connecting) is not the jobs' cost
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(pool.run)
                # Stop once the queue stays empty (the other process may still be finishing).
                idle_since: float | None = None
                deadline = time.monotonic() + seconds
                while time.monotonic() < deadline:
                    await anyio.sleep(0.05)
                    if pool.stats.in_flight == 0 and not await _queued(store):
                        idle_since = idle_since or time.monotonic()
                        if time.monotonic() - idle_since > 0.2:
                            break
                    else:
                        idle_since = None
                pool.stop()
        finally:
            await store.close()
        print(count, last, time.process_time() - cpu_at_go, flush=True)

    anyio.run(main)


async def _queued(store: Store) -> int:
    """1 while a job is queued, else 0: one index probe (the /metrics counts, by state over every
    job, cost the database more than the jobs did at 20 polls a second)."""
    probe = select(jobs.c.id).where(jobs.c.state == "queued").limit(1)
    async with store.read() as conn:
        return 0 if (await conn.execute(probe)).first() is None else 1


def pg_processes(
    make_url_for: Any, total: int, wait: float = 0.0, counts: tuple[int, ...] = (1, 2), hosts: Any = None
) -> dict[int, float]:
    """Jobs/s for each number of worker processes in `counts`, the median of two runs; with `hosts`
    (a `Spread`), process i runs on namespaced host i mod n and reaches the database over its veth."""
    rates: dict[int, list[float]] = {n: [] for n in counts}
    busy: dict[int, list[float]] = {n: [] for n in counts}
    for run in range(2):
        for processes in counts:
            url = make_url_for(f"proc{processes}-{run}")
            anyio.run(_create, url)
            fill(url, total)
            children = []
            for i in range(processes):
                place = hosts.prefix(i) if hosts else []
                target = hosts.url(url) if hosts else url
                children.append(
                    subprocess.Popen(
                        [*place, sys.executable, __file__, "--worker", target, "--wait", str(wait)],
                        stdin=subprocess.PIPE,
                        stdout=subprocess.PIPE,
                        text=True,
                        cwd=ROOT,
                    )
                )
            for child in children:  # start-up (imports, connecting) is not throughput
                assert child.stdout is not None and child.stdout.readline().strip() == "ready"
            started, cpu_before, go_at = time.perf_counter(), postgres_cpu_seconds(), time.time()
            for child in children:
                assert child.stdin is not None
                child.stdin.write("go\n")
                child.stdin.flush()
            ends = [(child.communicate(timeout=600)[0] or "0 0 0").split()[-3:] for child in children]
            cpu = postgres_cpu_seconds() - cpu_before + sum(float(used) for _, _, used in ends)
            busy[processes].append(cpu / (time.perf_counter() - started))
            done = sum(int(count) for count, _, _ in ends)
            if done != total:
                raise SystemExit(f"{processes} processes finished {done} of {total} jobs")
            rates[processes].append(total / (max(float(last) for _, last, _ in ends) - go_at))
    medians = {n: statistics.median(rates[n]) for n in counts}
    one = medians[counts[0]]
    cores, used = os.cpu_count() or 1, statistics.median(busy[counts[0]])
    what = f"jobs waiting {wait * 1e3:g} ms on I/O" if wait else "no-op jobs"
    where = f", spread over {hosts.count} namespaced hosts" if hosts else ", one host"
    print(f"  postgresql {what}{where} (timed from a common start to the last job):")
    for n in counts:
        target = IO_TARGETS.get(n) if wait else NOOP_TARGETS.get(n)
        goal = f" (target >= {target}x)" if target else ""
        print(
            f"             {n} process{'es' if n > 1 else '  '} {medians[n]:6.0f} jobs/s, "
            f"ratio {medians[n] / one:.2f}x{goal}; "
            f"with the database {statistics.median(busy[n]):.2f} of {cores} cores busy"
        )
    if not wait:
        print(
            f"             one process with its database kept {used:.2f} of {cores} cores busy: "
            f"no number of processes can pass {cores / used:.2f}x here"
        )
    return {n: medians[n] / one for n in counts}


IO_TARGETS = {2: 1.8, 4: 3.0}
NOOP_TARGETS = {2: 1.5}


class PgDatabases:
    """Throwaway PostgreSQL databases on the given server, dropped at the end."""

    def __init__(self, base: str) -> None:
        self.base = make_url(base)
        self.names: list[str] = []

    def __call__(self, tag: object) -> str:
        name = f"beam_bench_{tag}_{uuid.uuid4().hex[:8]}".replace("-", "_")
        asyncio.run(self._execute(f'CREATE DATABASE "{name}"'))
        self.names.append(name)
        return self.base.set(drivername="postgresql+asyncpg", database=name).render_as_string(
            hide_password=False
        )

    def drop_all(self) -> None:
        for name in self.names:
            asyncio.run(self._execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))

    async def _execute(self, statement: str) -> None:
        import asyncpg  # type: ignore[import-untyped]

        dsn = self.base.set(drivername="postgresql").render_as_string(hide_password=False)
        conn = await asyncpg.connect(dsn)
        try:
            await conn.execute(statement)
        finally:
            await conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--postgres", default=os.environ.get("BEAM_TEST_POSTGRES_URL"))
    parser.add_argument("--claims", type=int, default=400)
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--pg-jobs", type=int, default=15000)
    parser.add_argument("--worker")
    parser.add_argument("--wait", type=float, default=0.0)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    if args.worker:
        worker_process(args.worker, 300, args.wait)
        return
    # The ceilings below hold on an otherwise idle machine: what other programs run takes cores too.
    load = os.getloadavg()[0]
    print(f"job queue, cpu count {os.cpu_count()}, load average {load:.2f} at the start")
    with tempfile.TemporaryDirectory(prefix="beam-bench-queue-") as tmp:
        tmp_path = Path(tmp)
        claim_scaling(
            "sqlite", lambda size: f"sqlite+aiosqlite:///{tmp_path / f'claims-{size}.db'}", args.claims
        )
        sqlite_throughput(tmp_path, args.jobs)
    if not args.postgres:
        print("  postgresql skipped: pass --postgres URL or set BEAM_TEST_POSTGRES_URL")
        return
    databases = PgDatabases(args.postgres)
    try:
        claim_scaling("postgresql", databases, args.claims)
        # Per-job cost: no-op jobs, where the cores the processes and the database share are the limit.
        pg_processes(databases, args.pg_jobs)
        # Real jobs wait on GitHub and the model: with a 5 ms wait per job, what more processes add
        # shows without the cores that no-op jobs and the database share.
        io_jobs = args.pg_jobs // 5
        pg_processes(databases, io_jobs, wait=0.005, counts=(1, 2, 4))
        spread_over_hosts(databases, args.postgres, io_jobs)
    finally:
        databases.drop_all()


def spread_over_hosts(databases: PgDatabases, base: str, total: int) -> None:
    from tests.support.netns import unavailable

    reason = unavailable()
    if reason is not None:
        print(f"  postgresql over namespaced hosts skipped: {reason}")
        return
    spread = Spread(base, 4)
    try:
        pg_processes(databases, total, wait=0.005, counts=(1, 2, 4), hosts=spread)
    finally:
        spread.close()


if __name__ == "__main__":
    main()
