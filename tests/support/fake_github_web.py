"""GitHub's web side of the manifest flow, in front of the fake GitHub API, for the browser tests.

`POST /settings/apps/new?state=S` (or `/organizations/<org>/settings/apps/new`) with a form field
`manifest` shows a "Create GitHub App" page, as github.com does; its button registers a one-time
code with the fake (`register_manifest_code`) and redirects the browser to the manifest's
`redirect_url?code=...&state=S`, where the bot converts the code through the fake API
(`POST /app-manifests/{code}/conversions`). A manifest GitHub would refuse gets a 422 page and is
recorded in `refused`. Every other path goes to the fake GitHub API.
See https://docs.github.com/apps/sharing-github-apps/registering-a-github-app-from-a-manifest
"""

from __future__ import annotations

import html
import json
import re
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlencode

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route

from tests.support import fake_github_oauth
from tests.support.asgi_server import serve_asgi
from tests.support.fake_github import FakeGitHub

MANIFEST_KEYS = frozenset(
    {
        "name",
        "url",
        "hook_attributes",
        "redirect_url",
        "callback_urls",
        "setup_url",
        "description",
        "public",
        "default_events",
        "default_permissions",
        "request_oauth_on_install",
        "setup_on_update",
    }
)
_URL = re.compile(r"^https?://[^/\s]+")


@dataclass
class Created:
    code: str
    owner: str
    manifest: dict[str, Any]
    state: str
    webhook_secret: str


@dataclass
class FakeGitHubWeb:
    fake: FakeGitHub
    created: list[Created] = field(default_factory=list)
    refused: list[list[str]] = field(default_factory=list)

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/settings/apps/new", self._new, methods=["POST"]),
                Route("/organizations/{org}/settings/apps/new", self._new, methods=["POST"]),
                Route("/fake-web/create", self._create, methods=["POST"]),
                # The App's user-authorization flow (fake_github_oauth.py), for the dashboard.
                Route("/login/oauth/authorize", self._authorize_page, methods=["GET"]),
                Route("/fake-web/authorize", self._authorize, methods=["POST"]),
                Route("/login/oauth/access_token", self._access_token, methods=["POST"]),
                Route("/favicon.ico", lambda _: Response(status_code=404)),
                Mount("/", app=self.fake),
            ]
        )

    async def _new(self, request: Request) -> Response:
        form = await _form(request)
        raw = form.get("manifest")
        state = request.query_params.get("state", "")
        owner = request.path_params.get("org", "octocat")
        problems = manifest_problems(raw if isinstance(raw, str) else None)
        if problems:
            self.refused.append(problems)
            items = "".join(f"<li>{html.escape(p)}</li>" for p in problems)
            return HTMLResponse(f"<h1>Invalid GitHub App manifest</h1><ul>{items}</ul>", status_code=422)
        assert isinstance(raw, str)
        manifest = json.loads(raw)
        return HTMLResponse(
            f"""<!doctype html><title>Create GitHub App</title>
<h1>Create GitHub App for {html.escape(owner)}</h1>
<form action="/fake-web/create" method="post">
<label>GitHub App name <input name="name" value="{html.escape(manifest.get("name", ""))}"></label>
<input type="hidden" name="manifest" value="{html.escape(raw)}">
<input type="hidden" name="state" value="{html.escape(state)}">
<input type="hidden" name="owner" value="{html.escape(owner)}">
<button type="submit">Create GitHub App for {html.escape(owner)}</button></form>"""
        )

    async def _authorize_page(self, request: Request) -> Response:
        return await fake_github_oauth.authorize_page(self.fake, request)

    async def _authorize(self, request: Request) -> Response:
        return await fake_github_oauth.authorize(self.fake, request)

    async def _access_token(self, request: Request) -> Response:
        return await fake_github_oauth.access_token(self.fake, request)

    async def _create(self, request: Request) -> Response:
        form = await _form(request)
        manifest = json.loads(str(form["manifest"]))
        name = str(form.get("name") or manifest.get("name") or "app")
        slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
        code = secrets.token_hex(10)
        webhook_secret = f"whsec-{secrets.token_hex(12)}"
        self.fake.register_manifest_code(
            code,
            app_id=1000 + len(self.created),
            slug=slug,
            pem=self.fake.key.private_pem,
            webhook_secret=webhook_secret,
            owner=str(form["owner"]),
        )
        self.created.append(Created(code, str(form["owner"]), manifest, str(form["state"]), webhook_secret))
        query = urlencode({"code": code, "state": str(form["state"])})
        return RedirectResponse(f"{manifest['redirect_url']}?{query}", status_code=302)


async def _form(request: Request) -> dict[str, str]:
    """An urlencoded form, as a browser posts one (without python-multipart, which Starlette would need)."""
    assert request.headers.get("content-type", "").startswith("application/x-www-form-urlencoded")
    return dict(parse_qsl((await request.body()).decode("utf-8"), keep_blank_values=True))


def manifest_problems(raw: str | None) -> list[str]:
    """What GitHub would refuse in a manifest: unknown keys, missing or non-http URLs, bad names."""
    if raw is None:
        return ["the form has no manifest"]
    try:
        manifest = json.loads(raw)
    except ValueError:
        return ["the manifest is not JSON"]
    if not isinstance(manifest, dict):
        return ["the manifest is not an object"]
    problems = [f"unknown key {key!r}" for key in manifest if key not in MANIFEST_KEYS]
    name = manifest.get("name")
    if not isinstance(name, str) or not 0 < len(name) <= 34:
        problems.append("name must be 1 to 34 characters")
    for key in ("url", "redirect_url"):
        if not isinstance(manifest.get(key), str) or not _URL.match(manifest[key]):
            problems.append(f"{key} must be an http(s) URL")
    hook = manifest.get("hook_attributes")
    if not isinstance(hook, dict) or not isinstance(hook.get("url"), str) or not _URL.match(hook["url"]):
        problems.append("hook_attributes.url must be an http(s) URL")
    perms = manifest.get("default_permissions", {})
    if not isinstance(perms, dict) or any(v not in ("read", "write") for v in perms.values()):
        problems.append("default_permissions must map permissions to read or write")
    if not isinstance(manifest.get("default_events", []), list):
        problems.append("default_events must be a list")
    return problems


@contextmanager
def serve_fake_github_web(web: FakeGitHubWeb) -> Iterator[str]:
    """Serves GitHub's web pages and the fake API (at `/api/v3`, as GitHub Enterprise Server does) on
    127.0.0.1; yields the API URL, so that the bot's web URL is this server's root."""
    assert web.fake.api_prefix == "/api/v3", "the web pages sit at the root, the API under /api/v3"
    with serve_asgi(web.app(), "fake GitHub web server") as base:
        yield f"{base}/api/v3"
