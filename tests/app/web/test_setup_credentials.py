"""Issue 23: the setup page keeps the App's credentials in the database, sealed with BEAM_SECRET_KEY,
and a process on another host (an empty work directory, the same database and key) serves the App.

The registration runs on the fake GitHub's web pages (`tests/support/fake_github_web.py`) over real
HTTP; the second process is a real `beam-bot worker`, which must start out of setup mode and get
GitHub to accept its JWT, and an in-process app whose GitHub client gets an installation token.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from cryptography.fernet import Fernet
from sqlalchemy import text

from bot.app.github.client import GitHubApi, GitHubApp
from bot.app.settings import Settings
from bot.app.web.setup import SetupFlow
from tests.support.fake_github import FakeGitHub, checked_fake_github
from tests.support.fake_github_web import FakeGitHubWeb, serve_fake_github_web
from tests.support.openai_server import without_model_env
from tests.support.setup_flow import register_app
from tests.support.web_app import running_app, runtime_of, store_of
from tests.support.webhooks import delivery, raw_payload

PUBLIC = "https://bot.example.org"
TOKEN = "setup-token-for-the-tests"
APP_ID = 1000  # the first App the fake's web pages create
INSTALLATION = 31
KEY = Fernet.generate_key().decode()
_COMMAND = json.loads(raw_payload("issue_comment.created.issue.json"))
_COMMAND["comment"]["body"] = "/beam summarize"
BODY = json.dumps(_COMMAND).encode()
ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    with checked_fake_github(api_prefix="/api/v3", app_id=APP_ID) as fake:
        fake.add_installation(INSTALLATION, "octo-org")
        yield fake


@pytest.fixture
def web(fake: FakeGitHub) -> FakeGitHubWeb:
    return FakeGitHubWeb(fake)


@pytest.fixture
def api_url(web: FakeGitHubWeb) -> Iterator[str]:
    with serve_fake_github_web(web) as url:
        yield url


def host_settings(work_dir: Path, db_url: str, api_url: str, **values: Any) -> Settings:
    """One host's settings: its own work directory, the shared database."""
    return Settings(  # type: ignore[call-arg]
        _env_file=None,
        work_dir=work_dir,
        database_url=db_url,
        github_api_url=api_url,
        public_url=PUBLIC,
        setup_token=TOKEN,
        **values,
    )


async def stored_rows(db_url: str, work_dir: Path, api_url: str) -> list[dict[str, Any]]:
    settings = host_settings(work_dir, db_url, api_url, secret_key=KEY)
    async with running_app(settings) as (app, _), store_of(app).read() as conn:
        rows = (await conn.execute(text("SELECT app_id, sealed FROM app_credentials"))).all()
    return [dict(r._mapping) for r in rows]


async def wait_until(check: Any, what: str, timeout: float = 90.0) -> None:
    with anyio.move_on_after(timeout):
        while not check():
            await anyio.sleep(0.1)
        return
    raise AssertionError(f"timed out waiting for {what}")


def start_worker(work_dir: Path, db_url: str, api_url: str, log: Path) -> subprocess.Popen[bytes]:
    keep = without_model_env(os.environ)
    env = {
        **keep,
        "BEAM_WORK_DIR": str(work_dir),
        "BEAM_DATABASE_URL": db_url,
        "BEAM_SECRET_KEY": KEY,
        "BEAM_GITHUB_API_URL": api_url,
        "BEAM_QUEUE_POLL_INTERVAL": "0.2",
    }
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "bot.cli", "worker"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


async def register_on_host_a(tmp_path: Path, db_url: str, api_url: str, web: FakeGitHubWeb) -> str:
    """Host A registers the App through the setup page; returns the App's webhook secret."""
    host_a = host_settings(tmp_path / "host-a", db_url, api_url, secret_key=KEY)
    async with running_app(host_a) as (app, client):
        await client.get("/", params={"token": TOKEN})
        page = (await client.get("/")).text
        assert "sealed with <code>BEAM_SECRET_KEY</code>" in page
        assert str(host_a.credentials_path) not in page
        done = await register_app(client, TOKEN)
        assert done.status_code == 200, done.text
        assert runtime_of(app).mode == "normal"
        secret = web.created[0].webhook_secret
        accepted = await client.post(
            "/webhooks",
            content=BODY,
            headers=delivery("issue_comment", BODY, secret, delivery_id="a-1").headers,
        )
        assert accepted.status_code == 202
    # Nothing on host A's disk that another host would need.
    assert not host_a.credentials_path.exists()
    return secret


