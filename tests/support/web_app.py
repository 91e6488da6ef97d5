"""Helpers for tests of the web app: run `create_app` with its lifespan, and read back what it stored."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import select
from starlette.applications import Starlette

from bot.app.jobs.store import Store, jobs
from bot.app.settings import Settings
from bot.app.web.app import AppRuntime, create_app
from tests.support.fake_github_auth import shared_app_key

METRICS_TOKEN = "test-metrics-token-0123456789"


@asynccontextmanager
async def running_app(
    settings: Settings, **kwargs: Any
) -> AsyncIterator[tuple[Starlette, httpx.AsyncClient]]:
    """The app with its lifespan entered, and a client that talks to it in-process (ASGITransport)."""
    app = create_app(settings, **kwargs)
    token = settings.metrics_token
    # The scraper's token on every request, as Prometheus sends it (issue 32); intake ignores it.
    auth = {"Authorization": f"Bearer {token.get_secret_value()}"} if token is not None else {}
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://beam.test", headers=auth
        ) as client,
    ):
        yield app, client


def runtime_of(app: Starlette) -> AppRuntime:
    runtime = app.state.runtime
    assert isinstance(runtime, AppRuntime)
    return runtime


def store_of(app: Starlette) -> Store:
    store = runtime_of(app).store
    assert store is not None
    return store


async def job_rows(app: Starlette) -> list[dict[str, Any]]:
    async with store_of(app).read() as conn:
        rows = (await conn.execute(select(jobs).order_by(jobs.c.id))).all()
    return [dict(r._mapping) for r in rows]


def registered_settings(tmp_path: Path, secret: str, **values: Any) -> Settings:
    """Settings of an App already registered (id, key, webhook secret), working under `tmp_path`
    and reading no `.env` file; `values` set or override any other field."""
    fields: dict[str, Any] = {
        "work_dir": tmp_path / "work",
        "app_id": 4242,
        "private_key": shared_app_key().private_pem,
        "webhook_secret": secret,
        "metrics_token": METRICS_TOKEN,
    }
    return Settings(_env_file=None, **{**fields, **values})  # type: ignore[call-arg]
