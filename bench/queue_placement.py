"""Where `bench/job_queue.py` runs its worker processes and what they cost: namespaced hosts (issue 23)
and the CPU seconds of the benchmark's own processes and of PostgreSQL."""

from __future__ import annotations

import os
from pathlib import Path

from sqlalchemy.engine import make_url


class Spread:
    """Worker processes placed on namespaced hosts (tests/support/netns.py): a bridge, one namespace
    per host, and PostgreSQL reached through a forwarder on the bridge, as from other machines."""

    def __init__(self, database: str, count: int) -> None:
        from tests.support.netns import Network, TcpForwarder

        self.count = count
        self.net = Network()
        self.net.up()
        try:
            self.hosts = [self.net.add_host(f"w{i}") for i in range(count)]
            target = make_url(database)
            self.forwarder = TcpForwarder(self.net.gateway, (target.host or "127.0.0.1", target.port or 5432))
            self.forwarder.__enter__()
        except BaseException:
            self.net.close()
            raise

    def prefix(self, index: int) -> list[str]:
        return self.hosts[index % self.count].command()

    def url(self, url: str) -> str:
        return (
            make_url(url)
            .set(host=self.net.gateway, port=self.forwarder.port)
            .render_as_string(hide_password=False)
        )

    def close(self) -> None:
        self.forwarder.close()
        self.net.close()


def postgres_cpu_seconds() -> float:
    """CPU seconds the PostgreSQL server has spent so far; with what each worker process reports of its
    own, it is what a run cost, and other programs on a shared machine do not count (/proc/stat's
    machine-wide figure read 2.00 of 2 cores whenever anything else ran).

    Exited backends are in the postmaster's `cutime`/`cstime`. Other clients of the same server during
    a run still count: the server's time cannot be told apart per database."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            stat = (proc / "stat").read_text()
        except OSError:
            continue
        name, rest = stat[stat.index("(") + 1 : stat.rindex(")")], stat[stat.rindex(")") + 2 :].split()
        if name not in ("postgres", "postmaster"):
            continue
        # Fields after the name: state ppid ... utime (12th) stime cutime cstime.
        utime, stime, cutime, cstime = (int(x) for x in rest[11:15])
        total += (utime + stime + cutime + cstime) / tick
    return total
