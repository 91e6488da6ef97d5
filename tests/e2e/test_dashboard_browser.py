"""The dashboard in a real headless browser (Debian's chromium through Playwright), against a real
`beam-bot serve` and the fake GitHub's sign-in pages.

A maintainer signs in with GitHub, sees their repository and not another one, reads the seeded runs
and findings in the charts and tables, exports a CSV and signs out; an operator opens the view of
every repository. A screenshot of each view is kept in the test's directory (its path is printed).
"""

from __future__ import annotations

import concurrent.futures
import os
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from bot.app.jobs.store import Store, build_url
from tests.e2e.test_setup_browser import CHROMIUM, CHROMIUM_ARGS
from tests.support import dashboard_data
from tests.support.bot_process import free_port, serve_process
from tests.support.fake_github import FakeGitHub, checked_fake_github
from tests.support.fake_github_web import FakeGitHubWeb, serve_fake_github_web
from tests.support.openai_server import without_model_env

pytestmark = pytest.mark.e2e
CLIENT_ID = "Iv1.browsertest"
CLIENT_SECRET = "browser-client-secret"  # a fake's
OPERATOR_TOKEN = "browser-operator-token-0123"  # a fake's
REPO, OTHER = "octo-org/widgets", "octo-org/secret"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        pytest.skip(f"no Chromium at {CHROMIUM}: install Debian's chromium or set BEAM_TEST_CHROMIUM")
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
    context = browser.new_context(accept_downloads=True, viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(20_000)
    try:
        yield page
    finally:
        context.close()


@dataclass
class Served:
    url: str
    fake: FakeGitHub
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


async def _seed(work_dir: Path) -> None:
    store = await Store.open(build_url(None, work_dir))
    try:
        rows = dashboard_data.standard(time.time(), REPO, OTHER)
        async with store.write() as conn:
            await conn.run_sync(lambda c: dashboard_data.write(c, *rows))
    finally:
        await store.close()


@contextmanager
def dashboard_bot(tmp_path: Path) -> Iterator[Served]:
    with checked_fake_github(api_prefix="/api/v3") as fake:
        fake.add_user(fake.app_owner, type="Organization")
        fake.add_installation(1, "octo-org")
        fake.add_repo(REPO, installation_id=1, private=True)
        fake.add_repo(OTHER, installation_id=1, private=True)
        fake.add_collaborator(REPO, "maintainer", "write")
        fake.oauth.clients[CLIENT_ID] = CLIENT_SECRET
        fake.oauth.signed_in = "maintainer"
        work_dir = tmp_path / "work"
        work_dir.mkdir(mode=0o700)
        # Playwright's sync API runs a loop in this thread: the seeding gets a thread of its own.
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            pool.submit(anyio.run, _seed, work_dir).result(timeout=60)
        with serve_fake_github_web(FakeGitHubWeb(fake)) as api_url:
            port = free_port()
            env = {
                **without_model_env(os.environ),
                "BEAM_APP_ID": str(fake.app_id),
                "BEAM_PRIVATE_KEY": fake.key.private_pem,
                "BEAM_WEBHOOK_SECRET": "browser-webhook-secret",
                "BEAM_CLIENT_ID": CLIENT_ID,
                "BEAM_CLIENT_SECRET": CLIENT_SECRET,
                "BEAM_DASHBOARD_TOKEN": OPERATOR_TOKEN,
                "BEAM_PRICE_INPUT_PER_MTOK": "3",
                "BEAM_PRICE_OUTPUT_PER_MTOK": "15",
                "BEAM_GITHUB_API_URL": api_url,
                "BEAM_WORK_DIR": str(work_dir),
                "BEAM_HOST": "127.0.0.1",
                "BEAM_PORT": str(port),
                "BEAM_REDELIVERY_INTERVAL": "0",
            }
            log_path = tmp_path / "bot.log"
            url = f"http://127.0.0.1:{port}"
            with serve_process(env, log_path, url):
                yield Served(url, fake, log_path)
        assert fake.violations == []


def _shot(page: Any, tmp_path: Path, name: str) -> Path:
    path = tmp_path / "screenshots" / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 1000
    print(f"screenshot: {path}")
    return path


def test_a_maintainer_signs_in_reads_exports_and_signs_out(page: Any, tmp_path: Path) -> None:
    with dashboard_bot(tmp_path) as bot:
        response = page.goto(f"{bot.url}/dashboard")
        assert response.status == 200
        _shot(page, tmp_path, "signin")
        page.click("#signin")
        page.wait_for_url(re.compile(r"/login/oauth/authorize\?"))
        page.get_by_role("button", name="Authorize").click()
        page.wait_for_url(f"{bot.url}/dashboard")
        assert "Signed in as maintainer" in page.inner_text("header")
        assert page.locator("#repos li").all_inner_texts() == [REPO]
        _shot(page, tmp_path, "home")

        page.click(f"#repos a:text('{REPO}')")
        page.wait_for_url(f"{bot.url}/dashboard/repos/{REPO}")
        page.click("#span a:text('7 days')")
        page.wait_for_url(re.compile(r"\?days=7$"))
        runs = page.locator("#table-runs tbody tr").all_inner_texts()
        assert [r.split("\t")[:3] for r in runs] == [
            ["author", "succeeded", "1"],
            ["review", "failed", "1"],
            ["review", "succeeded", "2"],
        ]
        findings = dict(r.split("\t")[:2] for r in page.locator("#table-findings tbody tr").all_inner_texts())
        assert findings == {"open": "1", "fixed": "2", "dismissed": "1", "posted": "4"}
        assert "BEM-380" in page.inner_text("#table-failures")
        assert (
            page.locator("#table-held_pushes tbody a")
            .first.get_attribute("href")
            .endswith(f"/{REPO}/pull/2#issuecomment-555")
        )
        # Two charts, drawn by the server: the findings chart has a fixed and a dismissed bar per week.
        assert page.locator("#chart-findings svg rect").count() == 2
        assert page.locator("#chart-cost svg rect").count() == 1
        assert "fixed, " in page.locator("#chart-findings svg rect").first.inner_html()
        _shot(page, tmp_path, "repository")

        with page.expect_download() as download:
            page.click("#export-failures-csv")
        saved = tmp_path / "failures.csv"
        download.value.save_as(saved)
        header, line = saved.read_text().splitlines()
        assert header.startswith("run,command,pull request,code,message")
        assert "BEM-380" in line

        # The other repository is not there for this user: the same 404 as a missing one.
        refused = page.goto(f"{bot.url}/dashboard/repos/{OTHER}")
        assert refused.status == 404
        page.goto(f"{bot.url}/dashboard")
        page.click("#signout")
        page.wait_for_url(f"{bot.url}/dashboard")
        assert page.locator("#signin").count() == 1
        assert page.goto(f"{bot.url}/dashboard/repos/{REPO}").status == 404


def test_the_operator_view_with_the_token(page: Any, tmp_path: Path) -> None:
    with dashboard_bot(tmp_path) as bot:
        page.set_extra_http_headers({"Authorization": f"Bearer {OPERATOR_TOKEN}"})
        response = page.goto(f"{bot.url}/dashboard/installation?days=90")
        assert response.status == 200
        rows = page.locator("#table-repositories tbody tr").all_inner_texts()
        assert [r.split("\t")[0] for r in rows] == [OTHER, REPO]
        assert page.locator("#table-queue tbody tr").count() == 1
        _shot(page, tmp_path, "installation")


def test_the_operator_signs_in_with_the_token_form(page: Any, tmp_path: Path) -> None:
    with dashboard_bot(tmp_path) as bot:
        page.goto(f"{bot.url}/dashboard")
        page.fill("#operator-token", "not-the-token")
        page.click("#token-signin")
        assert "not the operator token" in page.locator("#error").inner_text()
        assert page.goto(f"{bot.url}/dashboard/installation").status == 404
        page.goto(f"{bot.url}/dashboard")
        page.fill("#operator-token", OPERATOR_TOKEN)
        page.click("#token-signin")
        page.wait_for_url(f"{bot.url}/dashboard/installation")
        rows = page.locator("#table-repositories tbody tr").all_inner_texts()
        assert [r.split("\t")[0] for r in rows] == [OTHER, REPO]
        _shot(page, tmp_path, "installation-token")
        page.click("#signout")
        page.wait_for_url(f"{bot.url}/dashboard")
        assert page.goto(f"{bot.url}/dashboard/installation").status == 404
