"""First-run setup mode: register the GitHub App through GitHub's manifest flow, without a restart.

On a fresh machine `beam-bot serve` has no App credentials. It starts anyway and `GET /` shows a form
that posts the App manifest (app.yml, with this server's URLs filled in) to GitHub. GitHub creates
the App and redirects the browser to `/setup/callback?code=...&state=...`; we check `state` (kept in
memory, single use, short-lived), exchange the code for the App's id, private key and webhook secret
(`POST /app-manifests/{code}/conversions`, no authentication), store them in
`<work_dir>/app-credentials.json` (mode 0600), and switch the running app to normal mode.
See https://docs.github.com/apps/sharing-github-apps/registering-a-github-app-from-a-manifest
"""

from __future__ import annotations

import copy
import html
import json
import re
import secrets
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import quote, urlencode

import anyio
import anyio.to_thread
import httpx
import yaml
from pydantic import SecretStr
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from bot.app.settings import AppCredentials, Settings, normalise_pem, write_credentials_file

# The manifest shipped with beam-bot; app.yml at the project root is the same manifest with the reason
# for each permission (a test keeps the two equal). BEAM_APP_MANIFEST points at a custom one.
DEFAULT_MANIFEST: dict[str, Any] = {
    "name": "beam-bot",
    "url": "https://github.com/beam-bot/beam-bot",
    "description": "Runs Riverbeam skills on pull requests; every push waits for a maintainer's approval.",
    "public": False,
    "hook_attributes": {"active": True},
    "default_events": ["issue_comment", "pull_request_review_comment", "pull_request"],
    "default_permissions": {
        "contents": "write",
        "pull_requests": "write",
        "issues": "write",
        "checks": "write",
        "metadata": "read",
    },
}
STATE_TTL = 3600.0
_MAX_STATES = 64
_CODE_RE = re.compile(r"^[A-Za-z0-9_-]{1,128}$")
_ORG_RE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})$")


def load_manifest(settings: Settings) -> dict[str, Any]:
    """The manifest to register (BEAM_APP_MANIFEST, else the built-in one). Blocking: a small file read."""
    if settings.app_manifest is None:
        return copy.deepcopy(DEFAULT_MANIFEST)
    data = yaml.safe_load(settings.app_manifest.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"BEAM_APP_MANIFEST: {settings.app_manifest} is not a YAML mapping")
    return data


def build_manifest(base: dict[str, Any], public_url: str) -> dict[str, Any]:
    """`base` with this server's webhook and redirect URLs; everything else is kept as written."""
    manifest = copy.deepcopy(base)
    manifest.setdefault("url", public_url)
    hook = dict(manifest.get("hook_attributes") or {})
    hook["url"] = f"{public_url}/webhooks"
    hook.setdefault("active", True)
    manifest["hook_attributes"] = hook
    manifest["redirect_url"] = f"{public_url}/setup/callback"
    return manifest


