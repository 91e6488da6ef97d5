"""`beam-bot serve` as a real subprocess, wired to a fake GitHub, a git server and a local LLM.

End-to-end tests drive the bot exactly as GitHub would: signed deliveries over HTTP, then they read
what happened in the fake GitHub's state and on the git server.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx

from tests.support.fake_github import FakeGitHub, checked_fake_github, serve_fake_github
from tests.support.git_http import GitHttpServer
from tests.support.openai_server import FakeOpenAI, without_model_env
from tests.support.users import ROOT, as_user, give, user_env
from tests.support.webhooks import Delivery

SECRET = "e2e-webhook-secret"
METRICS_TOKEN = "e2e-metrics-token-0123456789"
T = TypeVar("T")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class BotProcess:
    fake: FakeGitHub
    api_url: str
    git: GitHttpServer
    llm: FakeOpenAI
    work_dir: Path
    port: int = field(default_factory=free_port)
    extra_env: dict[str, str] = field(default_factory=dict)
    as_image_user: bool = False  # run as the Docker image's unprivileged uid (tests/support/users.py)
    proc: subprocess.Popen[bytes] | None = None
    log_path: Path | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        keep = without_model_env(os.environ)
        return {
            **keep,
            "BEAM_APP_ID": str(self.fake.app_id),
            "BEAM_PRIVATE_KEY": self.fake.key.private_pem,
            "BEAM_WEBHOOK_SECRET": SECRET,
            "BEAM_GITHUB_API_URL": self.api_url,
            "BEAM_WORK_DIR": str(self.work_dir),
            "BEAM_HOST": "127.0.0.1",
            "BEAM_PORT": str(self.port),
            "BEAM_PUBLIC_URL": self.url,
            "BEAM_QUEUE_POLL_INTERVAL": "0.2",
            "BEAM_LEASE_SECONDS": "3",
            # A retry waits this (plus 2 s) after a dead attempt's write before it looks for it.
            "BEAM_GITHUB_TIMEOUT": "5",
            "BEAM_API_KEY": "e2e-llm-key",
            "BEAM_API_BASE_URL": self.llm.url,
            "BEAM_MODEL": "fake-model",
            "BEAM_METRICS_TOKEN": METRICS_TOKEN,
            **self.extra_env,
        }

    def start(self) -> None:
        # `free_port()` only finds a port that was free a moment ago: another process on the machine may
        # bind it before the bot does, so a start that lost that race tries again on a new port.
        for attempt in range(3):
            self.log_path = self.work_dir.parent / f"bot-{time.monotonic_ns()}.log"
            log = self.log_path.open("wb")
            argv, env = [sys.executable, "-m", "bot.cli", "serve"], self.env()
            if self.as_image_user:
                give(self.work_dir)
                argv, env = as_user(argv[1:]), user_env({**env, "HOME": str(self.work_dir)})
            self.proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
            log.close()
            try:
                wait_for(
                    lambda: self._healthy() or None, timeout=20, what="beam-bot serve to answer /healthz"
                )
                return
            except AssertionError:
                if attempt == 2 or "in use" not in self.log():
                    raise
                self.port = free_port()

    def _healthy(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"beam-bot serve exited early:\n{self.log()}")
        try:
            return httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path and self.log_path.exists() else ""

    def stop(self, *, kill: bool = False) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)

    def scrape(self) -> str:
        """/metrics, with the scraper's bearer token."""
        auth = {"Authorization": f"Bearer {METRICS_TOKEN}"}
        return httpx.get(f"{self.url}/metrics", headers=auth, timeout=5).text

    def send(self, delivery: Delivery) -> httpx.Response:
        return httpx.post(f"{self.url}/webhooks", content=delivery.body, headers=delivery.headers, timeout=10)


def wait_for(check: Callable[[], T | None], *, timeout: float = 30.0, what: str = "a condition") -> T:
    """Poll until `check` returns something (not None/False); a bounded loop, never a bare sleep."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


@contextmanager
def bot_stack(tmp_path: Path, **extra_env: str) -> Iterator[BotProcess]:
    """Fake GitHub + git server + LLM server + the bot; git takes any installation token the fake issued
    that has not expired, as GitHub does."""
    with ExitStack() as stack:
        git = stack.enter_context(GitHttpServer(tmp_path / "git", token=None))
        fake = stack.enter_context(checked_fake_github(git_base_url=git.url))

        def issued(password: str) -> bool:
            minted = fake.tokens.get(password)
            return minted is not None and minted[1] > time.time()

        git.set_token(issued)
        api_url = stack.enter_context(serve_fake_github(fake))
        llm = stack.enter_context(FakeOpenAI())
        bot = BotProcess(fake, api_url, git, llm, tmp_path / "work", extra_env=dict(extra_env))
        stack.callback(bot.stop)
        yield bot


@contextmanager
def serve_process(env: dict[str, str], log_path: Path, url: str) -> Iterator[subprocess.Popen[bytes]]:
    """`beam-bot serve` as a process with `env`, its output in `log_path`, until `url` answers
    /healthz; stopped (terminated, then killed) on exit."""
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "bot.cli", "serve"], env=env, stdout=log, stderr=subprocess.STDOUT
        )
    try:

        def healthy() -> bool:
            if proc.poll() is not None:
                raise AssertionError(f"beam-bot serve exited early:\n{log_path.read_text(errors='replace')}")
            try:
                return httpx.get(f"{url}/healthz", timeout=1).status_code == 200
            except httpx.HTTPError:
                return False

        wait_for(healthy, timeout=30, what="beam-bot serve to answer /healthz")
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def comment_payload(bot: BotProcess, payload: dict[str, Any], repo: str) -> dict[str, Any]:
    """Point a payload's clone URL at the test git server, as GitHub points it at github.com."""
    payload["repository"]["clone_url"] = bot.git.repo_url(repo)
    return payload


def replay_finished_deliveries(bot: BotProcess) -> None:
    """With the bot stopped: put its delivery and run jobs back as a worker that died before recording
    their end would leave them (queued again, the run row still `running`). SQLite work dirs only."""
    import sqlite3

    with sqlite3.connect(bot.work_dir / "beam.db") as db:
        db.execute(
            "UPDATE jobs SET state = 'queued', run_after = 0, lease_owner = NULL"
            " WHERE kind IN ('delivery', 'run')"
        )
        db.execute("UPDATE runs SET status = 'running', finished_at = NULL")


def deliveries_done(bot: BotProcess) -> bool:
    import sqlite3

    with sqlite3.connect(bot.work_dir / "beam.db") as db:
        states = [row[0] for row in db.execute("SELECT state FROM jobs WHERE kind IN ('delivery', 'run')")]
    return bool(states) and all(state == "done" for state in states)
