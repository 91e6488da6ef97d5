"""Reviews by a real model server, for `bench/real_model.py` and the `real_model` tests (never CI).

Nothing here starts a model: the caller names a running OpenAI-compatible server (llama.cpp's
`llama-server`, Ollama, vLLM). Both ways the bot reviews a change are driven against it, one fixed
change (`bench/data/*.json`: base and head files, and where the bug is) at a time:

- `beam-bot run review --json` on a real git checkout of the change;
- `/beam review` on a pull request of the same change, through the e2e fakes (fake GitHub, git over
  HTTP, `beam-bot serve` as a subprocess).

The bot talks to the server through `RecordingProxy`, which keeps every request and answer (with
llama-server's `timings`: `prompt_n` tokens processed, `cache_n` served from its prompt cache) and
caps `max_tokens`, so a small model on two cores cannot ramble past the client's timeout.
"""

from __future__ import annotations

import difflib
import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx

from bot.app.runs.render import PLAIN_TEXT_REVIEW
from tests.support.bot_process import SECRET, bot_stack, comment_payload, wait_for
from tests.support.openai_server import without_model_env
from tests.support.webhooks import delivery, issue_comment_payload

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "bench" / "data"
MODEL_TIMEOUT = 1200.0  # one review, all its rounds, on a slow machine
CALL_TIMEOUT = float(os.environ.get("BEAM_BENCH_CALL_TIMEOUT", "400"))  # one model call
GIT_ENV = {"GIT_AUTHOR_NAME": "Dev", "GIT_AUTHOR_EMAIL": "dev@example.com"}
GIT_ENV |= {"GIT_COMMITTER_NAME": "Dev", "GIT_COMMITTER_EMAIL": "dev@example.com"}


@dataclass(frozen=True)
class Change:
    name: str
    title: str
    message: str
    base: dict[str, str]
    head: dict[str, str]
    bug_path: str
    bug_lines: tuple[int, ...]

    @classmethod
    def load(cls, path: Path) -> Change:
        data = json.loads(path.read_text(encoding="utf-8"))
        bug = data["bug"]
        return cls(
            path.stem,
            data["title"],
            data["message"],
            data["base"],
            data["head"],
            bug["path"],
            tuple(bug["lines"]),
        )

    def hits_bug(self, path: str, line: int, start: int | None = None) -> bool:
        """A comment on (or spanning) the bug's lines, give or take one line."""
        first = start if start is not None else line
        return path == self.bug_path and any(first - 1 <= n <= line + 1 for n in self.bug_lines)


def changes(names: list[str] | None = None) -> list[Change]:
    found = [Change.load(p) for p in sorted(DATA.glob("*.json"))]
    return [c for c in found if names is None or c.name in names]


@dataclass
class Exchange:
    """One chat completion through the proxy."""

    request: dict[str, Any]
    response: dict[str, Any]
    seconds: float

    def timing(self, name: str) -> int:
        value = (self.response.get("timings") or {}).get(name)
        return value if isinstance(value, int) else 0

    @property
    def prompt_total(self) -> int:
        """The whole prompt: what the server processed plus what it served from its cache."""
        return self.timing("prompt_n") + self.timing("cache_n")


class RecordingProxy:
    """A loopback chat-completions endpoint that forwards to `upstream` and records each exchange."""

    def __init__(self, upstream: str, max_tokens: int) -> None:
        self.upstream = upstream.rstrip("/")
        self.max_tokens = max_tokens
        self.exchanges: list[Exchange] = []
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
                body["max_tokens"] = min(int(body.get("max_tokens") or proxy.max_tokens), proxy.max_tokens)
                # It records whole answers: a stream the terminal asks for is answered plainly, as a
                # server that ignores `stream` answers (the client reads that too).
                body.pop("stream_options", None)
                body["stream"] = False
                started = time.perf_counter()
                answer = httpx.post(
                    f"{proxy.upstream}{self.path.removeprefix('/v1')}",
                    json=body,
                    headers={"Authorization": self.headers.get("authorization", "")},
                    timeout=CALL_TIMEOUT + 5,  # the bot gives up at CALL_TIMEOUT: so does the proxy
                )
                elapsed = time.perf_counter() - started
                try:
                    data = answer.json()
                except ValueError:
                    data = {}
                with proxy._lock:
                    proxy.exchanges.append(Exchange(body, data if isinstance(data, dict) else {}, elapsed))
                self.send_response(answer.status_code)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(answer.content)))
                self.end_headers()
                self.wfile.write(answer.content)

            def log_message(self, format: str, *args: Any) -> None:
                return None

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> RecordingProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self._server.shutdown()
        self._server.server_close()

    def since(self, mark: int) -> list[Exchange]:
        with self._lock:
            return list(self.exchanges[mark:])


