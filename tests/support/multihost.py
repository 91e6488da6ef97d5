"""A beam-bot deployment over several namespaced hosts (tests/support/netns.py), for issue 23.

The root namespace plays the outside world and the shared services: the fake GitHub, the git server
(`git http-backend`) and the fake model, each bound on the bridge's address, and PostgreSQL reached
through a TCP forwarder on that address. Each host has a work directory of its own and runs
`beam-bot serve` or `beam-bot worker` through `ip netns exec`; nothing is shared between hosts but
the database and what the network serves.

`HostProcess` is a `BotProcess` (tests/support/bot_process.py), so the end-to-end helpers that seed
repositories and send deliveries work against a namespaced `serve` unchanged.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import select
from sqlalchemy.engine import make_url

from bot.app.jobs.schema import jobs
from bot.app.jobs.store import Store
from tests.support.bot_process import BotProcess, wait_for
from tests.support.fake_github import FakeGitHub, checked_fake_github, serve_fake_github
from tests.support.fleet import fresh_pg_database, in_own_loop
from tests.support.git_http import GitHttpServer
from tests.support.netns import Host, Network, TcpForwarder
from tests.support.openai_server import FakeOpenAI

PORT = 8080  # each host has its own network stack: the same port is free on every one
JOB_LINE = re.compile(r"job (\d+) \((\w+),")


@dataclass
class HostProcess(BotProcess):
    """`beam-bot serve` (role "serve") or `beam-bot worker` on one namespaced host."""

    host: Host | None = None
    role: str = "serve"
    port: int = PORT
    # False: started as a host that was never given the App's credentials (no BEAM_APP_ID, key, secret).
    credentials: bool = True

    @property
    def url(self) -> str:
        assert self.host is not None
        return f"http://{self.host.address}:{self.port}"

    def env(self) -> dict[str, str]:
        env = super().env()
        env["BEAM_HOST"] = "0.0.0.0"  # noqa: S104 - inside the host's own namespace
        if not self.credentials:
            for name in ("BEAM_APP_ID", "BEAM_PRIVATE_KEY", "BEAM_WEBHOOK_SECRET"):
                env.pop(name)
        # A proxy from the caller's environment would be asked for the bridge's private addresses.
        for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
            env.pop(name, None)
        return {k: v for k, v in env.items() if v != ""}

    def start(self) -> None:
        assert self.host is not None
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = self.work_dir.parent / f"{self.role}-{time.monotonic_ns()}.log"
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(
                self.host.command(sys.executable, "-m", "bot.cli", self.role),
                env=self.env(),
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        if self.role == "serve":
            wait_for(
                lambda: self._healthy() or None, timeout=30, what=f"serve on host {self.host.name} healthy"
            )

    def _healthy(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"beam-bot {self.role} exited early:\n{self.log()}")
        try:
            return httpx.get(f"{self.url}/healthz", timeout=1, trust_env=False).status_code == 200
        except httpx.HTTPError:
            return False

    def send(self, delivery: Any) -> httpx.Response:
        return httpx.post(
            f"{self.url}/webhooks",
            content=delivery.body,
            headers=delivery.headers,
            timeout=10,
            trust_env=False,
        )

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL, as a host that loses power: no shutdown grace, leases left to expire."""
        if self.alive():
            assert self.proc is not None
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def jobs_run(self) -> dict[str, str]:
        """Job id to kind for every job this process's logs say it ran (all its starts)."""
        found: dict[str, str] = {}
        for path in sorted(self.work_dir.parent.glob(f"{self.role}-*.log")):
            found.update(JOB_LINE.findall(path.read_text(errors="replace")))
        return found


@dataclass
class Cluster:
    """The shared services in the root namespace and one process per host (`procs[host name]`)."""

    net: Network
    fake: FakeGitHub
    api_url: str
    git: GitHttpServer
    llm: FakeOpenAI
    root: Path
    database_url: str  # as the root namespace (the test) reaches it
    host_database_url: str  # as the hosts reach it, through the forwarder
    env: dict[str, str] = field(default_factory=dict)
    procs: dict[str, HostProcess] = field(default_factory=dict)

    def work_dir(self, name: str) -> Path:
        return self.root / "hosts" / name / "work"

    def process(self, name: str, role: str, *, credentials: bool = True, **extra_env: str) -> HostProcess:
        """The (not yet started) process of `role` on host `name`, with the cluster's settings."""
        env = {"BEAM_DATABASE_URL": self.host_database_url, **self.env, **extra_env}
        proc = HostProcess(
            self.fake, self.api_url, self.git, self.llm, self.work_dir(name), extra_env=env,
            host=self.net.hosts[name], role=role, credentials=credentials,
        )  # fmt: skip
        self.procs[name] = proc
        return proc

    def start(self, name: str, role: str, *, credentials: bool = True, **extra_env: str) -> HostProcess:
        proc = self.process(name, role, credentials=credentials, **extra_env)
        proc.start()
        return proc

    def wipe(self, name: str) -> None:
        """Delete a host's work directory: the disk it had is gone."""
        shutil.rmtree(self.work_dir(name), ignore_errors=True)

    def stop_all(self) -> None:
        for proc in self.procs.values():
            proc.stop()

    def log(self) -> str:
        return "\n".join(f"--- {n} ({p.role})\n{p.log()[-3000:]}" for n, p in self.procs.items())

    def job_rows(self) -> list[dict[str, Any]]:
        async def read() -> list[dict[str, Any]]:
            store = await Store.open(self.database_url)
            try:
                async with store.read() as conn:
                    return [dict(r._mapping) for r in await conn.execute(select(jobs))]
            finally:
                await store.close()

        return in_own_loop(read)

    def jobs_done(self, kinds: tuple[str, ...] = ("delivery", "run")) -> bool:
        states = [row["state"] for row in self.job_rows() if row["kind"] in kinds]
        return bool(states) and all(state == "done" for state in states)


@contextlib.contextmanager
def cluster(
    root: Path, session_pg_url: str, env: dict[str, str], names: tuple[str, ...] = ("a", "b", "c")
) -> Iterator[Cluster]:
    """A network with one namespace per name, the services on its bridge, a database of its own."""
    with contextlib.ExitStack() as stack:
        net = stack.enter_context(Network())
        for name in names:
            net.add_host(name)
        git = stack.enter_context(GitHttpServer(root / "git", token=None, host=net.gateway))
        fake = stack.enter_context(checked_fake_github(git_base_url=git.url))

        def issued(password: str) -> bool:
            minted = fake.tokens.get(password)
            return minted is not None and minted[1] > time.time()

        git.set_token(issued)
        api_url = stack.enter_context(serve_fake_github(fake, net.gateway))
        llm = stack.enter_context(FakeOpenAI(host=net.gateway))
        database_url = stack.enter_context(fresh_pg_database(session_pg_url))
        target = make_url(database_url)
        forwarder = stack.enter_context(
            TcpForwarder(net.gateway, (target.host or "127.0.0.1", target.port or 5432))
        )
        host_url = target.set(host=net.gateway, port=forwarder.port).render_as_string(hide_password=False)
        made = Cluster(net, fake, api_url, git, llm, root, database_url, host_url, env=dict(env))
        stack.callback(made.stop_all)  # first out: the processes, before the services they use
        yield made
