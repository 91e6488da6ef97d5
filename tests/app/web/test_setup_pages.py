"""Setup mode's guards: the token gate, the localhost trap, the App name, GHE.com, a retryable callback."""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from pydantic import ValidationError
from starlette.applications import Starlette

from bot.app.settings import Settings
from bot.app.web.setup import MAX_APP_NAME, suggest_name, unreachable_reason
from tests.app.web.test_setup_mode import NEW_SECRET, PUBLIC, TOKEN, form_of, setup_settings, unlock
from tests.support.fake_github import FakeGitHub, checked_fake_github, shared_app_key
from tests.support.web_app import running_app, runtime_of


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    with checked_fake_github() as fake:
        fake.register_manifest_code(
            "c0de1", app_id=777, slug="beam-test", pem=shared_app_key().private_pem, webhook_secret=NEW_SECRET
        )
        yield fake


@asynccontextmanager
async def client_at(app: Starlette, base_url: str) -> AsyncIterator[httpx.AsyncClient]:
    """A browser that reached the app at `base_url` (what the page sees as its own address)."""
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=base_url) as client:
        yield client


def state_of(page: str) -> str:
    action, _ = form_of(page)
    return parse_qs(urlsplit(action).query)["state"][0]


@pytest.mark.anyio
async def test_the_page_needs_the_token_from_the_log(
    tmp_path: Path, fake: FakeGitHub, caplog: pytest.LogCaptureFixture
) -> None:
    settings = Settings(_env_file=None, work_dir=tmp_path / "work", public_url=PUBLIC)
    with caplog.at_level(logging.WARNING):
        async with running_app(settings, github_transport=fake.transport()) as (app, client):
            token = runtime_of(app).setup.token
            [line] = [r.getMessage() for r in caplog.records if "setup mode" in r.getMessage()]
            assert (
                line == f"beam-bot is in setup mode: open {PUBLIC}/?token={token} to register the GitHub App"
            )

            locked = await client.get("/")
            assert locked.status_code == 401
            assert "setup token" in locked.text and "BEAM_SETUP_TOKEN" in locked.text
            assert "docker logs" in locked.text
            assert 'name="manifest"' not in locked.text

            assert (await client.get("/", params={"token": " "})).status_code == 401  # an empty form
            wrong = await client.get("/", params={"token": "x" * len(token)})
            assert wrong.status_code == 403
            assert 'name="manifest"' not in wrong.text

            opened = await client.get("/", params={"token": token, "org": "my-org"})
            assert opened.status_code == 303
            # The token leaves the address bar; the cookie carries it.
            assert opened.headers["location"] == "/?org=my-org"
            assert "httponly" in opened.headers["set-cookie"].lower()
            page = await client.get(opened.headers["location"])
            assert page.status_code == 200
            action, _ = form_of(page.text)
            assert "/organizations/my-org/settings/apps/new" in action

        # A new start, a new token: the old cookie no longer opens the page.
        async with running_app(settings, github_transport=fake.transport()) as (app, client):
            client.cookies.set("beam_setup_token", token)
            assert runtime_of(app).setup.token != token
            assert (await client.get("/")).status_code == 401


@pytest.mark.anyio
async def test_a_loopback_address_explains_the_two_ways_out(tmp_path: Path, fake: FakeGitHub) -> None:
    settings = Settings(_env_file=None, work_dir=tmp_path / "work", setup_token=TOKEN, port=9090)
    async with (
        running_app(settings, github_transport=fake.transport()) as (app, _),
        client_at(app, "http://localhost:9090") as client,
    ):
        await unlock(client)
        page = await client.get("/")
        assert page.status_code == 200
        assert 'name="manifest"' not in page.text  # registration is not offered
        text = page.text
        assert "http://localhost:9090" in text and "loopback address" in text
        assert "BEAM_WEBHOOK_PROXY_URL=https://smee.io/&lt;channel&gt; beam-bot serve --port 9090" in text
        assert "BEAM_PUBLIC_URL=https://&lt;that address&gt;" in text
        # What the App will ask for is listed all the same, with the reasons.
        for permission in ("contents", "pull_requests", "issues", "checks", "metadata"):
            assert f"<code>{permission}</code>" in text
        for event in ("issue_comment", "pull_request_review_comment", "pull_request"):
            assert f"<code>{event}</code>" in text


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("public_url", "api_url", "offered"),
    [
        ("http://192.168.1.20:8080", "https://api.github.com", False),
        ("http://10.0.0.5", "https://api.acme.ghe.com", False),
        # GitHub Enterprise Server usually shares the private network: only loopback is refused.
        ("http://10.0.0.5", "https://ghe.corp.example/api/v3", True),
        ("http://127.0.0.1:8080", "https://ghe.corp.example/api/v3", False),
        ("https://bot.example.org", "https://api.github.com", True),
    ],
)
async def test_an_explicit_public_url_is_checked_too(
    tmp_path: Path, fake: FakeGitHub, public_url: str, api_url: str, offered: bool
) -> None:
    settings = setup_settings(tmp_path, public_url=public_url, github_api_url=api_url)
    async with running_app(settings, github_transport=fake.transport()) as (_, client):
        await unlock(client)
        page = (await client.get("/")).text
        assert ('name="manifest"' in page) is offered
        if not offered:
            assert f"BEAM_PUBLIC_URL is <code>{public_url}</code>" in page