class SetupError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class SetupFlow:
    """The manifest form and its callback; `client` (the app's GitHub client) is set by the lifespan."""

    def __init__(
        self,
        settings: Settings,
        manifest: dict[str, Any],
        on_registered: Callable[[AppCredentials], Awaitable[None]],
    ) -> None:
        self.settings = settings
        self.manifest = manifest
        self.on_registered = on_registered
        self.client: httpx.AsyncClient | None = None
        self._states: OrderedDict[str, float] = OrderedDict()
        self._lock = anyio.Lock()
        self.done = False

    def public_url(self, request: Request) -> str:
        return self.settings.public_url or str(request.base_url).rstrip("/")

    def new_state(self) -> str:
        now = time.monotonic()
        while self._states and (len(self._states) >= _MAX_STATES or next(iter(self._states.values())) < now):
            self._states.popitem(last=False)
        state = secrets.token_urlsafe(24)
        self._states[state] = now + STATE_TTL
        return state

    def take_state(self, state: str) -> bool:
        """True once for a state this server issued that has not expired."""
        expires = self._states.pop(state, None)
        return expires is not None and expires >= time.monotonic()

    async def page(self, request: Request) -> Response:
        public = self.public_url(request)
        org = request.query_params.get("org", "").strip()
        if org and not _ORG_RE.match(org):
            return _page("Setup", "<p>That is not a GitHub organization name.</p>", status=400)
        owner_path = f"/organizations/{org}" if org else ""
        action = f"{self.settings.github_web_url}{owner_path}/settings/apps/new?" + urlencode(
            {"state": self.new_state()}
        )
        manifest = json.dumps(build_manifest(self.manifest, public))
        warning = ""
        if self.settings.public_url is None:
            warning = (
                "<p class=warn>BEAM_PUBLIC_URL is not set: the App will send webhooks to "
                f"<code>{html.escape(public)}/webhooks</code>, the address this page was opened with. "
                "GitHub must be able to reach it; set BEAM_PUBLIC_URL and restart if it cannot.</p>"
            )
        owner = f"the organization <b>{html.escape(org)}</b>" if org else "your personal account"
        body = f"""
<p>beam-bot has no GitHub App yet. Register one for {owner}: GitHub will show the App, let you
change its name, and send you back here. The App's key and webhook secret are then stored in
<code>{html.escape(str(self.settings.credentials_path))}</code> (readable by this user only).</p>
{warning}
<form action="{html.escape(action)}" method="post">
<input type="hidden" name="manifest" value="{html.escape(manifest)}">
<button type="submit">Register the GitHub App</button>
</form>
<form action="/" method="get"><p>Or for an organization:
<input name="org" placeholder="organization" value="{html.escape(org)}"> <button>Use it</button></p></form>
"""
        return _page("Set up beam-bot", body)

    async def callback(self, request: Request) -> Response:
        code = request.query_params.get("code", "")
        state = request.query_params.get("state", "")
        try:
            async with self._lock:
                if self.done:
                    raise SetupError(409, "The GitHub App is already registered: this server is running.")
                if not state or not self.take_state(state):
                    raise SetupError(400, "Unknown or expired setup state: start again from the setup page.")
                if not _CODE_RE.match(code):
                    raise SetupError(400, "GitHub's code is missing or malformed: start again.")
                creds, html_url = await self._convert(code)
                await anyio.to_thread.run_sync(write_credentials_file, self.settings.credentials_path, creds)
                await self.on_registered(creds)  # sets `done`
        except SetupError as err:
            link = '<p><a href="/">Back to the setup page</a></p>' if err.status != 409 else ""
            return _page("Setup", f"<p>{html.escape(err.message)}</p>{link}", status=err.status)
        install = f"{html_url}/installations/new" if html_url else None
        what = f"<b>{html.escape(creds.slug or str(creds.app_id))}</b> (App id {creds.app_id})"
        install_html = (
            f'<p>Next: <a href="{html.escape(install)}">install the App</a> on the repositories it '
            "should serve.</p>"
            if install
            else "<p>Next: install the App on the repositories it should serve.</p>"
        )
        return _page(
            "beam-bot is registered", f"<p>Registered {what}. Webhooks are now accepted.</p>{install_html}"
        )

    async def _convert(self, code: str) -> tuple[AppCredentials, str | None]:
        assert self.client is not None, "the lifespan sets the GitHub client"
        try:
            response = await self.client.post(f"/app-manifests/{quote(code, safe='')}/conversions")
        except httpx.HTTPError as exc:
            raise SetupError(502, f"Could not reach GitHub ({type(exc).__name__}): try again.") from None
        if response.status_code != 201:
            raise SetupError(
                502,
                f"GitHub refused the code (HTTP {response.status_code}); codes are single use and expire "
                "after an hour: start again from the setup page.",
            )
        try:
            data = response.json()
            app_id = data["id"]
            pem, secret = data["pem"], data["webhook_secret"]
            if not isinstance(app_id, int) or not isinstance(pem, str):
                raise TypeError
            pem = normalise_pem(pem, "the key GitHub returned")
        except (ValueError, KeyError, TypeError):
            raise SetupError(502, "GitHub's answer is not an App registration: start again.") from None
        if not isinstance(secret, str) or not secret:
            raise SetupError(
                502, "GitHub returned no webhook secret; beam-bot refuses unsigned webhooks: start again."
            )
        slug, client_id, html_url = data.get("slug"), data.get("client_id"), data.get("html_url")
        creds = AppCredentials(
            app_id=app_id,
            private_key=SecretStr(pem),
            webhook_secret=SecretStr(secret),
            slug=slug if isinstance(slug, str) else None,
            client_id=client_id if isinstance(client_id, str) else None,
            source="file",
        )
        return creds, html_url if isinstance(html_url, str) and html_url.startswith("https://") else None


def _page(title: str, body: str, *, status: int = 200) -> HTMLResponse:
    return HTMLResponse(
        f"""<!doctype html>
<html><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>body{{font:16px system-ui,sans-serif;max-width:44em;margin:3em auto;padding:0 1em}}
.warn{{background:#fff3cd;padding:.5em}} code{{background:#eee}}</style></head>
<body><h1>{html.escape(title)}</h1>{body}</body></html>
""",
        status_code=status,
        headers={"Cache-Control": "no-store", "X-Frame-Options": "DENY"},
    )


def status_page(body: str) -> HTMLResponse:
    return _page("beam-bot", body)
