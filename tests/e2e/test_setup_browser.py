"""The setup pages in a real headless browser (Debian's chromium, driven by Playwright; no download).

`beam-bot serve` runs as a subprocess in setup mode, as on a fresh laptop: the tests read the setup
token from its log, open the page, register the App on a fake GitHub's manifest pages, survive a
failed conversion, and then receive a delivery through a local webhook proxy channel (smee format).
"""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from bot.app.web.setup import DEFAULT_MANIFEST
from tests.support.bot_process import free_port, serve_process, wait_for
from tests.support.fake_github import FakeGitHub, checked_fake_github
from tests.support.fake_github_web import FakeGitHubWeb, serve_fake_github_web
from tests.support.openai_server import without_model_env
from tests.support.smee_server import serve_smee
from tests.support.webhooks import delivery, load_payload

CHROMIUM = Path(os.environ.get("BEAM_TEST_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        pytest.skip(
            f"no Chromium at {CHROMIUM}: install Debian's chromium package (`apt-get install chromium`, "
            "as .ci/run does) or point BEAM_TEST_CHROMIUM at a Chromium binary"
        )
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="Playwright for Python is missing: pip install -e '.[test]'"
    )
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context()
    page = context.new_page()
    page.set_default_timeout(20_000)
    try:
        yield page
    finally:
        context.close()


@dataclass
class SetupBot:
    url: str
    work_dir: Path
    log_path: Path
    proc: subprocess.Popen[bytes]

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def token_url(self) -> str:
        found = re.search(r"open (http://\S+/\?token=[\w-]+) to register", self.log())
        assert found, self.log()
        return found.group(1)

    def stored_deliveries(self) -> list[str]:
        with sqlite3.connect(self.work_dir / "beam.db") as db:
            return [row[0] for row in db.execute("SELECT delivery_id FROM deliveries ORDER BY received_at")]


@contextmanager
def setup_bot(tmp_path: Path, api_url: str, **env: str) -> Iterator[SetupBot]:
    """`beam-bot serve` without App credentials: setup mode, on loopback, as on a laptop."""
    port = free_port()
    work_dir = tmp_path / "work"
    keep = without_model_env(os.environ)
    full_env = {
        **keep,
        "BEAM_GITHUB_API_URL": api_url,
        "BEAM_WORK_DIR": str(work_dir),
        "BEAM_HOST": "127.0.0.1",
        "BEAM_PORT": str(port),
        "BEAM_QUEUE_POLL_INTERVAL": "0.2",
        **env,
    }
    log_path = tmp_path / "bot.log"
    url = f"http://127.0.0.1:{port}"
    with serve_process(full_env, log_path, url) as proc:
        yield SetupBot(url, work_dir, log_path, proc)


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    with checked_fake_github(api_prefix="/api/v3") as fake:
        yield fake


def test_token_gate_and_the_localhost_explanation(page: Any, tmp_path: Path, fake: FakeGitHub) -> None:
    web = FakeGitHubWeb(fake)
    with serve_fake_github_web(web) as api_url, setup_bot(tmp_path, api_url) as bot:
        # Without the token: the page says where to find it, and offers nothing else.
        response = page.goto(f"{bot.url}/")
        assert response.status == 401
        assert "printed in its log" in page.inner_text("body")
        assert page.locator("#register").count() == 0

        page.fill("input[name=token]", "not-the-token-at-all")
        with page.expect_navigation() as wrong:
            page.get_by_role("button", name="Continue").click()
        assert wrong.value.status == 403
        assert "not this server's setup token" in page.inner_text("body")

        token = bot.token_url().split("?token=", 1)[1]
        page.fill("input[name=token]", token)
        page.get_by_role("button", name="Continue").click()
        page.wait_for_url(f"{bot.url}/")
        # The bot is on 127.0.0.1 and has no proxy channel: no registration, the two ways out instead.
        body = page.inner_text("body")
        assert "GitHub cannot reach this address" in body
        assert "loopback address" in body
        assert "BEAM_WEBHOOK_PROXY_URL=https://smee.io/<channel> beam-bot serve" in body
        assert "BEAM_PUBLIC_URL=https://<that address> beam-bot serve" in body
        assert page.locator("#register").count() == 0
        assert page.locator("#permissions tr").count() == 6  # header + 5 permissions
        # One line per event the manifest subscribes to, each with why the bot needs it.
        assert page.locator("#events li").count() == len(DEFAULT_MANIFEST["default_events"])
    assert web.created == []


def test_a_laptop_registers_through_a_proxy_channel_and_survives_a_failed_conversion(
    page: Any, tmp_path: Path, fake: FakeGitHub
) -> None:
    web = FakeGitHubWeb(fake)
    with (
        serve_smee() as (smee_url, channels),
        serve_fake_github_web(web) as api_url,
        setup_bot(tmp_path, api_url, BEAM_WEBHOOK_PROXY_URL=f"{smee_url}/laptop") as bot,
    ):
        channel = f"{smee_url}/laptop"
        page.goto(bot.token_url())
        page.wait_for_url(f"{bot.url}/")  # the token left the address bar
        assert "webhook proxy channel" in page.inner_text("body")
        assert page.locator("#permissions tr").count() == 6
        suggested = page.input_value("input[name=name]")
        assert re.fullmatch(r"beam-bot-[0-9a-f]{6}", suggested)

        # The register form posts the manifest to GitHub's "new App" page.
        page.click("#register")
        page.wait_for_url(re.compile(r"/settings/apps/new\?state="))
        assert "Create GitHub App for octocat" in page.inner_text("body")
        assert web.refused == []

        # GitHub creates the App, but the bot's first conversion fails.
        fake.inject("POST", r"^/app-manifests/[^/]+/conversions$", status=502, times=1)
        with page.expect_navigation(url=re.compile(r"/setup/callback\?")) as first:
            page.get_by_role("button", name="Create GitHub App for octocat").click()
        assert first.value.status == 502
        assert "GitHub answered HTTP 502" in page.inner_text("body")

        with page.expect_navigation() as retried:
            page.click("#retry")
        assert retried.value.status == 200
        assert "beam-bot is registered" in page.inner_text("body")
        [created] = web.created
        assert (
            page.get_attribute("#install", "href") == f"https://github.com/apps/{suggested}/installations/new"
        )
        assert created.manifest["name"] == suggested
        assert created.manifest["hook_attributes"]["url"] == channel
        assert created.manifest["redirect_url"] == f"{bot.url}/setup/callback"
        assert len(fake.calls_to("apps/create-from-manifest")) == 2
        assert httpx.get(f"{bot.url}/healthz", timeout=5).json()["mode"] == "normal"

        # GitHub now posts deliveries to the channel; the bot reads them and checks the signature.
        payload = load_payload("issue_comment.created.issue.json")
        payload["comment"]["body"] = "thanks, looks good"
        good = delivery("issue_comment", payload, created.webhook_secret, delivery_id="laptop-1")
        forged = delivery("issue_comment", payload, "a-guessed-secret", delivery_id="laptop-forged")
        for item in (forged, good):
            assert httpx.post(channel, content=item.body, headers=item.headers, timeout=10).status_code == 200
        # The channel keeps order: once the good one is stored, the forged one was refused before it.
        wait_for(lambda: bot.stored_deliveries() == ["laptop-1"], timeout=20, what="the delivery stored")
        assert channels.connections and channels.connections[0]["channel"] == "laptop"