@pytest.mark.anyio
async def test_the_setup_page_seals_the_registration_in_the_database(
    tmp_path: Path, db_url: str, fake: FakeGitHub, web: FakeGitHubWeb, api_url: str
) -> None:
    secret = await register_on_host_a(tmp_path, db_url, api_url, web)
    [row] = await stored_rows(db_url, tmp_path / "reader", api_url)
    assert row["app_id"] == APP_ID  # in clear; the rest sealed
    for secret_text in (fake.key.private_pem.splitlines()[1], secret, "BEGIN"):
        assert secret_text not in row["sealed"]


@pytest.mark.anyio
async def test_hosts_with_an_empty_work_dir_serve_the_app_registered_on_another(
    tmp_path: Path, db_url: str, fake: FakeGitHub, web: FakeGitHubWeb, api_url: str
) -> None:
    secret = await register_on_host_a(tmp_path, db_url, api_url, web)

    # Host B, in process: an empty work directory, the same database and key.
    host_b = host_settings(tmp_path / "host-b", db_url, api_url, secret_key=KEY)
    async with running_app(host_b) as (app, client):
        runtime = runtime_of(app)
        assert runtime.mode == "normal"
        creds = runtime.credentials
        assert creds is not None and (creds.app_id, creds.source) == (APP_ID, "database")
        assert runtime.github is not None
        github = GitHubApp(GitHubApi(runtime.github, base_url=api_url), creds.app_id, creds.private_key)
        token = await github.installation_token(INSTALLATION)
        assert token.get_secret_value()
        late = await client.post(
            "/webhooks",
            content=BODY,
            headers=delivery("issue_comment", BODY, secret, delivery_id="b-1").headers,
        )
        assert late.status_code == 202
    assert not host_b.credentials_path.exists()
    assert [c.status for c in fake.calls_to("apps/create-installation-access-token")] == [201]

    # Host C, a real `beam-bot worker` that never saw the setup page: GitHub accepts its JWT. Host B's
    # own start-up check of GET /app may or may not have run before it stopped, and C asks it once
    # for the check and again for its login when that comes first: every answer since is a 200.
    before = len(fake.calls_to("apps/get-authenticated"))
    log = tmp_path / "worker-c.log"
    worker = start_worker(tmp_path / "host-c", db_url, api_url, log)
    try:
        await wait_until(
            lambda: worker.poll() is not None or "credentials from database" in log.read_text(), "the start"
        )
        assert worker.poll() is None, log.read_text()
        assert f"beam-bot serves GitHub App {APP_ID} (credentials from database)" in log.read_text()
        await wait_until(lambda: "GitHub accepts the App's credentials" in log.read_text(), "GET /app")
        statuses = [c.status for c in fake.calls_to("apps/get-authenticated")[before:]]
        assert statuses and set(statuses) == {200}, statuses
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(timeout=60)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait(timeout=10)
    assert worker.returncode == 0, log.read_text()
    assert not (tmp_path / "host-c" / "app-credentials.json").exists()


@pytest.mark.anyio
async def test_a_second_registration_adopts_the_app_another_process_stored(
    tmp_path: Path, db_url: str, fake: FakeGitHub, web: FakeGitHubWeb, api_url: str
) -> None:
    """Two servers in setup mode on one database: the second one's callback serves the first App
    instead of creating another (BEM-379), and GitHub converts no second code."""
    first = host_settings(tmp_path / "a", db_url, api_url, secret_key=KEY)
    # It does not look for the first one's registration on its own (that is the next test).
    second = host_settings(tmp_path / "b", db_url, api_url, secret_key=KEY, setup_poll_interval=0)
    async with running_app(second) as (app_b, client_b):
        state = runtime_of(app_b).setup.new_state()
        async with running_app(first) as (_, client_a):
            assert (await register_app(client_a, TOKEN)).status_code == 200
        late = await client_b.get("/setup/callback", params={"code": "another-code", "state": state})
        assert late.status_code == 409
        assert "BEM-379" in late.text and f"App {APP_ID}" in late.text
        assert runtime_of(app_b).mode == "normal"
    assert len(fake.calls_to("apps/create-from-manifest")) == 1