@pytest.mark.anyio
async def test_with_a_proxy_channel_a_laptop_can_register(tmp_path: Path, fake: FakeGitHub) -> None:
    channel = "https://smee.io/AbC123xyz"
    settings = Settings(
        _env_file=None, work_dir=tmp_path / "work", setup_token=TOKEN, webhook_proxy_url=channel
    )
    async with (
        running_app(settings, github_transport=fake.transport()) as (app, _),
        client_at(app, "http://127.0.0.1:8080") as client,
    ):
        await unlock(client)
        page = (await client.get("/")).text
        _, manifest = form_of(page)
        assert manifest["hook_attributes"]["url"] == channel
        # The browser follows the redirect, so the laptop's own address is right for it.
        assert manifest["redirect_url"] == "http://127.0.0.1:8080/setup/callback"
        assert "webhook proxy channel" in page
        assert "BEAM_PUBLIC_URL is not set" not in page


def test_unreachable_addresses() -> None:
    for url in ("http://localhost:8080", "http://app.localhost", "http://[::1]:80", "http://0.0.0.0:8080"):
        assert "loopback" in (unreachable_reason(url) or ""), url
    for url in ("http://172.17.0.2:8080", "http://100.64.1.1", "http://[fd00::1]", "http://169.254.1.1"):
        assert "private address" in (unreachable_reason(url) or ""), url
    for url in ("http://myhost:8080", "http://nas.local", "http://db.internal", "http://pi.home.arpa"):
        assert "local network name" in (unreachable_reason(url) or ""), url
    for url in ("https://bot.example.org", "http://140.82.112.3", "https://smee.io/abc"):
        assert unreachable_reason(url) is None, url
    assert unreachable_reason("http://10.1.2.3", private_ok=True) is None


@pytest.mark.anyio
async def test_the_app_name_is_unique_and_can_be_chosen(tmp_path: Path, fake: FakeGitHub) -> None:
    names = []
    for run in range(2):
        settings = setup_settings(tmp_path / str(run))
        async with running_app(settings, github_transport=fake.transport()) as (_, client):
            await unlock(client)
            page = (await client.get("/")).text
            _, manifest = form_of(page)
            names.append(manifest["name"])
            assert re.fullmatch(r"beam-bot-[0-9a-f]{6}", manifest["name"])
            # The suggestion is stable while the server runs.
            assert form_of((await client.get("/")).text)[1]["name"] == manifest["name"]
            _, chosen = form_of((await client.get("/", params={"name": "Our Beam"})).text)
            assert chosen["name"] == "Our Beam"
            _, for_org = form_of((await client.get("/", params={"org": "octo-org"})).text)
            assert for_org["name"].startswith("beam-bot-octo-org-")
            bad = await client.get("/", params={"name": "<script>"})
            assert bad.status_code == 400 and '<a href="/">Back to the setup page</a>' in bad.text
            assert "<script>" not in bad.text
    assert names[0] != names[1]
    long = suggest_name("beam-bot", "an-organization-with-a-very-long-name", "abc123")
    assert len(long) <= MAX_APP_NAME and long.endswith("-abc123")


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("api_url", "web_url"),
    [
        ("https://api.acme.ghe.com", "https://acme.ghe.com"),
        ("https://ghe.corp.example/api/v3", "https://ghe.corp.example"),
        ("https://api.github.com", "https://github.com"),
    ],
)
async def test_registration_goes_to_the_right_github(
    tmp_path: Path, fake: FakeGitHub, api_url: str, web_url: str
) -> None:
    settings = setup_settings(tmp_path, github_api_url=api_url)
    async with running_app(settings, github_transport=fake.transport()) as (_, client):
        await unlock(client)
        action, _ = form_of((await client.get("/")).text)
        assert action.startswith(f"{web_url}/settings/apps/new?state=")
        action, _ = form_of((await client.get("/", params={"org": "acme"})).text)
        assert action.startswith(f"{web_url}/organizations/acme/settings/apps/new?state=")