def bare_seconds(upstream: str, request: dict[str, Any]) -> tuple[float, dict[str, Any]]:
    """The same request sent alone, straight to the server, its prompt cache not used."""
    body = {**request, "cache_prompt": False}
    started = time.perf_counter()
    answer = httpx.post(f"{upstream.rstrip('/')}/chat/completions", json=body, timeout=MODEL_TIMEOUT)
    elapsed = time.perf_counter() - started
    answer.raise_for_status()
    data: dict[str, Any] = answer.json()
    return elapsed, data


@dataclass
class Review:
    """How one path's review of one change ended."""

    path: str  # "run review" or "/beam review"
    change: Change
    tool_calls: list[str] = field(default_factory=list)
    posted_with: str | None = None  # "structured", "review_change", "json", "text", or None: no review
    comments: list[tuple[str, int, int | None]] = field(default_factory=list)  # path, line, start_line
    said_plain_text: bool = False  # the output said the review is the model's plain text
    seconds: float = 0.0
    exchanges: list[Exchange] = field(default_factory=list)
    detail: str = ""
    posted_bodies: list[str] = field(default_factory=list)  # what reached GitHub (or would have)
    notes: list[str] = field(default_factory=list)  # the run's notes (why it was asked for plain text)

    @property
    def asked_in_text(self) -> str | None:
        """The BEM code after which the model was asked for its review in plain text, if it was."""
        for note in self.notes:
            if "could not be used (" in note:
                return note.split("could not be used (", 1)[1].split(":", 1)[0]
        return None

    @property
    def on_changed_lines(self) -> int:
        """Inline comments on a line the change added or rewrote."""
        return sum(1 for path, line, _ in self.comments if line in added_lines(self.change, path))

    @property
    def at_bug(self) -> bool:
        return any(self.change.hits_bug(path, line, start) for path, line, start in self.comments)

    @property
    def prompt_tokens(self) -> int:
        return sum(int((e.response.get("usage") or {}).get("prompt_tokens") or 0) for e in self.exchanges)

    @property
    def generated_tokens(self) -> int:
        return sum(int((e.response.get("usage") or {}).get("completion_tokens") or 0) for e in self.exchanges)


def added_lines(change: Change, path: str) -> set[int]:
    """The head's line numbers (from 1) that the change added or rewrote in `path`."""
    if path not in change.head:
        return set()
    old = change.base.get(path, "").splitlines()
    new = change.head[path].splitlines()
    lines: set[int] = set()
    for op, _, _, j1, j2 in difflib.SequenceMatcher(a=old, b=new, autojunk=False).get_opcodes():
        if op in ("replace", "insert"):
            lines.update(range(j1 + 1, j2 + 1))
    return lines


def git(cwd: Path, *args: str) -> str:
    env = {**os.environ, **GIT_ENV}
    done = subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True)
    return done.stdout.strip()


def write_tree(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def checkout(change: Change, where: Path) -> Path:
    """A git checkout: `main` at the base, `feature` (checked out) one commit on with the change."""
    where.mkdir(parents=True)
    git(where, "init", "-q", "-b", "main")
    git(where, "config", "user.name", "maintainer")
    write_tree(where, change.base)
    git(where, "add", ".")
    git(where, "commit", "-qm", "Initial commit")
    git(where, "checkout", "-qb", "feature")
    write_tree(where, change.head)
    git(where, "add", ".")
    git(where, "commit", "-qm", change.message)
    return where


def model_env(url: str, model: str) -> dict[str, str]:
    keep = without_model_env(os.environ)
    tools = os.environ.get("BEAM_MODEL_TOOLS")
    extra = {"BEAM_MODEL_TOOLS": tools} if tools else {}
    # A slow machine: each call may take minutes (the proxy caps its max_tokens).
    extra["BEAM_MODEL_TIMEOUT"] = str(CALL_TIMEOUT)
    return {**keep, "BEAM_API_KEY": "local", "BEAM_API_BASE_URL": url, "BEAM_MODEL": model, **extra}


def posted_with(review: Review) -> str:
    """How a `/beam review` answered, read from what it did (the run's summary names no path): plain
    text when the tracking comment said so, `review_change` when the tool loop called it, structured
    output when a call asked for the review as JSON of its schema and the server answered whole, else
    findings written as JSON in the answer."""
    if review.said_plain_text:
        return "text"
    if "review_change" in review.tool_calls:
        return "review_change"
    for exchange in review.exchanges:
        asked = exchange.request.get("response_format") or {}
        name = (asked.get("json_schema") or {}).get("name") if isinstance(asked, dict) else None
        choices = exchange.response.get("choices") or [{}]
        if name == "review_change" and choices[0].get("finish_reason") == "stop":
            return "structured"
    return "json"


def local_review(change: Change, proxy: RecordingProxy, model: str, tmp: Path) -> Review:
    """`beam-bot run review --json` on a checkout of the change."""
    work = checkout(change, tmp / f"local-{change.name}")
    mark = len(proxy.exchanges)
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "bot.cli", "run", "review", "--repo", str(work), "--json"],
        env=model_env(proxy.url, model),
        capture_output=True,
        text=True,
        timeout=MODEL_TIMEOUT,
        check=False,
    )
    review = Review("run review", change, seconds=time.perf_counter() - started, exchanges=proxy.since(mark))
    if done.returncode != 0:
        lines = [line for line in (done.stderr or done.stdout).strip().splitlines() if line.strip()]
        failed = [line for line in lines if line.startswith("✗ failed")]
        review.detail = " ".join(failed + lines[-1:]) if lines else f"exit code {done.returncode}"
        return review
    report = json.loads(done.stdout)
    review.tool_calls = [c["name"] for c in report["tool_calls"]]
    review.posted_with = report["posted_with"]
    review.said_plain_text = report["posted_with"] == "text"
    review.notes = [str(n) for n in report.get("notes", [])]
    review.comments = [(c["path"], c["line"], c.get("start_line")) for c in report["review"]["comments"]]
    review.posted_bodies = [report["review"]["body"], *(c["body"] for c in report["review"]["comments"])]
    return review


