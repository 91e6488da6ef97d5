"""A running App with its dashboard, for the dashboard's HTTP tests (in process): the fake GitHub
with its sign-in pages, two private repositories (a maintainer reads one, an admin of the App's
owner organisation both), BEAM_DASHBOARD_TOKEN set, and the standard rows seeded (`dashboard_data`).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
from starlette.applications import Starlette

from bot.app.dashboard.routes import Dashboard
from tests.support import dashboard_data
from tests.support.fake_github import FakeGitHub
from tests.support.fake_github_web import FakeGitHubWeb
from tests.support.web_app import registered_settings, running_app, store_of

SECRET = "whsec-0123456789-abcdef"
CLIENT_ID = "Iv1.dashboardtest"
CLIENT_SECRET = "client-secret-for-tests"
OPERATOR_TOKEN = "operator-token-0123456789"
REPO, OTHER = "octo-org/widgets", "octo-org/secret"


@dataclass
class Env:
    """The app and a client of it, the fake GitHub, and a client of its web pages (the sign-in's)."""

    app: Starlette
    client: httpx.AsyncClient
    fake: FakeGitHub
    web: httpx.AsyncClient

    @property
    def dashboard(self) -> Dashboard:
        dashboard = self.app.state.dashboard
        assert isinstance(dashboard, Dashboard)
        return dashboard

    async def sign_in(self, login: str = "maintainer") -> httpx.Response:
        """The whole flow: the bot's redirect, GitHub's authorize page, the callback."""
        start = await self.client.get("/dashboard/login")
        assert start.status_code == 303
        query = {k: v[0] for k, v in parse_qs(urlsplit(start.headers["location"]).query).items()}
        granted = await self.web.post("/fake-web/authorize", data={**query, "login": login})
        assert granted.status_code == 302
        back = urlsplit(granted.headers["location"])
        return await self.client.get(f"/dashboard/callback?{back.query}")


@asynccontextmanager
async def running_dashboard(tmp_path: Path) -> AsyncIterator[Env]:
    fake = FakeGitHub(api_prefix="/api/v3")
    fake.add_user(fake.app_owner, type="Organization")  # the App belongs to an organisation
    fake.add_installation(1, "octo-org")
    fake.add_repo(REPO, installation_id=1, private=True)
    fake.add_repo(OTHER, installation_id=1, private=True)
    fake.add_collaborator(REPO, "maintainer", "read")
    fake.add_collaborator(OTHER, "boss", "admin")
    fake.oauth.clients[CLIENT_ID] = CLIENT_SECRET
    fake.oauth.org_roles[("beam-org", "boss")] = "admin"  # the App's owner (fake.app_owner)
    web_app = FakeGitHubWeb(fake).app()
    transport = httpx.ASGITransport(app=web_app)
    settings = registered_settings(
        tmp_path,
        SECRET,
        github_api_url="http://github.test/api/v3",
        client_id=CLIENT_ID,
        client_secret=CLIENT_SECRET,
        dashboard_token=OPERATOR_TOKEN,
        metrics_token=None,
    )
    async with (
        running_app(settings, github_transport=transport) as (app, client),
        httpx.AsyncClient(transport=transport, base_url="http://github.test") as web,
    ):
        rows = dashboard_data.standard(time.time(), REPO, OTHER)
        async with store_of(app).write() as conn:
            await conn.run_sync(lambda c: dashboard_data.write(c, *rows))
        yield Env(app, client, fake, web)
    assert fake.violations == []
