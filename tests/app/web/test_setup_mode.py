"""Setup mode: no credentials, the manifest form, the callback against the fake GitHub, no restart."""

from __future__ import annotations

import html
import json
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx
import pytest
import yaml

from bot.app.credentials.files import load_credentials
from bot.app.settings import Settings
from bot.app.web.setup import DEFAULT_MANIFEST, build_manifest, load_manifest
from tests.support.fake_github import FakeGitHub, checked_fake_github, serve_fake_github, shared_app_key
from tests.support.web_app import running_app, runtime_of
from tests.support.webhooks import delivery, raw_payload

ROOT = Path(__file__).resolve().parents[3]
PUBLIC = "https://bot.example.org"
TOKEN = "setup-token-for-the-tests"
NEW_SECRET = "whsec-from-the-manifest-flow"
_COMMAND = json.loads(raw_payload("issue_comment.created.issue.json"))
_COMMAND["comment"]["body"] = "/beam summarize"  # a comment without a command makes no job
BODY = json.dumps(_COMMAND).encode()


def signed(body: bytes, secret: str, delivery_id: str) -> dict[str, str]:
    return delivery("issue_comment", body, secret, delivery_id=delivery_id).headers


def form_of(page: str) -> tuple[str, dict[str, Any]]:
    """The manifest form's action URL and the manifest it posts, as a browser would read them."""
    action = re.search(r'<form action="([^"]+)" method="post">', page)
    value = re.search(r'<input type="hidden" name="manifest" value="([^"]*)">', page)
    assert action and value, page
    return html.unescape(action.group(1)), json.loads(html.unescape(value.group(1)))


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    with checked_fake_github() as fake:
        fake.register_manifest_code(
            "c0de1", app_id=777, slug="beam-test", pem=shared_app_key().private_pem, webhook_secret=NEW_SECRET
        )
        yield fake


@pytest.fixture
def api_url(fake: FakeGitHub) -> Iterator[str]:
    with serve_fake_github(fake) as url:
        yield url


def setup_settings(tmp_path: Path, **overrides: Any) -> Settings:
    overrides.setdefault("setup_token", TOKEN)
    overrides.setdefault("public_url", PUBLIC)
    return Settings(_env_file=None, work_dir=tmp_path / "work", **overrides)


async def unlock(client: httpx.AsyncClient, token: str = TOKEN) -> None:
    """Opens the setup page with the token, as the link in the log does; the client keeps the cookie."""
    response = await client.get("/", params={"token": token})
    assert response.status_code == 303, response.text
    assert response.headers["location"] == "/"


@pytest.mark.anyio
async def test_setup_then_callback_then_signed_deliveries_without_restart(
    tmp_path: Path, fake: FakeGitHub, api_url: str
) -> None:
    settings = setup_settings(tmp_path, github_api_url=api_url)
    async with running_app(settings) as (app, client):
        assert (await client.get("/healthz")).json() == {"status": "ok", "mode": "setup"}
        refused = await client.post("/webhooks", content=BODY, headers=signed(BODY, NEW_SECRET, "early"))
        assert refused.status_code == 503
        assert refused.json()["message"] == (
            f"beam-bot is in setup mode: open {PUBLIC}/ to register the GitHub App"
        )

        await unlock(client)
        page = await client.get("/")
        assert page.status_code == 200
        action, manifest = form_of(page.text)
        assert action.startswith(f"{api_url}/settings/apps/new?state=")
        [state] = parse_qs(urlsplit(action).query)["state"]
        assert manifest["hook_attributes"] == {"active": True, "url": f"{PUBLIC}/webhooks"}
        assert manifest["redirect_url"] == f"{PUBLIC}/setup/callback"
        assert manifest["callback_urls"] == [f"{PUBLIC}/dashboard/callback"]  # the dashboard's sign-in
        assert manifest["default_permissions"] == DEFAULT_MANIFEST["default_permissions"]
        assert manifest["public"] is False

        wrong = await client.get("/setup/callback", params={"code": "c0de1", "state": "forged"})
        assert wrong.status_code == 400
        assert fake.calls_to("apps/create-from-manifest") == []
        assert runtime_of(app).mode == "setup"

        done = await client.get("/setup/callback", params={"code": "c0de1", "state": state})
        assert done.status_code == 200, done.text
        assert "beam-test" in done.text
        assert "/apps/beam-test/installations/new" in done.text
        assert len(fake.calls_to("apps/create-from-manifest")) == 1

        path = settings.credentials_path
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        stored = json.loads(path.read_text())
        assert (stored["app_id"], stored["slug"], stored["webhook_secret"]) == (777, "beam-test", NEW_SECRET)
        # Issue 44: the client secret signs users in to /dashboard; it is kept with the key (0600).
        assert stored["client_secret"] == "secret-777-beam-test"

        assert (await client.get("/healthz")).json() == {"status": "ok", "mode": "normal"}
        ok = await client.post("/webhooks", content=BODY, headers=signed(BODY, NEW_SECRET, "after-1"))
        assert (ok.status_code, ok.json()) == (202, {"status": "accepted"})
        forged = await client.post("/webhooks", content=BODY, headers=signed(BODY, "guess-secret", "after-2"))
        assert forged.status_code == 401

        again = await client.get("/setup/callback", params={"code": "c0de1", "state": state})
        assert again.status_code == 409
        assert "Serving the GitHub App" in (await client.get("/")).text

    # A restart finds the stored credentials: normal mode at once.
    creds = load_credentials(settings)
    assert creds is not None and creds.app_id == 777 and creds.source == "file"
    async with running_app(settings) as (app, client):
        assert runtime_of(app).mode == "normal"
        second = await client.post(
            "/webhooks", content=BODY, headers=signed(BODY, NEW_SECRET, "after-restart")
        )
        assert second.status_code == 202


