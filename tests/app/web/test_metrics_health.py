"""/metrics from prometheus_client (a registry per app) and /readyz: store writes, workers, credentials."""

from __future__ import annotations

import logging
import sqlite3
import time
from pathlib import Path

import anyio
import httpx
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from bot.app.github.api import GitHubApi, RetryPolicy
from bot.app.github.client import GitHubApp, InstallationClient
from bot.app.jobs.queue import Job
from bot.app.jobs.store import pending_pushes
from bot.app.settings import Settings
from bot.app.web import health
from bot.app.web.metrics import Metrics, MetricsTransport
from tests.app.web.test_intake import parse_metrics
from tests.support.fake_github import FakeGitHub, shared_app_key
from tests.support.web_app import registered_settings, running_app, runtime_of, store_of

SECRET = "whsec-0123456789-abcdef"


def settings_for(tmp_path: Path, key: str | None = None, **extra: object) -> Settings:
    if key is not None:
        extra["private_key"] = key
    return registered_settings(tmp_path, SECRET, github_api_url="http://github.test", **extra)


async def idle_handler(job: Job) -> None:
    return None


async def wait_for(predicate: object, seconds: float = 10.0) -> None:
    with anyio.fail_after(seconds):
        while not predicate():  # type: ignore[operator]
            await anyio.sleep(0.02)


def test_each_app_has_its_own_registry() -> None:
    first, second = Metrics(), Metrics()
    first.delivery("accepted")
    assert (
        parse_metrics(first.render(mode="normal"))['beam_webhook_deliveries_total{outcome="accepted"}'] == 1
    )
    assert 'beam_webhook_deliveries_total{outcome="accepted"}' not in parse_metrics(
        second.render(mode="normal")
    )


def test_process_metrics_are_exposed() -> None:
    samples = parse_metrics(Metrics().render(mode="setup"))
    assert samples["process_resident_memory_bytes"] > 0
    assert samples["process_cpu_seconds_total"] >= 0
    assert samples["process_open_fds"] >= 3
    assert samples['beam_mode{mode="setup"}'] == 1


def test_skill_runs_are_timed_by_skill_and_count_tokens() -> None:
    metrics = Metrics()
    metrics.observe_skill_run("review", "succeeded", 12.0, 1000, 50)
    metrics.observe_skill_run("review", "failed", 2.0, 10, 0)
    metrics.observe_skill_run("consume", "succeeded", 3.0, 7, 3)
    samples = parse_metrics(metrics.render(mode="normal"))
    assert samples['beam_skill_run_duration_seconds_count{skill="review",status="succeeded"}'] == 1
    assert samples['beam_skill_run_duration_seconds_sum{skill="review",status="succeeded"}'] == 12.0
    assert samples['beam_skill_run_duration_seconds_bucket{le="15.0",skill="review",status="succeeded"}'] == 1
    assert samples['beam_llm_tokens_total{kind="prompt",skill="review"}'] == 1010
    assert samples['beam_llm_tokens_total{kind="completion",skill="consume"}'] == 3


@pytest.mark.anyio
async def test_rate_limit_per_installation_and_api_retries() -> None:
    fake = FakeGitHub()
    fake.add_repo("octo/one", installation_id=11)
    fake.add_repo("octo/two", installation_id=22)
    metrics = Metrics()

    async def no_sleep(seconds: float) -> None:
        return None

    transport = MetricsTransport(fake.transport(), metrics)
    async with httpx.AsyncClient(transport=transport, base_url="http://github.test") as http:
        api = GitHubApi(
            http,
            base_url="http://github.test",
            stats=metrics.github_stats,
            sleep=no_sleep,
            retry=RetryPolicy(max_attempts=3),
        )
        app = GitHubApp(api, fake.app_id, shared_app_key().private_pem)
        # The fake counts its limit down by one per call and reports what is left.
        fake.rate_limit.remaining = 4000
        await InstallationClient(app, 11).get_repo("octo", "one")
        after_one = fake.rate_limit.remaining
        fake.rate_limit.remaining = 3000
        fake.inject("GET", r"^/repos/octo/two$", status=502, times=1)
        await InstallationClient(app, 22).get_repo("octo", "two")
        after_two = fake.rate_limit.remaining
        await app.get_app()
        after_app = fake.rate_limit.remaining
    samples = parse_metrics(metrics.render(mode="normal"))
    assert 3990 < after_one < 4000 and 2990 < after_two < 3000
    assert samples['beam_github_rate_limit_remaining{installation="11"}'] == after_one
    assert samples['beam_github_rate_limit_remaining{installation="22"}'] == after_two
    assert samples['beam_github_rate_limit_remaining{installation="app"}'] == after_app
    assert samples["beam_github_api_retries_total"] == 1


@pytest.mark.anyio
async def test_held_pushes_and_queue_by_state(tmp_path: Path) -> None:
    async with running_app(settings_for(tmp_path), github_transport=FakeGitHub().transport()) as (
        app,
        client,
    ):
        store = store_of(app)
        now = time.time()
        async with store.write() as conn:
            for i, state in enumerate(["pending", "pending", "pushed", "rejected"]):
                await conn.execute(
                    pending_pushes.insert().values(id=f"p{i}", repo="octo/one", state=state, created_at=now)
                )
        samples = parse_metrics((await client.get("/metrics")).text)
    assert samples['beam_held_pushes{state="pending"}'] == 2
    assert samples['beam_held_pushes{state="pushed"}'] == 1
    assert samples['beam_jobs{state="queued"}'] == 0
    assert samples["beam_oldest_queued_job_age_seconds"] == 0