@pytest.mark.anyio
async def test_a_server_in_setup_mode_serves_the_app_another_host_registers_without_a_restart(
    tmp_path: Path, db_url: str, fake: FakeGitHub, web: FakeGitHubWeb, api_url: str
) -> None:
    host_b = host_settings(tmp_path / "host-b", db_url, api_url, secret_key=KEY, setup_poll_interval=0.2)
    async with running_app(host_b) as (app, client):
        runtime = runtime_of(app)
        assert runtime.mode == "setup"
        secret = await register_on_host_a(tmp_path, db_url, api_url, web)
        await wait_until(lambda: runtime.mode == "normal", "host B to take the registration", 30)
        creds = runtime.credentials
        assert creds is not None and (creds.app_id, creds.source) == (APP_ID, "database")
        accepted = await client.post(
            "/webhooks",
            content=BODY,
            headers=delivery("issue_comment", BODY, secret, delivery_id="b-late").headers,
        )
        assert accepted.status_code == 202
        again = await client.get("/setup/callback", params={"code": "another", "state": "x"})
        assert again.status_code == 409  # its setup page is closed: no second App
    assert len(fake.calls_to("apps/create-from-manifest")) == 1


@pytest.mark.anyio
async def test_a_server_in_setup_mode_with_another_key_says_so_once_and_stays_in_setup_mode(
    tmp_path: Path, db_url: str, web: FakeGitHubWeb, api_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    other = Fernet.generate_key().decode()
    host_b = host_settings(tmp_path / "host-b", db_url, api_url, secret_key=other, setup_poll_interval=0.1)
    async with running_app(host_b) as (app, _):
        await register_on_host_a(tmp_path, db_url, api_url, web)

        def said() -> list[str]:
            return [r.getMessage() for r in caplog.records if r.getMessage().startswith("setup mode:")]

        await wait_until(lambda: bool(said()), "host B to find credentials it cannot open", 30)
        await anyio.sleep(0.5)  # five more looks
        assert len(said()) == 1 and "BEM-375" in said()[0], said()
        assert runtime_of(app).mode == "setup"


@pytest.mark.anyio
@pytest.mark.postgres
async def test_postgres_without_a_key_explains_what_to_set_and_registers_nothing(
    tmp_path: Path, empty_pg_url: str, fake: FakeGitHub, api_url: str
) -> None:
    settings = host_settings(tmp_path / "work", empty_pg_url, api_url)
    async with running_app(settings) as (app, client):
        await client.get("/", params={"token": TOKEN})
        page = await client.get("/")
        assert page.status_code == 200
        assert 'id="secret-key-needed"' in page.text
        assert "set BEAM_SECRET_KEY=&lt;a Fernet key&gt; on every host" in page.text
        assert "beam-bot secret-key" in page.text
        assert 'method="post"' not in page.text  # no registration form: GitHub creates nothing
        setup = runtime_of(app).setup
        assert isinstance(setup, SetupFlow)
        refused = await client.get("/setup/callback", params={"code": "c0de1", "state": setup.new_state()})
        assert refused.status_code == 503
        assert "BEM-378" in refused.text and "BEAM_SECRET_KEY" in refused.text
        assert runtime_of(app).mode == "setup"
    assert fake.calls_to("apps/create-from-manifest") == []
    assert not settings.credentials_path.exists()


@pytest.mark.anyio
async def test_sqlite_without_a_key_keeps_the_file_as_before(
    tmp_path: Path, fake: FakeGitHub, api_url: str
) -> None:
    settings = Settings(
        _env_file=None,
        work_dir=tmp_path / "work",
        github_api_url=api_url,
        public_url=PUBLIC,
        setup_token=TOKEN,
    )
    async with running_app(settings) as (app, client):
        assert (await register_app(client, TOKEN)).status_code == 200
        assert runtime_of(app).credentials is not None
        async with store_of(app).read() as conn:
            assert (await conn.execute(text("SELECT count(*) FROM app_credentials"))).scalar() == 0
    assert json.loads(settings.credentials_path.read_text())["app_id"] == APP_ID