@pytest.mark.anyio
async def test_refused_code_keeps_setup_mode(tmp_path: Path, fake: FakeGitHub) -> None:
    settings = setup_settings(tmp_path)
    async with running_app(settings, github_transport=fake.transport()) as (app, client):
        await unlock(client)
        action, _ = form_of((await client.get("/")).text)
        state = parse_qs(urlsplit(action).query)["state"][0]
        response = await client.get("/setup/callback", params={"code": "unknown-code", "state": state})
        assert response.status_code == 502
        assert "Start again from the setup page" in response.text
        # A code GitHub refused may have converted already (the answer was lost): say where the App is.
        assert "https://github.com/settings/apps" in response.text
        assert 'id="retry"' not in response.text
        assert runtime_of(app).mode == "setup"
        assert not settings.credentials_path.exists()
        # The state is used up only once credentials are stored: the next code with it goes through.
        again = await client.get("/setup/callback", params={"code": "c0de1", "state": state})
        assert again.status_code == 200, again.text
        assert runtime_of(app).mode == "normal"
        # ...and then it is gone.
        assert (
            await client.get("/setup/callback", params={"code": "c0de1", "state": state})
        ).status_code == 409


@pytest.mark.anyio
async def test_enterprise_and_organization_form_targets(tmp_path: Path, fake: FakeGitHub) -> None:
    settings = setup_settings(tmp_path, github_api_url="https://ghe.example.com/api/v3")
    async with running_app(settings, github_transport=fake.transport()) as (_, client):
        await unlock(client)
        action, _ = form_of((await client.get("/")).text)
        assert action.startswith("https://ghe.example.com/settings/apps/new?state=")
        action, _ = form_of((await client.get("/", params={"org": "my-org"})).text)
        assert action.startswith("https://ghe.example.com/organizations/my-org/settings/apps/new?state=")
        bad = await client.get("/", params={"org": "../evil"})
        assert bad.status_code == 400
        assert '<a href="/">Back to the setup page</a>' in bad.text


@pytest.mark.anyio
async def test_without_public_url_the_page_uses_the_request_address_and_says_so(
    tmp_path: Path, fake: FakeGitHub
) -> None:
    settings = Settings(_env_file=None, work_dir=tmp_path / "work")
    async with running_app(settings, github_transport=fake.transport()) as (app, client):
        await unlock(client, runtime_of(app).setup.token)
        page = (await client.get("/")).text
        action, manifest = form_of(page)
        assert action.startswith("https://github.com/settings/apps/new?state=")
        assert manifest["hook_attributes"]["url"] == "http://beam.test/webhooks"
        assert "BEAM_PUBLIC_URL is not set" in page


@pytest.mark.anyio
async def test_handler_starts_with_the_registration(tmp_path: Path, fake: FakeGitHub) -> None:
    seen: list[str] = []
    got = anyio.Event()

    async def handler(job: Any) -> None:
        seen.append(job.delivery_id)
        got.set()

    settings = setup_settings(tmp_path, queue_poll_interval=0.05)
    async with running_app(settings, handler=handler, github_transport=fake.transport()) as (app, client):
        assert runtime_of(app).workers is None
        await unlock(client)
        action, _ = form_of((await client.get("/")).text)
        state = parse_qs(urlsplit(action).query)["state"][0]
        assert (
            await client.get("/setup/callback", params={"code": "c0de1", "state": state})
        ).status_code == 200
        assert runtime_of(app).workers is not None
        response = await client.post("/webhooks", content=BODY, headers=signed(BODY, NEW_SECRET, "work-1"))
        assert response.status_code == 202
        with anyio.fail_after(10):
            await got.wait()
    assert seen == ["work-1"]


def test_app_yml_is_the_built_in_manifest() -> None:
    assert yaml.safe_load((ROOT / "app.yml").read_text()) == DEFAULT_MANIFEST


def test_custom_manifest_file(tmp_path: Path) -> None:
    custom = tmp_path / "app.yml"
    custom.write_text("name: my-beam\npublic: false\ndefault_events: [issue_comment]\n")
    settings = setup_settings(tmp_path, app_manifest=custom)
    manifest = build_manifest(load_manifest(settings), PUBLIC)
    assert manifest["name"] == "my-beam"
    assert manifest["url"] == PUBLIC
    assert manifest["hook_attributes"]["url"] == f"{PUBLIC}/webhooks"