@pytest.mark.anyio
async def test_readyz_is_ready_when_store_workers_and_credentials_work(tmp_path: Path) -> None:
    fake = FakeGitHub()
    async with running_app(
        settings_for(tmp_path), handler=idle_handler, github_transport=fake.transport()
    ) as (app, client):
        runtime = runtime_of(app)
        check = runtime.credentials_check
        assert check is not None
        await wait_for(lambda: check.state == "ok")
        response = await client.get("/readyz")
        assert response.status_code == 200, response.json()
        body = response.json()
        assert body["status"] == "ready"
        assert body["checks"]["store"] == "ok" and body["checks"]["credentials"] == "ok"
        assert body["checks"]["workers"].startswith("running")
        assert [c.path for c in fake.calls if c.path == "/app"] == ["/app"]

        # Workers that stop while the app runs make it unready; liveness is unaffected.
        assert runtime.workers is not None
        runtime.workers.stop()
        await wait_for(lambda: not runtime.workers_alive())
        response = await client.get("/readyz")
        assert response.status_code == 503
        assert response.json()["checks"]["workers"] == "not running"
        assert (await client.get("/healthz")).status_code == 200


@pytest.mark.anyio
async def test_a_key_github_refuses_is_logged_and_makes_the_app_unready(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    wrong = (
        rsa.generate_private_key(public_exponent=65537, key_size=2048)
        .private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        .decode()
    )
    caplog.set_level(logging.INFO, logger="beam.health")
    async with running_app(
        settings_for(tmp_path, key=wrong), handler=idle_handler, github_transport=FakeGitHub().transport()
    ) as (app, client):
        check = runtime_of(app).credentials_check
        assert check is not None
        await wait_for(lambda: check.state == "refused")
        response = await client.get("/readyz")
        assert response.status_code == 503
        assert response.json()["checks"]["credentials"] == "GitHub answered 401 to GET /app"
    refused = [r for r in caplog.records if r.name == "beam.health" and r.levelno == logging.ERROR]
    assert len(refused) == 1
    assert "GitHub refuses the App's credentials" in refused[0].getMessage()
    assert "BEGIN" not in caplog.text  # the key itself is never logged


@pytest.mark.anyio
async def test_readyz_reports_a_store_that_does_not_accept_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(health, "STORE_TIMEOUT", 0.5)
    async with running_app(settings_for(tmp_path), github_transport=FakeGitHub().transport()) as (
        _app,
        client,
    ):
        assert (await client.get("/readyz")).status_code == 200
        # Another process holds SQLite's write lock: intake could not store a delivery now either.
        other = sqlite3.connect(tmp_path / "work" / "beam.db", isolation_level=None, timeout=1)
        try:
            other.execute("BEGIN IMMEDIATE")
            response = await client.get("/readyz")
            assert response.status_code == 503
            assert response.json()["checks"]["store"] == "no answer to a write in 0.5 s"
        finally:
            other.execute("ROLLBACK")
            other.close()
        # The probe was left to finish rather than cancelled; the store answers again.
        with anyio.fail_after(30):
            while (await client.get("/readyz")).status_code != 200:
                await anyio.sleep(0.05)


@pytest.mark.anyio
async def test_setup_mode_is_ready_to_serve_the_setup_page(tmp_path: Path) -> None:
    settings = Settings(_env_file=None, work_dir=tmp_path / "work")
    async with running_app(settings) as (_, client):
        response = await client.get("/readyz")
    assert response.status_code == 200
    assert response.json()["mode"] == "setup"
    assert response.json()["checks"]["credentials"] == "not registered (setup mode)"


@pytest.mark.anyio
async def test_metrics_are_not_served_on_the_public_port_without_a_token(tmp_path: Path) -> None:
    """Issue 32: /metrics tells who uses the App and how; with no BEAM_METRICS_TOKEN, nobody sees it
    on the public port (BEAM_METRICS_LISTEN serves it elsewhere)."""
    settings = settings_for(tmp_path, metrics_token=None)
    async with running_app(settings, github_transport=FakeGitHub().transport()) as (app, client):
        assert (await client.get("/metrics")).status_code == 404
        # The app BEAM_METRICS_LISTEN serves answers without one.
        transport = httpx.ASGITransport(app=app.state.metrics_app)
        async with httpx.AsyncClient(transport=transport, base_url="http://metrics.test") as private:
            response = await private.get("/metrics")
            assert response.status_code == 200 and "beam_mode" in response.text
            assert (await private.post("/webhooks")).status_code in (404, 405)  # nothing else there


@pytest.mark.anyio
async def test_metrics_on_the_public_port_need_the_bearer_token(tmp_path: Path) -> None:
    settings = settings_for(tmp_path, metrics_token="a-long-metrics-token-42")
    async with running_app(settings, github_transport=FakeGitHub().transport()) as (_, client):
        for auth in (None, "Bearer wrong-token", "Basic a-long-metrics-token-42", "Bearer "):
            headers = {"Authorization": auth} if auth is not None else {}
            client.headers.pop("Authorization", None)
            refused = await client.get("/metrics", headers=headers)
            assert refused.status_code == 401, auth
            assert refused.headers["www-authenticate"].startswith("Bearer")
            assert "beam_" not in refused.text
        ok = await client.get("/metrics", headers={"Authorization": "Bearer a-long-metrics-token-42"})
        assert ok.status_code == 200 and "beam_mode" in ok.text


def test_metrics_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="BEAM_METRICS_TOKEN is too short"):
        Settings(_env_file=None, metrics_token="short")  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="BEAM_METRICS_LISTEN must be host:port"):
        Settings(_env_file=None, metrics_listen="9090")  # type: ignore[call-arg]
    listen = Settings(_env_file=None, metrics_listen="[::1]:9090")  # type: ignore[call-arg]
    assert listen.metrics_address == ("::1", 9090)
