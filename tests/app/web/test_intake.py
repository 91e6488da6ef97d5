"""POST /webhooks against real SQLite: signatures, refusals that store nothing, dedupe, metrics, health."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import re
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import httpx
import pytest
from sqlalchemy import text
from starlette.applications import Starlette

from bot.app.settings import Settings
from bot.app.web.intake import WebhookIntake
from bot.app.web.metrics import Metrics
from tests.support.fake_github import FakeGitHub
from tests.support.web_app import job_rows, registered_settings, running_app, runtime_of, store_of
from tests.support.webhooks import delivery, raw_payload, sign

SECRET = "it's a secret to everybody"
PR_COMMENT = raw_payload("issue_comment.created.pull_request.json")
_command = json.loads(PR_COMMENT)
_command["comment"]["body"] = "/beam review"
PR_COMMAND = json.dumps(_command).encode()


def headers(body: bytes, event: str = "issue_comment", delivery_id: str | None = None) -> dict[str, str]:
    return delivery(event, body, SECRET, delivery_id=delivery_id).headers


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return registered_settings(tmp_path, SECRET)


@pytest.fixture
async def app_client(settings: Settings) -> AsyncIterator[tuple[Starlette, httpx.AsyncClient]]:
    async with running_app(settings) as pair:
        yield pair


async def stored_count(app: Starlette) -> int:
    stats = await store_of(app).stats()
    return int(stats["deliveries"])


@pytest.mark.anyio
async def test_signed_delivery_is_stored_with_its_job(
    app_client: tuple[Starlette, httpx.AsyncClient],
) -> None:
    app, client = app_client
    h = headers(PR_COMMAND, delivery_id="d-1")
    response = await client.post("/webhooks", content=PR_COMMAND, headers=h)
    assert (response.status_code, response.json()) == (202, {"status": "accepted"})
    delivery = await store_of(app).get_delivery("d-1")
    assert delivery is not None
    assert (delivery.event, delivery.action, delivery.payload) == ("issue_comment", "created", PR_COMMAND)
    payload = json.loads(PR_COMMAND)
    [job] = await job_rows(app)
    assert job["key"] == f"{payload['repository']['full_name']}#{payload['issue']['number']}"
    assert (job["delivery_id"], job["state"], job["kind"]) == ("d-1", "queued", "delivery")


@pytest.mark.anyio
@pytest.mark.parametrize(
    "signature",
    [
        None,
        "sha256=" + "0" * 64,
        sign(PR_COMMENT, "another secret"),
        sign(PR_COMMENT + b" ", SECRET),
        "sha1=" + hmac.new(SECRET.encode(), PR_COMMENT, hashlib.sha1).hexdigest(),
        sign(PR_COMMENT, SECRET).removeprefix("sha256="),
        sign(PR_COMMENT, SECRET)[:-2],
    ],
    ids=["missing", "zeros", "other-secret", "other-body", "sha1-prefix", "no-prefix", "truncated"],
)
async def test_bad_signature_is_401_and_leaves_no_row(
    app_client: tuple[Starlette, httpx.AsyncClient], signature: str | None
) -> None:
    app, client = app_client
    h = headers(PR_COMMENT)
    del h["X-Hub-Signature-256"]
    if signature is not None:
        h["X-Hub-Signature-256"] = signature
    response = await client.post("/webhooks", content=PR_COMMENT, headers=h)
    assert response.status_code == 401
    assert response.json()["error"] == "signature"
    assert await stored_count(app) == 0
    assert await job_rows(app) == []


@pytest.mark.anyio
@pytest.mark.parametrize(
    "header",
    [
        {"X-Hub-Signature-256": "sha256=" + sign(PR_COMMENT, SECRET).removeprefix("sha256=").upper()},
        {"Content-Type": "application/json; charset=utf-8"},
    ],
    ids=["uppercase-hex-signature", "json-with-charset"],
)
async def test_equivalent_header_spellings_are_accepted(
    app_client: tuple[Starlette, httpx.AsyncClient], header: dict[str, str]
) -> None:
    _, client = app_client
    h = headers(PR_COMMENT) | header
    assert (await client.post("/webhooks", content=PR_COMMENT, headers=h)).status_code == 202


@pytest.mark.anyio
@pytest.mark.parametrize("missing", ["X-GitHub-Event", "X-GitHub-Delivery"])
async def test_missing_github_header_is_400(
    app_client: tuple[Starlette, httpx.AsyncClient], missing: str
) -> None:
    app, client = app_client
    h = headers(PR_COMMENT)
    del h[missing]
    response = await client.post("/webhooks", content=PR_COMMENT, headers=h)
    assert response.status_code == 400
    assert missing in response.json()["message"]
    assert await stored_count(app) == 0


@pytest.mark.anyio
@pytest.mark.parametrize("body", [b"not json", b"[1, 2]", b'"text"', '{"a": "é"}'.encode("utf-16")])
async def test_signed_body_that_is_not_a_json_object_is_400(
    app_client: tuple[Starlette, httpx.AsyncClient], body: bytes
) -> None:
    app, client = app_client
    response = await client.post("/webhooks", content=body, headers=headers(body))
    assert response.status_code == 400
    assert response.json()["error"] == "bad_json"
    assert await stored_count(app) == 0


@pytest.mark.anyio
async def test_form_encoded_delivery_is_415_with_the_fix(
    app_client: tuple[Starlette, httpx.AsyncClient],
) -> None:
    app, client = app_client
    body = b"payload=" + PR_COMMENT
    h = headers(body)
    h["Content-Type"] = "application/x-www-form-urlencoded"
    response = await client.post("/webhooks", content=body, headers=h)
    assert response.status_code == 415
    assert "application/json" in response.json()["message"]
    assert await stored_count(app) == 0


@pytest.mark.anyio
async def test_declared_length_over_25_mb_is_413_before_reading(
    app_client: tuple[Starlette, httpx.AsyncClient],
) -> None:
    app, client = app_client
    pulled: list[int] = []

    async def small_body() -> AsyncIterator[bytes]:
        pulled.append(len(PR_COMMENT))
        yield PR_COMMENT

    h = headers(PR_COMMENT)
    h["Content-Length"] = str(25 * 1024 * 1024 + 1)  # the body actually sent is small
    response = await client.post("/webhooks", content=small_body(), headers=h)
    assert response.status_code == 413
    assert pulled == []  # refused on the header alone: not a byte of the body was read
    assert await stored_count(app) == 0


@pytest.mark.anyio
async def test_streamed_body_over_the_cap_is_413(app_client: tuple[Starlette, httpx.AsyncClient]) -> None:
    app, client = app_client
    runtime_of(app).intake.max_body = 4096
    sent: list[int] = []

    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(100):  # 100 KB in 1 KB chunks, without a Content-Length
            sent.append(1024)
            yield b" " * 1024

    response = await client.post("/webhooks", content=chunks(), headers=headers(b""))
    assert response.status_code == 413
    assert len(sent) <= 6  # reading stopped at the cap instead of buffering the 100 KB
    assert await stored_count(app) == 0


@pytest.mark.anyio
async def test_redelivery_gets_the_same_202_and_keeps_one_row(
    app_client: tuple[Starlette, httpx.AsyncClient],
) -> None:
    app, client = app_client
    h = headers(PR_COMMAND, delivery_id="same-id")
    first = await client.post("/webhooks", content=PR_COMMAND, headers=h)
    again = await client.post("/webhooks", content=PR_COMMAND, headers=h)
    assert (first.status_code, first.json()) == (202, {"status": "accepted"})
    assert (again.status_code, again.json()) == (202, {"status": "duplicate"})
    assert await stored_count(app) == 1
    assert len(await job_rows(app)) == 1


@pytest.mark.anyio
async def test_concurrent_deliveries_are_each_stored_once(
    app_client: tuple[Starlette, httpx.AsyncClient],
) -> None:
    app, client = app_client
    results: list[tuple[str, str]] = []

    async def send(delivery: str) -> None:
        response = await client.post(
            "/webhooks", content=PR_COMMAND, headers=headers(PR_COMMAND, delivery_id=delivery)
        )
        assert response.status_code == 202
        results.append((delivery, response.json()["status"]))

    async with anyio.create_task_group() as tg:
        for i in range(40):
            tg.start_soon(send, f"distinct-{i}")
        for _ in range(10):
            tg.start_soon(send, "racing-redelivery")
    assert sorted(s for d, s in results if d.startswith("distinct")) == ["accepted"] * 40
    assert sorted(s for d, s in results if d == "racing-redelivery") == ["accepted"] + ["duplicate"] * 9
    assert await stored_count(app) == 41
    assert len(await job_rows(app)) == 41


@pytest.mark.anyio
async def test_database_failure_is_503_not_an_acknowledgement(
    app_client: tuple[Starlette, httpx.AsyncClient], caplog: pytest.LogCaptureFixture
) -> None:
    app, client = app_client
    async with store_of(app).write() as conn:
        await conn.execute(text("DROP TABLE jobs"))
    with caplog.at_level(logging.ERROR, logger="beam.intake"):
        response = await client.post(
            "/webhooks", content=PR_COMMAND, headers=headers(PR_COMMAND, delivery_id="lost")
        )
    assert response.status_code == 503
    assert response.json()["error"] == "store_error"
    assert "could not be stored" in caplog.text
    assert await store_of(app).get_delivery("lost") is None  # rolled back with the failed job insert


@pytest.mark.anyio
async def test_ping_is_answered_and_not_stored(app_client: tuple[Starlette, httpx.AsyncClient]) -> None:
    app, client = app_client
    body = raw_payload("ping.with-app_id.json")
    response = await client.post("/webhooks", content=body, headers=headers(body, event="ping"))
    assert (response.status_code, response.json()) == (200, {"status": "pong"})
    assert await stored_count(app) == 0


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("name", "event", "key"),
    [
        (
            "pull_request_review_comment.created.json",
            "pull_request_review_comment",
            "Codertocat/Hello-World#2",
        ),
        ("issue_comment.created.issue.json", "issue_comment", "Codertocat/Hello-World#1"),
        ("push.json", "push", "Codertocat/Hello-World"),
        ("installation.created.json", "installation", "global"),
    ],
)
async def test_job_key_comes_from_the_payload(
    app_client: tuple[Starlette, httpx.AsyncClient], name: str, event: str, key: str
) -> None:
    app, client = app_client
    data = json.loads(raw_payload(name))
    if "comment" in data:
        data["comment"]["body"] = "/beam summarize"  # a comment without a command makes no job
    body = json.dumps(data).encode()
    assert (
        await client.post("/webhooks", content=body, headers=headers(body, event=event))
    ).status_code == 202
    [job] = await job_rows(app)
    assert job["key"] == key


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("name", "event"),
    [
        ("issue_comment.created.pull_request.json", "issue_comment"),
        ("issue_comment.edited.issue.json", "issue_comment"),
        ("pull_request_review_comment.created.json", "pull_request_review_comment"),
        ("issue_comment.deleted.issue.json", "issue_comment"),
    ],
)
async def test_a_delivery_that_cannot_lead_to_work_is_stored_without_a_job(
    app_client: tuple[Starlette, httpx.AsyncClient], name: str, event: str
) -> None:
    app, client = app_client
    body = raw_payload(name)
    h = headers(body, event=event, delivery_id="quiet-1")
    first = await client.post("/webhooks", content=body, headers=h)
    again = await client.post("/webhooks", content=body, headers=h)
    assert (first.status_code, first.json()) == (202, {"status": "accepted"})
    assert (again.status_code, again.json()) == (202, {"status": "duplicate"})
    stored = await store_of(app).get_delivery("quiet-1")
    # Kept for dedupe and audit, without the body that nothing reads (issue 9).
    assert stored is not None and (stored.event, stored.payload) == (event, b"")
    assert stored.action == json.loads(body)["action"]
    assert await job_rows(app) == []
    samples = parse_metrics((await client.get("/metrics")).text)
    assert samples['beam_webhook_deliveries_total{outcome="no_work"}'] == 1
    assert samples['beam_webhook_deliveries_total{outcome="duplicate"}'] == 1


@pytest.mark.anyio
async def test_webhooks_other_methods_and_an_intake_bug_get_clear_answers(
    app_client: tuple[Starlette, httpx.AsyncClient],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # POST /webhooks skips Starlette's router and error middleware: the rest of what they gave
    # (405 for another method, a 500 and a logged traceback for a bug) must still hold.
    app, client = app_client
    assert (await client.get("/webhooks")).status_code == 405

    def broken(event: str, payload: object) -> bool:
        raise RuntimeError("a bug in triage")

    monkeypatch.setattr("bot.app.web.intake.can_lead_to_work", broken)
    with caplog.at_level(logging.ERROR, logger="beam.intake"):
        response = await client.post(
            "/webhooks", content=PR_COMMENT, headers=headers(PR_COMMENT, delivery_id="bug")
        )
    assert (response.status_code, response.json()["error"]) == (500, "internal_error")
    assert "a bug in triage" in caplog.text
    assert await store_of(app).get_delivery("bug") is None  # not acknowledged, so not kept


@pytest.mark.anyio
async def test_setup_mode_names_the_address_the_client_used() -> None:
    # Without BEAM_PUBLIC_URL the refusal points at the host the request was sent to.
    intake = WebhookIntake(Metrics())
    scope = {
        "type": "http",
        "scheme": "http",
        "path": "/webhooks",
        "root_path": "",
        "query_string": b"",
        "server": ("127.0.0.1", 8080),
        "headers": [(b"host", b"bot.example:8080"), (b"x-github-event", b"ping")],
    }

    async def receive() -> dict[str, object]:
        return {"type": "http.request", "body": b"{}", "more_body": False}

    status, body, _ = await intake.answer(scope, receive)
    assert status == 503
    assert json.loads(body)["message"] == (
        "beam-bot is in setup mode: open http://bot.example:8080/ to register the GitHub App"
    )


@pytest.mark.anyio
async def test_an_operator_can_keep_the_bodies_of_ignored_deliveries(tmp_path: Path) -> None:
    body = raw_payload("issue_comment.edited.issue.json")
    settings = registered_settings(tmp_path, SECRET, keep_ignored_payloads=True)
    async with running_app(settings) as (app, client):
        response = await client.post("/webhooks", content=body, headers=headers(body, delivery_id="kept-1"))
        assert response.status_code == 202
        stored = await store_of(app).get_delivery("kept-1")
        assert stored is not None and stored.payload == body
        assert await job_rows(app) == []


@pytest.mark.anyio
async def test_delivery_log_line_has_no_body_or_signature(
    app_client: tuple[Starlette, httpx.AsyncClient], caplog: pytest.LogCaptureFixture
) -> None:
    _, client = app_client
    h = headers(PR_COMMAND, delivery_id="logged-1")
    with caplog.at_level(logging.DEBUG, logger="beam.intake"):
        await client.post("/webhooks", content=PR_COMMAND, headers=h)
        bad = dict(h, **{"X-Hub-Signature-256": "sha256=" + "1" * 64, "X-GitHub-Delivery": "logged-2"})
        await client.post("/webhooks", content=PR_COMMAND, headers=bad)
    lines = [r.getMessage() for r in caplog.records if r.name == "beam.intake"]
    assert len(lines) == 2
    assert "id=logged-1 status=202 outcome=accepted" in lines[0]
    assert "event=issue_comment action=created" in lines[0]
    assert "id=logged-2 status=401 outcome=signature" in lines[1]
    text = "\n".join(lines)
    assert h["X-Hub-Signature-256"].removeprefix("sha256=") not in text
    assert "1" * 64 not in text
    assert json.loads(PR_COMMAND)["comment"]["body"][:20] not in text


_SAMPLE = re.compile(
    r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*",?)*\})? (\S+)$'
)


def parse_metrics(text: str) -> dict[str, float]:
    """Every sample as `name{labels}` -> value; fails on any line that is not valid exposition."""
    samples: dict[str, float] = {}
    types: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("# HELP "):
            continue
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            assert kind in ("counter", "gauge", "histogram"), line
            types[name] = kind
            continue
        match = _SAMPLE.match(line)
        assert match, f"not a metrics line: {line!r}"
        name, labels, value = match.group(1), match.group(2) or "", match.group(3)
        family = re.sub(r"_(bucket|sum|count)$", "", name) if name not in types else name
        assert family in types, f"sample without # TYPE: {line!r}"
        # Label order carries no meaning in the format: keys list the labels sorted by name.
        pairs = sorted(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*")', labels))
        samples[name + ("{" + ",".join(pairs) + "}" if pairs else "")] = float(value)
    return samples


@pytest.mark.anyio
async def test_metrics_and_health(app_client: tuple[Starlette, httpx.AsyncClient]) -> None:
    app, client = app_client
    h = headers(PR_COMMAND, delivery_id="m-1")
    await client.post("/webhooks", content=PR_COMMAND, headers=h)
    await client.post("/webhooks", content=PR_COMMAND, headers=h)
    await client.post("/webhooks", content=PR_COMMAND, headers=dict(h, **{"X-Hub-Signature-256": "x"}))
    runtime_of(app).metrics.observe_run(42.0)

    response = await client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    samples = parse_metrics(response.text)
    assert samples['beam_webhook_deliveries_total{outcome="accepted"}'] == 1
    assert samples['beam_webhook_deliveries_total{outcome="duplicate"}'] == 1
    assert samples['beam_webhook_rejections_total{reason="signature"}'] == 1
    assert samples['beam_mode{mode="normal"}'] == 1
    assert samples["beam_deliveries_stored"] == 1
    assert samples['beam_jobs{state="queued"}'] == 1
    assert samples['beam_run_duration_seconds_bucket{le="30.0",outcome="success"}'] == 0
    assert samples['beam_run_duration_seconds_bucket{le="60.0",outcome="success"}'] == 1
    assert samples['beam_run_duration_seconds_bucket{le="+Inf",outcome="success"}'] == 1
    assert samples['beam_run_duration_seconds_sum{outcome="success"}'] == 42.0

    health = await client.get("/healthz")
    assert (health.status_code, health.json()) == (200, {"status": "ok", "mode": "normal"})


@pytest.mark.anyio
async def test_github_calls_are_counted(settings: Settings) -> None:
    fake = FakeGitHub()
    async with running_app(settings, github_transport=fake.transport()) as (app, client):
        github = runtime_of(app).github
        assert github is not None
        assert (await github.get("/app")).status_code == 401  # no App JWT: GitHub's answer, a 4xx
        samples = parse_metrics((await client.get("/metrics")).text)
        assert samples['beam_github_requests_total{code="4xx",method="GET"}'] == 1
        assert [c.path for c in fake.calls] == ["/app"]
        assert fake.calls[0].headers["x-github-api-version"] == "2022-11-28"


@pytest.mark.anyio
async def test_github_transport_errors_are_counted(app_client: tuple[Starlette, httpx.AsyncClient]) -> None:
    app, client = app_client
    with socket.socket() as sock:  # a loopback port nobody listens on: the connection is refused
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    github = runtime_of(app).github
    assert github is not None
    with pytest.raises(httpx.ConnectError):
        await github.get(f"http://127.0.0.1:{port}/rate_limit")
    samples = parse_metrics((await client.get("/metrics")).text)
    assert samples['beam_github_errors_total{kind="ConnectError"}'] == 1
