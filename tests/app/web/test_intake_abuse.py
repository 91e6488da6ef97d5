"""Issue 8: intake under abuse. U+0000 in signed deliveries is stored on both databases; the bytes of
unverified bodies in flight are capped (the excess waits, then gets 503 with Retry-After); a body
that is read too slowly gets 408."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import httpx
import pytest
from starlette.applications import Starlette

from bot.app.settings import Settings
from tests.support.db import db_url_fixture, pg_database_url_fixture  # noqa: F401 - fixtures
from tests.support.web_app import job_rows, registered_settings, running_app, runtime_of, store_of
from tests.support.webhooks import delivery, raw_payload

SECRET = "it's a secret to everybody"
PR_COMMENT = raw_payload("issue_comment.created.pull_request.json")
MIB = 1024 * 1024

pytestmark = pytest.mark.anyio


def settings_for(tmp_path: Path, **values: object) -> Settings:
    return registered_settings(tmp_path, SECRET, **values)


@pytest.fixture
async def small_budget(tmp_path: Path) -> AsyncIterator[tuple[Starlette, httpx.AsyncClient]]:
    async with running_app(settings_for(tmp_path, max_unverified_bytes=MIB, body_timeout=0.5)) as pair:
        yield pair


async def test_u0000_in_strings_is_stored_on_both_databases(tmp_path: Path, db_url: str) -> None:
    payload = json.loads(PR_COMMENT)
    payload["action"] = "created\u0000"
    payload["comment"]["body"] = "/beam review\u0000 please"
    payload["repository"]["full_name"] = "octo\u0000org/hello"
    body = json.dumps(payload).encode()
    assert b"\\u0000" in body
    delivery_id = f"nul-{uuid.uuid4().hex}"
    async with running_app(settings_for(tmp_path, database_url=db_url)) as (app, client):
        sent = delivery("issue_comment", body, SECRET, delivery_id=delivery_id)
        response = await client.post("/webhooks", content=body, headers=sent.headers)
        assert response.status_code == 202, response.text
        stored = await store_of(app).get_delivery(delivery_id)
        assert stored is not None and stored.action == "created\ufffd"
        # Triage (can_lead_to_work) makes no job for an action it does not know, and keeps no body
        # for it; a `created` one with the same NUL strings elsewhere gets its job, under a
        # storable key, and its body exactly as GitHub signed it.
        assert stored.payload == b""
        assert not [j for j in await job_rows(app) if j["delivery_id"] == delivery_id]
        payload["action"] = "created"
        body = json.dumps(payload).encode()
        sent = delivery("issue_comment", body, SECRET, delivery_id=f"{delivery_id}-created")
        response = await client.post("/webhooks", content=body, headers=sent.headers)
        assert response.status_code == 202, response.text
        [job] = [j for j in await job_rows(app) if j["delivery_id"] == f"{delivery_id}-created"]
        assert job["key"] is not None and job["key"].startswith("octo")
        stored = await store_of(app).get_delivery(f"{delivery_id}-created")
        assert stored is not None and stored.payload == body
        assert json.loads(stored.payload)["comment"]["body"] == "/beam review\u0000 please"


async def _slow_body(size: int, release: anyio.Event, first: int | None = None) -> AsyncIterator[bytes]:
    """`size` bytes: `first` of them at once (all but two by default), the rest once released."""
    first = size - 2 if first is None else first
    yield b"{" + b" " * (first - 1)
    await release.wait()
    yield b" " * (size - first - 1) + b"}"


async def test_unverified_bytes_in_flight_are_capped(
    small_budget: tuple[Starlette, httpx.AsyncClient],
) -> None:
    app, client = small_budget
    intake = runtime_of(app).intake
    intake.budget_wait = 0.2
    release = anyio.Event()
    statuses: dict[str, int] = {}

    async def slow() -> None:
        headers = {"content-type": "application/json", "content-length": str(MIB)}
        headers |= {"x-github-event": "issue_comment", "x-github-delivery": "slow-1"}
        response = await client.post("/webhooks", content=_slow_body(MIB, release), headers=headers)
        statuses["slow"] = response.status_code

    async with anyio.create_task_group() as tg:
        tg.start_soon(slow)
        with anyio.fail_after(10):
            while intake.budget.used < MIB - 2:  # counted as received
                await anyio.sleep(0.01)
        # The budget is spent by a body nobody has verified yet: the next one is turned away.
        busy = await client.post(
            "/webhooks", content=PR_COMMENT, headers=delivery("issue_comment", PR_COMMENT, SECRET).headers
        )
        assert busy.status_code == 503 and busy.headers["retry-after"] == "5"
        # One that may wait gets in as soon as the slow body is done.
        intake.budget_wait = 10

        async def waiting() -> None:
            sent = delivery("issue_comment", PR_COMMENT, SECRET, delivery_id="after-1")
            statuses["waited"] = (
                await client.post("/webhooks", content=PR_COMMENT, headers=sent.headers)
            ).status_code

        tg.start_soon(waiting)
        await anyio.sleep(0.1)
        assert "waited" not in statuses
        release.set()
    assert statuses == {"slow": 401, "waited": 202}  # the slow one was never signed
    assert intake.budget.used == 0


async def test_a_body_read_too_slowly_gets_408(small_budget: tuple[Starlette, httpx.AsyncClient]) -> None:
    app, client = small_budget
    headers = {"content-type": "application/json", "content-length": "1000"}
    headers |= {"x-github-event": "issue_comment", "x-github-delivery": "stall-1"}
    never = anyio.Event()

    async def stalls() -> AsyncIterator[bytes]:
        yield b"{"
        with anyio.move_on_after(5):
            await never.wait()
        yield b" " * 998 + b"}"

    response = await client.post("/webhooks", content=stalls(), headers=headers)
    assert response.status_code == 408 and response.json()["error"] == "body_timeout"
    assert runtime_of(app).intake.budget.used == 0
    assert await job_rows(app) == []


def _slow_headers(size: int, delivery_id: str) -> dict[str, str]:
    return {
        "content-type": "application/json",
        "content-length": str(size),
        "x-github-event": "issue_comment",
        "x-github-delivery": delivery_id,
    }


async def test_the_budget_counts_bytes_received_not_the_length_declared(
    small_budget: tuple[Starlette, httpx.AsyncClient],
) -> None:
    """Issue 32: a Content-Length costs its sender nothing; only the bytes that arrived are held."""
    app, client = small_budget
    intake = runtime_of(app).intake
    intake.budget_wait = 0.0
    release = anyio.Event()
    statuses: dict[str, int] = {}

    async def declares_25_mib() -> None:
        body = _slow_body(25 * MIB, release, first=1024)
        response = await client.post("/webhooks", content=body, headers=_slow_headers(25 * MIB, "big-1"))
        statuses["declared"] = response.status_code

    async with anyio.create_task_group() as tg:
        tg.start_soon(declares_25_mib)
        with anyio.fail_after(10):
            while intake.budget.used == 0:
                await anyio.sleep(0.01)
        assert intake.budget.used == 1024
        genuine = delivery("issue_comment", PR_COMMENT, SECRET)
        accepted = await client.post("/webhooks", content=PR_COMMENT, headers=genuine.headers)
        assert accepted.status_code == 202, accepted.text
        tg.cancel_scope.cancel()
    assert intake.budget.used == 0


async def test_one_peer_holds_at_most_its_share_of_the_budget(tmp_path: Path) -> None:
    """Issue 32: bodies from one address (a share of 25 MiB of the 64 MiB here) leave the rest of
    the budget to GitHub's deliveries, however many that address opens."""
    settings = settings_for(tmp_path, peer_share=0.25, body_timeout=30)
    async with running_app(settings) as (app, client):
        intake = runtime_of(app).intake
        intake.budget_wait = 0.2
        assert intake.budget.capacity == 64 * MIB and intake.budget.per_peer == 25 * MIB
        release = anyio.Event()
        statuses: list[int] = []
        attacker_transport = httpx.ASGITransport(app=app, client=("127.0.0.2", 40000))
        async with httpx.AsyncClient(transport=attacker_transport, base_url="http://beam.test") as attacker:

            async def slow(n: int) -> None:
                body = _slow_body(16 * MIB, release)
                headers = _slow_headers(16 * MIB, f"slow-{n}")
                statuses.append((await attacker.post("/webhooks", content=body, headers=headers)).status_code)

            async with anyio.create_task_group() as tg:
                for n in range(4):  # 64 MiB: the whole budget, were it not for the share
                    tg.start_soon(slow, n)
                with anyio.fail_after(10):
                    while len(statuses) < 3:  # all but the one that fits its share are turned away
                        await anyio.sleep(0.01)
                assert statuses == [503, 503, 503]
                assert intake.budget.by_peer == {"127.0.0.2": 16 * MIB - 2}
                sent = delivery("issue_comment", PR_COMMENT, SECRET)  # GitHub, from another address
                response = await client.post("/webhooks", content=PR_COMMENT, headers=sent.headers)
                assert response.status_code == 202, response.text
                release.set()
        assert sorted(statuses) == [401, 503, 503, 503]  # the one read whole was never signed
        assert intake.budget.used == 0 and intake.budget.by_peer == {}
