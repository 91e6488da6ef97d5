"""Logs: one `beam` namespace, BEAM_LOG_LEVEL, JSON lines, and the job context on every line of a job."""

from __future__ import annotations

import ast
import io
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest

from bot.app.jobs.queue import Job, JobQueue
from bot.app.jobs.workers import WorkerPool
from bot.app.logs import bind, configure_logging, log_context
from tests.support.db import opened

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def captured() -> Iterator[io.StringIO]:
    """What the configured handler writes, in JSON; the handler is removed afterwards."""
    stream = io.StringIO()
    configure_logging("INFO", "json", stream=stream)
    try:
        yield stream
    finally:
        root = logging.getLogger()
        for handler in list(root.handlers):
            if getattr(handler, "beam_handler", False):
                root.removeHandler(handler)
        root.setLevel(logging.WARNING)


def records(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]  # one JSON object per line


def test_every_logger_is_in_the_beam_namespace() -> None:
    names = []
    for path in (ROOT / "bot").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "getLogger" and node.args:
                arg = node.args[0]
                assert isinstance(arg, ast.Constant), f"{path}: getLogger({ast.unparse(arg)})"
                names.append(str(arg.value))
    assert names and all(name == "beam" or name.startswith("beam.") for name in names), names


def test_json_lines_and_levels(captured: io.StringIO) -> None:
    logging.getLogger("beam.test").info('a "quoted"\nmessage')
    logging.getLogger("beam.test").debug("not at INFO")
    logging.getLogger("httpx").info("a library's chatter stays out")
    logging.getLogger("httpx").warning("a library's warning is kept")
    try:
        raise ValueError("boom")
    except ValueError:
        logging.getLogger("beam.test").exception("failed")
    lines = records(captured)
    assert [(r["logger"], r["level"]) for r in lines] == [
        ("beam.test", "INFO"),
        ("httpx", "WARNING"),
        ("beam.test", "ERROR"),
    ]
    assert lines[0]["message"] == 'a "quoted"\nmessage'
    assert "ValueError: boom" in lines[2]["exception"]
    assert lines[0]["time"].endswith("Z")


def test_log_level_setting(captured: io.StringIO) -> None:
    configure_logging("WARNING", "text", stream=captured)
    logging.getLogger("beam.test").info("quiet")
    logging.getLogger("beam.test").warning("loud")
    with log_context(job_id=3, repository="octo/repo"):
        logging.getLogger("beam.test").warning("in a job")
    assert captured.getvalue().count("\n") == 2
    assert "quiet" not in captured.getvalue()
    assert captured.getvalue().splitlines()[1].endswith("in a job [job_id=3 repository=octo/repo]")


@pytest.mark.anyio
async def test_every_line_of_a_job_carries_its_context(tmp_path: Path, captured: io.StringIO) -> None:
    done = anyio.Event()

    async def handler(job: Job) -> None:
        log = logging.getLogger("beam.test")
        log.info("before the run id is known")
        bind(run_id="run-1234")
        log.info("in the handler")
        await anyio.to_thread.run_sync(lambda: log.info("in a worker thread"))
        done.set()

    async with opened(f"sqlite+aiosqlite:///{tmp_path / 'beam.db'}") as store:
        assert await store.accept_delivery("d-77", "issue_comment", "created", b"{}", "octo/repo#7")
        pool = WorkerPool(JobQueue(store), handler, concurrency=1, poll_interval=0.05)
        async with anyio.create_task_group() as tg:
            tg.start_soon(pool.run)
            with anyio.fail_after(20):
                await done.wait()
            pool.stop()
    logging.getLogger("beam.test").info("after the job")

    lines = records(captured)
    job_lines = [r for r in lines if r["logger"] in ("beam.test", "beam.workers") and r.get("job_id")]
    assert {r["message"] for r in job_lines} >= {
        "before the run id is known",
        "in the handler",
        "in a worker thread",
    }
    for record in job_lines:
        assert (record["delivery_id"], record["repository"], record["pr_number"]) == ("d-77", "octo/repo", 7)
    with_run = [r for r in job_lines if r["message"] in ("in the handler", "in a worker thread")]
    assert all(r["run_id"] == "run-1234" for r in with_run) and len(with_run) == 2
    assert any(r["logger"] == "beam.workers" and "started" in r["message"] for r in job_lines)
    after = next(r for r in lines if r["message"] == "after the job")
    assert "job_id" not in after and "run_id" not in after
