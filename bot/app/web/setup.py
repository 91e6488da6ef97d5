"""First-run setup mode: register the GitHub App through GitHub's manifest flow, without a restart.

On a fresh machine `beam-bot serve` has no App credentials. It starts anyway and `GET /` shows a form
that posts the App manifest (app.yml, with this server's URLs filled in) to GitHub. GitHub creates
the App and redirects the browser to `/setup/callback?code=...&state=...`; we check `state` (kept in
memory, short-lived), exchange the code for the App's id, private key and webhook secret
(`POST /app-manifests/{code}/conversions`, no authentication), store them, and switch the running
app to normal mode. They are stored in the database, sealed with BEAM_SECRET_KEY, when the key is set
(every host reads them there), else in `<work_dir>/app-credentials.json` (mode 0600) on SQLite; on
PostgreSQL without a key the page says which key to set instead of registering (issue 23).
See https://docs.github.com/apps/sharing-github-apps/registering-a-github-app-from-a-manifest

Guards, in order: the page needs the one-time setup token the server logs at start (as Jupyter does),
so whoever reaches a fresh server first cannot make it their App; registration is not offered when
GitHub could not reach the webhook URL (a loopback or private address without a proxy channel); the
`state` stays valid until the credentials are stored, so a failed conversion can be retried with the
same code (GitHub accepts it for an hour), and a converted App whose credentials could not be written
is kept in memory for that retry instead of being orphaned on GitHub.
"""

from __future__ import annotations

import copy
import hmac
import ipaddress
import re
import secrets
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import anyio
import anyio.to_thread
import httpx
import yaml
from pydantic import SecretStr
from sqlalchemy.exc import SQLAlchemyError
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from bot.app.credentials import stored
from bot.app.credentials.files import AppCredentials, optional_secret, write_credentials_file
from bot.app.jobs.store import Store
from bot.app.settings import Settings, normalise_pem
from bot.app.web import setup_pages as pages
from bot.beam.errors import BeamError

# The manifest shipped with beam-bot; app.yml at the project root is the same manifest with the reason
# for each permission (a test keeps the two equal). BEAM_APP_MANIFEST points at a custom one.
DEFAULT_MANIFEST: dict[str, Any] = {
    "name": "beam-bot",
    "url": "https://github.com/beam-bot/beam-bot",
    "description": "Runs Riverbeam skills on pull requests; every push waits for a maintainer's approval.",
    "public": False,
    "hook_attributes": {"active": True},
    "default_events": [
        "issue_comment",
        "pull_request_review_comment",
        "pull_request",
        "pull_request_review_thread",
    ],
    "default_permissions": {
        "contents": "write",
        "pull_requests": "write",
        "issues": "write",
        "checks": "write",
        "metadata": "read",
    },
}
STATE_TTL = 3600.0
TOKEN_COOKIE = "beam_setup_token"  # noqa: S105 - the cookie's name, not a secret
MAX_APP_NAME = 34  # GitHub's limit on an App's name
_MAX_STATES = 64
_CODE_RE = re.compile(r"^[A-Za-z0-9_-]{1,128}$")
_ORG_RE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})$")
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 ._-]{0,33}$")
_LOCAL_SUFFIXES = (".localhost", ".local", ".internal", ".lan", ".home.arpa", ".localdomain")


def load_manifest(settings: Settings) -> dict[str, Any]:
    """The manifest to register (BEAM_APP_MANIFEST, else the built-in one). Blocking: a small file read."""
    if settings.app_manifest is None:
        return copy.deepcopy(DEFAULT_MANIFEST)
    data = yaml.safe_load(settings.app_manifest.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"BEAM_APP_MANIFEST: {settings.app_manifest} is not a YAML mapping")
    return data


