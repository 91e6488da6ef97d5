"""The job dispatcher and the webhook table: each job reaches one handler, and a delivery no handler
wants (an edited comment, an unrouted event) makes no GitHub call at all."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from bot.app.approvals.flow import Approvals
from bot.app.git.checkout import Checkouts
from bot.app.github.api import GitHubApi
from bot.app.github.auth import GitHubApp
from bot.app.github.identity import BotIdentity
from bot.app.jobs.queue import Job, JobQueue
from bot.app.jobs.signals import PermanentError
from bot.app.jobs.store import Store
from bot.app.runs.run import RunDeps
from bot.app.webhooks.dispatch import JobDispatcher, Sweeper
from bot.app.webhooks.handlers import Webhooks
from bot.beam.completion import EchoClient
from tests.support.webhooks import issue_comment_payload, pull_request_payload

pytestmark = pytest.mark.anyio


def job(kind: str, event: str | None = None, body: bytes | None = None) -> Job:
    return Job(1, kind, "o/r#1", "d-1", None, 1, 3, "w", 0.0, event=event, delivery_payload=body)


@pytest.fixture
async def dispatcher(tmp_path: Path) -> AsyncIterator[tuple[JobDispatcher, list[str], list[Job]]]:
    calls: list[str] = []

    def refuse(request: httpx.Request) -> httpx.Response:
        calls.append(f"{request.method} {request.url.path}")
        return httpx.Response(500)

    store = await Store.open(f"sqlite+aiosqlite:///{tmp_path / 'beam.db'}")
    async with httpx.AsyncClient(transport=httpx.MockTransport(refuse)) as http:
        github = GitHubApp(GitHubApi(http, base_url="http://github.invalid"), 1, "not a key")
        checkouts = Checkouts(tmp_path / "work")

        async def token(installation_id: int) -> str:
            raise AssertionError("no token is needed")

        deps = RunDeps(store, checkouts, EchoClient(), token, BotIdentity(github, "beam-bot[bot]"))
        approvals = Approvals(github, deps, JobQueue(store))
        watched: list[Job] = []

        async def watch(job: Job) -> None:
            watched.append(job)

        kinds: dict[str, Any] = {"push_watch": watch}
        yield (
            JobDispatcher(Webhooks(github, deps, approvals), kinds, Sweeper(checkouts, 3600.0)),
            calls,
            watched,
        )
    await store.close()


async def test_other_kinds_go_to_their_handler_and_unknown_ones_fail_for_good(
    dispatcher: tuple[JobDispatcher, list[str], list[Job]],
) -> None:
    handle, calls, watched = dispatcher
    await handle.handle_job(job("push_watch"))
    assert [j.kind for j in watched] == ["push_watch"]
    with pytest.raises(PermanentError, match="unknown job kind"):
        await handle.handle_job(job("nonsense"))
    assert calls == []


@pytest.mark.parametrize(
    ("event", "body", "message"),
    [
        (None, b"{}", "has no delivery"),
        ("issue_comment", b"{", "is not JSON"),
        ("ping", b"[1]", "JSON object"),
    ],
)
async def test_a_broken_delivery_fails_for_good(
    dispatcher: tuple[JobDispatcher, list[str], list[Job]], event: str | None, body: bytes, message: str
) -> None:
    handle, calls, _ = dispatcher
    with pytest.raises(PermanentError, match=message):
        await handle.handle_job(job("delivery", event, body))
    assert calls == []


@pytest.mark.parametrize(
    ("event", "payload"),
    [
        ("issue_comment", issue_comment_payload("/beam review", action="edited", on_pull_request=False)),
        ("pull_request", pull_request_payload("opened")),
        ("issue_comment", issue_comment_payload("just a remark")),
        (
            "issue_comment",
            issue_comment_payload("/beam review", commenter="beam-bot[bot]", commenter_type="Bot"),
        ),
    ],
)
async def test_a_delivery_no_handler_wants_calls_nobody(
    dispatcher: tuple[JobDispatcher, list[str], list[Job]], event: str, payload: dict[str, Any]
) -> None:
    handle, calls, watched = dispatcher
    await handle.handle_job(job("delivery", event, json.dumps(payload).encode()))
    assert calls == [] and watched == []


async def test_the_worker_skips_what_triage_turns_away(
    dispatcher: tuple[JobDispatcher, list[str], list[Job]], caplog: pytest.LogCaptureFixture
) -> None:
    handle, calls, _ = dispatcher
    with caplog.at_level(logging.DEBUG, logger="beam.jobs"):
        await handle.handle_job(
            job("delivery", "issue_comment", json.dumps(issue_comment_payload("nice")).encode())
        )
        skipped = [r.getMessage() for r in caplog.records if "triage says no work" in r.getMessage()]
        assert skipped == ["delivery d-1: triage says no work"] and calls == []
        command = issue_comment_payload("/beam review")
        with pytest.raises(Exception, match="private key"):  # it went on to act: it needed a token
            await handle.handle_job(job("delivery", "issue_comment", json.dumps(command).encode()))
    assert len([r for r in caplog.records if "triage says no work" in r.getMessage()]) == 1


def test_the_webhooks_job_kind_is_not_for_others() -> None:
    with pytest.raises(ValueError, match="delivery"):
        JobDispatcher(None, {"delivery": None}, None)  # type: ignore[arg-type, dict-item]