def github_review(change: Change, proxy: RecordingProxy, model: str, tmp: Path) -> Review:
    """`/beam review` on a pull request of the change, through the e2e fakes and `beam-bot serve`."""
    from tests.e2e.review_support import diff_files

    repo = f"octo/{change.name.replace('_', '-')}"
    env = {k: v for k, v in model_env(proxy.url, model).items() if k.startswith("BEAM_")}
    with bot_stack(tmp / f"github-{change.name}", BEAM_JOB_TIMEOUT=str(MODEL_TIMEOUT + 60), **env) as bot:
        main = bot.git.seed(repo, change.base)
        head = bot.git.commit(repo, change.head, branch="feature", message=change.message)
        bot.git.create_pull_ref(repo, 1, head)
        bot.fake.add_repo(repo)
        bot.fake.add_collaborator(repo, "maintainer", "write")
        files = diff_files(bot.git.repository(repo), main, head)
        bot.fake.add_pull(
            repo, number=1, title=change.title, head_ref="feature", head_sha=head, base_sha=main, files=files
        )
        bot.start()
        body = "/beam review"
        comment = bot.fake.add_comment(repo, 1, body, user="maintainer")
        payload = issue_comment_payload(
            body, repo=repo, number=1, commenter="maintainer", comment_id=comment.id
        )
        mark = len(proxy.exchanges)
        started = time.perf_counter()
        assert (
            bot.send(delivery("issue_comment", comment_payload(bot, payload, repo), SECRET)).status_code
            == 202
        )

        def final() -> str | None:
            bodies = [c.body for c in bot.fake.comments_on(repo, 1) if c.user == "beam-bot[bot]"]
            return next((b for b in bodies if "beam-run:" in b and "Working on" not in b), None)

        tracking = wait_for(final, timeout=MODEL_TIMEOUT, what="the final tracking comment")
        review = Review("/beam review", change, seconds=time.perf_counter() - started)
        review.exchanges = proxy.since(mark)

        def ended() -> tuple[Any, ...] | None:
            """The run's row once its end is recorded (the final comment is posted just before)."""
            with sqlite3.connect(bot.work_dir / "beam.db") as db:
                row = db.execute("SELECT summary, error_message, error_code FROM runs").fetchone()
            return row if row and (row[0] or row[1]) else None

        row = wait_for(ended, timeout=30, what="the run's recorded end")
        summary = json.loads(row[0]) if row[0] else {}
        review.notes = [str(n) for n in summary.get("notes", [])]
        review.tool_calls = [str(t).split(" ")[0] for t in summary.get("tools", [])]
        reviews = bot.fake.reviews_on(repo, 1)
        review.posted_bodies = [c.body for c in bot.fake.comments_on(repo, 1) if c.user == "beam-bot[bot]"]
        review.posted_bodies += [r.body for r in reviews]
        review.posted_bodies += [bot.fake.comments[i].body for r in reviews for i in r.comment_ids]
        review.said_plain_text = PLAIN_TEXT_REVIEW in tracking
        if reviews:
            review.posted_with = posted_with(review)
            review.comments = [
                (c.path or "", c.line or 0, getattr(c, "start_line", None))
                for c in (bot.fake.comments[i] for i in reviews[0].comment_ids)
            ]
        else:
            reason = f"{row[2]}: {row[1]}" if row[1] else tracking.splitlines()[0]
            review.detail = reason[:300]
        return review