def build_manifest(
    base: dict[str, Any], public_url: str, *, webhook_url: str | None = None, name: str | None = None
) -> dict[str, Any]:
    """`base` with this server's webhook and redirect URLs; everything else is kept as written.

    `webhook_url` replaces `<public_url>/webhooks` (a proxy channel); `name` replaces the App's name.
    """
    manifest = copy.deepcopy(base)
    manifest.setdefault("url", public_url)
    if name:
        manifest["name"] = name
    hook = dict(manifest.get("hook_attributes") or {})
    hook["url"] = webhook_url or f"{public_url}/webhooks"
    hook.setdefault("active", True)
    manifest["hook_attributes"] = hook
    # The browser follows the redirect, not GitHub: a loopback address works here.
    manifest["redirect_url"] = f"{public_url}/setup/callback"
    # Issue 44: where GitHub may send a user back from "Sign in with GitHub" on /dashboard.
    callbacks = [url for url in manifest.get("callback_urls") or [] if isinstance(url, str)]
    dashboard = f"{public_url}/dashboard/callback"
    manifest["callback_urls"] = [*callbacks, dashboard] if dashboard not in callbacks else callbacks
    return manifest


def unreachable_reason(url: str, *, private_ok: bool = False) -> str | None:
    """Why GitHub could not send webhooks to `url`, or None when it may. No DNS lookup is made.

    `private_ok`: GitHub Enterprise Server often lives on the same private network, so only loopback
    and local names count there.
    """
    host = (urlsplit(url).hostname or "").lower().rstrip(".")
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        ip = None
    if ip is not None:
        if ip.is_loopback or ip.is_unspecified:
            return "is a loopback address: only this machine can reach it"
        if not ip.is_global and not private_ok:
            return "is a private address: GitHub cannot reach it from the internet"
        return None
    if host == "localhost" or host.endswith(".localhost"):
        return "is a loopback address: only this machine can reach it"
    if "." not in host or host.endswith(_LOCAL_SUFFIXES):
        return "is a local network name: GitHub cannot resolve it"
    return None


def suggest_name(base: str, org: str, suffix: str) -> str:
    """A name nobody registered yet, with high probability: App names are global on GitHub."""
    stem = base if not org else f"{base}-{org}"
    stem = stem[: MAX_APP_NAME - len(suffix) - 1].rstrip("-. ")
    return f"{stem}-{suffix}"