class FlakyTransport(httpx.AsyncBaseTransport):
    """The fake GitHub behind a network that drops the first `failures` requests."""

    def __init__(self, inner: httpx.AsyncBaseTransport, failures: int) -> None:
        self.inner = inner
        self.failures = failures

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self.failures > 0:
            self.failures -= 1
            raise httpx.ConnectError("connection reset", request=request)
        return await self.inner.handle_async_request(request)


@pytest.mark.anyio
@pytest.mark.parametrize("failure", ["network", "http-502"])
async def test_a_failed_conversion_is_retried_with_the_same_code(
    tmp_path: Path, fake: FakeGitHub, failure: str
) -> None:
    transport: httpx.AsyncBaseTransport = fake.transport()
    if failure == "network":
        transport = FlakyTransport(transport, failures=1)
    else:
        fake.inject("POST", r"^/app-manifests/[^/]+/conversions$", status=502, times=1)
    settings = setup_settings(tmp_path)
    async with running_app(settings, github_transport=transport) as (app, client):
        await unlock(client)
        state = state_of((await client.get("/")).text)
        failed = await client.get("/setup/callback", params={"code": "c0de1", "state": state})
        assert failed.status_code == 502
        retry = re.search(r'<a id="retry" href="([^"]+)">Try again</a>', failed.text)
        assert retry, failed.text
        assert runtime_of(app).mode == "setup"
        done = await client.get(retry.group(1).replace("&amp;", "&"))
        assert done.status_code == 200, done.text
        assert runtime_of(app).mode == "normal"
        assert 'id="install" href="https://github.com/apps/beam-test/installations/new"' in done.text
        # After setup the status page links to the installation page too.
        status = (await client.get("/")).text
        assert 'href="https://github.com/apps/beam-test/installations/new"' in status
    assert len(fake.calls_to("apps/create-from-manifest")) == (1 if failure == "network" else 2)


@pytest.mark.anyio
async def test_credentials_that_could_not_be_stored_are_kept_for_the_retry(
    tmp_path: Path, fake: FakeGitHub
) -> None:
    settings = setup_settings(tmp_path)
    async with running_app(settings, github_transport=fake.transport()) as (app, client):
        await unlock(client)
        state = state_of((await client.get("/")).text)
        settings.credentials_path.mkdir()  # a directory where the file goes: the write fails
        failed = await client.get("/setup/callback", params={"code": "c0de1", "state": state})
        assert failed.status_code == 500
        assert "GitHub created the App, but its credentials could not be written" in failed.text
        assert 'id="retry"' in failed.text
        settings.credentials_path.rmdir()
        done = await client.get("/setup/callback", params={"code": "c0de1", "state": state})
        assert done.status_code == 200, done.text
        assert runtime_of(app).mode == "normal"
        assert settings.credentials_path.is_file()
    # GitHub converts a code once: the retry used the App converted the first time.
    assert len(fake.calls_to("apps/create-from-manifest")) == 1


def test_setup_settings_are_validated() -> None:
    with pytest.raises(ValidationError, match="BEAM_WEBHOOK_PROXY_URL must be an http"):
        Settings(_env_file=None, webhook_proxy_url="smee.io/channel")
    with pytest.raises(ValidationError, match="BEAM_SETUP_TOKEN is too short"):
        Settings(_env_file=None, setup_token="short")
    settings = Settings(_env_file=None, webhook_proxy_url="https://smee.io/abc/", setup_token="t" * 16)
    assert settings.webhook_proxy_url == "https://smee.io/abc"
    assert "t" * 16 not in repr(settings)