class SetupError(Exception):
    def __init__(self, status: int, message: str, *, retry: bool = False, orphan_hint: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.retry = retry
        self.orphan_hint = orphan_hint


Converted = tuple[AppCredentials, str | None]


class SetupFlow:
    """The token gate, the manifest form and its callback; the lifespan sets `client` (the GitHub client)."""

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
        self.store: Store | None = None
        token = settings.setup_token
        self.token = token.get_secret_value() if token is not None else secrets.token_urlsafe(24)
        self.name_suffix = secrets.token_hex(3)
        self._states: OrderedDict[str, float] = OrderedDict()
        # Conversions whose credentials are not stored yet, by code: a retry stores them without
        # asking GitHub again (the code converts only once).
        self._converted: dict[str, Converted] = {}
        self._lock = anyio.Lock()
        self.done = False

    def open_url(self, base: str) -> str:
        """The address the start-up log shows: the setup page with the token."""
        return f"{base.rstrip('/')}/?token={self.token}"

    def public_url(self, request: Request) -> str:
        return self.settings.public_url or str(request.base_url).rstrip("/")

    def new_state(self) -> str:
        now = time.monotonic()
        while self._states and (len(self._states) >= _MAX_STATES or next(iter(self._states.values())) < now):
            self._states.popitem(last=False)
        state = secrets.token_urlsafe(24)
        self._states[state] = now + STATE_TTL
        return state

    def state_valid(self, state: str) -> bool:
        """True for a state this server issued that has not expired. Used up only by `_finish`."""
        expires = self._states.get(state)
        return expires is not None and expires >= time.monotonic()

    def _token_ok(self, candidate: str | None) -> bool:
        return candidate is not None and hmac.compare_digest(candidate.encode(), self.token.encode())

    async def page(self, request: Request) -> Response:
        offered = (request.query_params.get("token") or "").strip()
        if offered:
            if not self._token_ok(offered):
                return pages.token_needed(wrong=True, log_hint=self.public_url(request))
            # Drop the token from the address bar and history; the cookie carries it from now on.
            rest = {k: v for k, v in request.query_params.items() if k != "token"}
            response = RedirectResponse("/" + (f"?{urlencode(rest)}" if rest else ""), status_code=303)
            response.set_cookie(
                TOKEN_COOKIE,
                self.token,
                httponly=True,
                samesite="lax",
                secure=request.url.scheme == "https",
                max_age=int(STATE_TTL) * 24,
            )
            return response
        if not self._token_ok(request.cookies.get(TOKEN_COOKIE)):
            return pages.token_needed(wrong=False, log_hint=self.public_url(request))
        return self._form(request)

    def _form(self, request: Request) -> HTMLResponse:
        public = self.public_url(request)
        if self._storage() is None:
            return pages.secret_key_needed(stored.missing_key_advice())
        org = request.query_params.get("org", "").strip()
        if org and not _ORG_RE.match(org):
            return pages.bad_input(
                f"{org!r} is not a GitHub organization name. Leave it empty for your account."
            )
        name = request.query_params.get("name", "").strip()
        if name and not _NAME_RE.match(name):
            return pages.bad_input(
                f"{name!r} cannot be a GitHub App name: up to {MAX_APP_NAME} letters, digits, spaces, "
                "dots, dashes or underscores."
            )
        name = name or suggest_name(str(self.manifest.get("name") or "beam-bot"), org, self.name_suffix)
        proxy = self.settings.webhook_proxy_url
        web = self.settings.github_web_url
        if proxy is None:
            reason = unreachable_reason(public, private_ok=_is_enterprise_server(web))
            if reason is not None:
                return pages.unreachable(
                    public_url=public,
                    reason=reason,
                    port_hint="" if request.url.port in (None, 8080) else f" --port {request.url.port}",
                    manifest=self.manifest,
                    explicit=self.settings.public_url is not None,
                )
        manifest = build_manifest(self.manifest, public, webhook_url=proxy, name=name)
        owner_path = f"/organizations/{org}" if org else ""
        action = f"{web}{owner_path}/settings/apps/new?" + urlencode({"state": self.new_state()})
        warning = None
        if self.settings.public_url is None and proxy is None:
            warning = (
                "BEAM_PUBLIC_URL is not set: the App will send webhooks to the address this page was "
                "opened with. GitHub must be able to reach it; set BEAM_PUBLIC_URL and restart if it cannot."
            )
        return pages.register(
            action=action,
            manifest=manifest,
            org=org,
            name=name,
            stored_in=None if self._storage() == "database" else str(self.settings.credentials_path),
            webhook_url=manifest["hook_attributes"]["url"],
            via_proxy=proxy is not None,
            warning=warning,
        )

    async def callback(self, request: Request) -> Response:
        code = request.query_params.get("code", "")
        state = request.query_params.get("state", "")
        try:
            async with self._lock:
                if self.done:
                    raise SetupError(409, "The GitHub App is already registered: this server is running.")
                if not state or not self.state_valid(state):
                    raise SetupError(400, "Unknown or expired setup state: start again from the setup page.")
                if not _CODE_RE.match(code):
                    raise SetupError(400, "GitHub's code is missing or malformed: start again.")
                await self._refuse_unless_storable()
                converted = self._converted.get(code)
                if converted is None:
                    converted = await self._convert(code)
                    self._converted[code] = converted
                creds, html_url = converted
                await self._store(creds)
                self._states.clear()
                self._converted.clear()
                await self.on_registered(creds)  # sets `done`
        except SetupError as err:
            retry = "/setup/callback?" + urlencode({"code": code, "state": state}) if err.retry else None
            apps = f"{self.settings.github_web_url}/settings/apps" if err.orphan_hint else None
            return pages.callback_error(err.status, err.message, retry_url=retry, apps_url=apps)
        install = f"{html_url}/installations/new" if html_url else None
        return pages.registered(creds.slug or str(creds.app_id), creds.app_id, install)

    def _storage(self) -> stored.Storage | None:
        return stored.storage_for(self.settings)

    async def _refuse_unless_storable(self) -> None:
        """Before a code converts: refuse when the credentials could not be kept (BEM-378), and
        adopt those another process stored meanwhile (BEM-379)."""
        storage = self._storage()
        if storage is None:
            error = BeamError("BEM-378", f"This server uses PostgreSQL: {stored.missing_key_advice()}.")
            raise SetupError(503, str(error))
        if storage == "database" and self.store is not None:
            try:
                existing = await stored.read_stored(self.store, self.settings.secret_keys)
            except stored.CredentialsError as error:  # sealed with another key than this server's
                raise SetupError(500, str(error)) from None
            if existing is not None:
                await self.on_registered(existing)
                raise SetupError(
                    409, str(BeamError("BEM-379", f"this server serves App {existing.app_id} now"))
                )

    async def _store(self, creds: AppCredentials) -> None:
        where = "the database"
        try:
            if self._storage() == "database":
                assert self.store is not None and self.settings.secret_keys is not None
                if not await stored.save_stored(self.store, self.settings.secret_keys, creds):
                    # Lost a race with another process: its App is the one every host reads.
                    raise SetupError(409, str(BeamError("BEM-379", "restart this server")), orphan_hint=True)
            else:
                path = self.settings.credentials_path
                where = str(path)
                await anyio.to_thread.run_sync(write_credentials_file, path, creds)
        except (OSError, SQLAlchemyError) as exc:
            reason = getattr(exc, "strerror", None) or type(exc).__name__
            raise SetupError(
                500,
                f"GitHub created the App, but its credentials could not be written to {where} "
                f"({reason}). Fix that, then try again: this server keeps them until it stops.",
                retry=True,
            ) from None

    async def _convert(self, code: str) -> Converted:
        assert self.client is not None, "the lifespan sets the GitHub client"
        try:
            response = await self.client.post(f"/app-manifests/{quote(code, safe='')}/conversions")
        except httpx.HTTPError as exc:
            raise SetupError(
                502, f"Could not reach GitHub ({type(exc).__name__}).", retry=True, orphan_hint=True
            ) from None
        if response.status_code >= 500 or response.status_code == 429:
            raise SetupError(
                502, f"GitHub answered HTTP {response.status_code}.", retry=True, orphan_hint=True
            )
        if response.status_code != 201:
            raise SetupError(
                502,
                f"GitHub refused the code (HTTP {response.status_code}): a code converts once and expires "
                "after an hour. Start again from the setup page.",
                orphan_hint=True,
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
        client_secret = data.get("client_secret")
        creds = AppCredentials(
            app_id=app_id,
            private_key=SecretStr(pem),
            webhook_secret=SecretStr(secret),
            slug=slug if isinstance(slug, str) else None,
            client_id=client_id if isinstance(client_id, str) else None,
            client_secret=optional_secret(client_secret),
            source="file",
        )
        return creds, html_url if isinstance(html_url, str) and html_url.startswith("https://") else None


def _is_enterprise_server(web_url: str) -> bool:
    host = urlsplit(web_url).hostname or ""
    return host != "github.com" and not host.endswith(".ghe.com")


def install_url(settings: Settings, slug: str | None) -> str | None:
    """The App's installation page on GitHub, for the status page after setup."""
    return f"{settings.github_web_url}/apps/{quote(slug)}/installations/new" if slug else None


def status_page(body: str) -> HTMLResponse:
    return pages.page("beam-bot", body)
