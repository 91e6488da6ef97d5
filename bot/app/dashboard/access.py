"""Who asks the dashboard, and the endpoints that open and end their sessions (issue 44): GitHub's
sign-in, the operator's token form, sign-out.

Who may see what, decided per request before any query runs (the pages apply it: `routes.py`):
- a repository's figures and exports: a signed-in user GitHub lists it for (checked at sign-in and
  again once the check is older than ten minutes), an operator, or the bearer of BEAM_DASHBOARD_TOKEN;
  anyone else gets 404, the answer a repository that does not exist gets, so a private name is
  never confirmed;
- the installation view: an operator (admin on the App's owner account), the token's bearer, or a
  session opened with that token through the sign-in page's form (POST with a CSRF nonce, the token
  compared in constant time, wrong tries throttled: `throttle.py`).
Sessions are kept on the server (`session_store.py`); the cookie names one. Apart from the pages so
the sign-in's cookies, tokens and GitHub checks sit in one place, and a page only asks `viewer`.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Protocol
from urllib.parse import parse_qs, urlsplit

import httpx
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from bot.app.credentials.files import AppCredentials
from bot.app.dashboard import pages, signin
from bot.app.dashboard.session_store import SessionStore
from bot.app.dashboard.sessions import (
    FORM_COOKIE,
    FORM_TTL,
    SESSION_COOKIE,
    SESSION_TTL,
    SIGNIN_COOKIE,
    SIGNIN_TTL,
    CookieSealer,
    Session,
)
from bot.app.dashboard.throttle import Throttle
from bot.app.github.api import GitHubApi, GitHubError
from bot.app.github.auth import GitHubApp
from bot.app.jobs.store import Store
from bot.app.settings import Settings

log = logging.getLogger("beam.dashboard")
MAX_FORM = 8192  # bytes of the token form's body: a token and a nonce
OPERATOR_NAME = "operator (token)"  # who a token session is, on the page and in logs


class Resources(Protocol):
    """What the dashboard borrows from the running app (web's AppRuntime has all of it)."""

    settings: Settings
    store: Store | None
    github: httpx.AsyncClient | None
    credentials: AppCredentials | None


@dataclass(frozen=True, slots=True)
class Viewer:
    """Who asks: a session (None for the token's bearer) and whether they may see every repository."""

    session: Session | None
    operator: bool

    @property
    def login(self) -> str | None:
        return None if self.session is None else self.session.login

    def can_read(self, repo: str) -> bool:
        return self.operator or (self.session is not None and self.session.can_read(repo))


class Unavailable(Exception):
    """GitHub could not be asked whether a session may still read: refuse rather than guess."""


class Access:
    """The sign-in routes and who asks, over the app's resources; `clock` is the tests' seam for the
    10 minutes (the pages read their span's `now` from it too)."""

    def __init__(self, resources: Resources, *, clock: Callable[[], float] = time.time) -> None:
        self.resources = resources
        self.clock = clock
        self._sealer: CookieSealer | None = None
        self.throttle = Throttle()

    def routes(self) -> list[Route]:
        return [
            Route("/dashboard/login", self.login, methods=["GET"]),
            Route("/dashboard/callback", self.callback, methods=["GET"]),
            Route("/dashboard/logout", self.logout, methods=["POST"]),
            Route("/dashboard/token", self.token_signin, methods=["POST"]),
        ]

    # --- who asks -------------------------------------------------------------------------------------

    @property
    def settings(self) -> Settings:
        return self.resources.settings

    def sealer(self) -> CookieSealer | None:
        """None until the App has credentials (setup mode has no dashboard)."""
        creds = self.resources.credentials
        if creds is None:
            return None
        if self._sealer is None:
            key = self.settings.secret_key
            self._sealer = CookieSealer.from_secret_key(
                None if key is None else key.get_secret_value(), creds.private_key.get_secret_value()
            )
        return self._sealer

    def sessions(self) -> SessionStore | None:
        sealer = self.sealer()
        return None if sealer is None else SessionStore(self.store(), sealer)

    def oauth_client(self) -> signin.OAuthClient | None:
        creds = self.resources.credentials
        if creds is None or not creds.client_id or creds.client_secret is None:
            return None
        return signin.OAuthClient(creds.client_id, creds.client_secret.get_secret_value())

    def api(self) -> GitHubApi:
        assert self.resources.github is not None, "the lifespan opens the GitHub client"
        return GitHubApi(self.resources.github, base_url=self.settings.github_api_url)

    def secure(self, request: Request) -> bool:
        """Secure cookies behind TLS: the request came over https, or the public URL says https."""
        public = self.settings.public_url or ""
        return request.url.scheme == "https" or public.startswith("https://")

    def public_base(self, request: Request) -> str:
        return self.settings.public_url or str(request.base_url).rstrip("/")

    def token_fingerprint(self) -> str | None:
        """What a token session keeps of BEAM_DASHBOARD_TOKEN: changing the token ends those sessions."""
        token = self.settings.dashboard_token
        if token is None:
            return None
        return hashlib.sha256(b"beam-bot dashboard token\0" + token.get_secret_value().encode()).hexdigest()

    def token_ok(self, given: str) -> bool:
        """Whether `given` is BEAM_DASHBOARD_TOKEN, in time independent of where they differ and of
        their lengths (digests of both are compared)."""
        token = self.settings.dashboard_token
        if token is None or not given:
            return False
        want = hashlib.sha256(token.get_secret_value().encode()).digest()
        return hmac.compare_digest(hashlib.sha256(given.encode()).digest(), want)

    def bearer_ok(self, request: Request) -> bool:
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        return scheme.lower() == "bearer" and self.token_ok(given.strip())

    async def viewer(self, request: Request) -> Viewer | None:
        """Who asks. A session whose check is older than ten minutes is checked again first, and what
        the check found is kept with it (or the session ends, when its access is gone)."""
        if self.bearer_ok(request):
            return Viewer(None, operator=True)
        sessions = self.sessions()
        if sessions is None:
            return None
        now = self.clock()
        found = await sessions.load(request.cookies.get(SESSION_COOKIE), now)
        if found is None:
            return None
        key, session = found
        if not session.stale(now):
            return Viewer(session, session.operator)
        renewed = await self.recheck(session, now)
        if renewed is None:
            await sessions.end(key)
            return None
        await sessions.renew(key, renewed)
        return Viewer(renewed, renewed.operator)

    async def recheck(self, session: Session, now: float) -> Session | None:
        """GitHub's answer now: the repositories the user reads and their operator role. None when the
        token no longer works (revoked, expired): the visitor is signed out. A token session asks no
        one: it holds while BEAM_DASHBOARD_TOKEN is still the token it was opened with."""
        if session.by_token:
            fingerprint = self.token_fingerprint()
            if fingerprint is None or not hmac.compare_digest(fingerprint, session.token):
                return None
            return replace(session, checked_at=now)
        try:
            repos, operator = await self.access(session.token, session.login)
        except GitHubError as error:
            if error.status in (401, 403):
                return None
            raise Unavailable(str(error)) from None
        except (httpx.HTTPError, signin.SignInError) as error:
            raise Unavailable(str(error)) from None
        return replace(session, repos=repos, operator=operator, checked_at=now)

    async def access(self, token: str, login: str) -> tuple[tuple[str, ...], bool]:
        api = self.api()
        repos = await signin.readable_repos(api, token)
        creds = self.resources.credentials
        assert creds is not None
        app = GitHubApp(api, creds.app_id, creds.private_key)
        operator = await signin.is_owner_admin(api, app, token, login)
        return repos, operator

    async def signed_in(self, response: Response, request: Request, session: Session) -> Response:
        """Store a new session and give the browser the cookie that names it."""
        sessions = self.sessions()
        assert sessions is not None
        response.set_cookie(
            SESSION_COOKIE,
            await sessions.create(session, self.clock()),
            max_age=SESSION_TTL,
            path="/dashboard",
            httponly=True,
            secure=self.secure(request),
            samesite="lax",
        )
        return response

    def signin_response(
        self, request: Request, *, error: str | None = None, status: int | None = None
    ) -> Response:
        """The sign-in page; with BEAM_DASHBOARD_TOKEN set, also the operator's token form and its
        CSRF cookie (SameSite=Strict: a post from another site comes without it)."""
        sealer = self.sealer()
        nonce = None
        if sealer is not None and self.settings.dashboard_token is not None:
            nonce = secrets.token_urlsafe(24)
        response = pages.signin_page(
            configured=self.oauth_client() is not None, error=error, csrf=nonce, status=status
        )
        if nonce is not None and sealer is not None:
            response.set_cookie(
                FORM_COOKIE,
                sealer.seal_form(nonce, self.clock()),
                max_age=FORM_TTL,
                path="/dashboard",
                httponly=True,
                secure=self.secure(request),
                samesite="strict",
            )
        return self.forget(response, request)

    async def guarded(self, request: Request) -> tuple[Viewer | None, Response | None]:
        try:
            viewer = await self.viewer(request)
        except Unavailable as error:
            log.warning("dashboard: GitHub could not be asked about a session's access: %s", error)
            return (
                None,
                pages.page(
                    "GitHub is unreachable",
                    "<p>GitHub could not be asked what you may read. Try again in a minute.</p>",
                    status=503,
                ),
            )
        return viewer, None

    def store(self) -> Store:
        assert self.resources.store is not None, "the lifespan opens the store"
        return self.resources.store

    # --- endpoints ----------------------------------------------------------------------------------

    async def login(self, request: Request) -> Response:
        client, sealer = self.oauth_client(), self.sealer()
        if client is None or sealer is None:
            return self.signin_response(request)
        flow = signin.new_signin()
        target = signin.authorize_url(self.settings.github_web_url, client, self.redirect_uri(request), flow)
        response = RedirectResponse(target, status_code=303)
        response.set_cookie(
            SIGNIN_COOKIE,
            sealer.seal_signin(flow, self.clock()),
            max_age=SIGNIN_TTL,
            path="/dashboard",
            httponly=True,
            secure=self.secure(request),
            samesite="lax",  # GitHub's redirect back is a top-level GET: the cookie comes along
        )
        return response

    def redirect_uri(self, request: Request) -> str:
        return f"{self.public_base(request)}/dashboard/callback"

    async def callback(self, request: Request) -> Response:
        client, sealer = self.oauth_client(), self.sealer()
        if client is None or sealer is None:
            return self.signin_response(request)
        now = self.clock()
        flow = sealer.open_signin(request.cookies.get(SIGNIN_COOKIE), now)
        state, code = request.query_params.get("state", ""), request.query_params.get("code", "")
        if flow is None or not state or not hmac.compare_digest(state.encode(), flow.state.encode()):
            return self.signin_response(
                request,
                error="The sign-in could not be checked (its state does "
                "not match this browser's, or it took longer than ten minutes). Sign in again.",
            )
        if not code:
            return self.signin_response(request, error="GitHub sent no code. Sign in again.")
        assert self.resources.github is not None
        try:
            token = await signin.exchange_code(
                self.resources.github,
                self.settings.github_web_url,
                client,
                code,
                flow.verifier,
                self.redirect_uri(request),
            )
            login = await signin.user_login(self.api(), token)
            repos, operator = await self.access(token, login)
        except signin.SignInError as error:
            return self.signin_response(request, error=str(error))
        except (GitHubError, httpx.HTTPError) as error:
            log.warning("dashboard: sign-in failed at GitHub: %s", error)
            return self.signin_response(request, error="GitHub did not answer the sign-in. Try again.")
        log.info(
            "dashboard: %s signed in (%d repositories%s)", login, len(repos), ", operator" if operator else ""
        )
        session = Session(login, token, repos, now, operator)
        response = RedirectResponse(_local(flow.back_to), status_code=303)
        response.delete_cookie(SIGNIN_COOKIE, path="/dashboard")
        return await self.signed_in(response, request, session)

    async def token_signin(self, request: Request) -> Response:
        """The operator's token form: a right token opens an operator session; a wrong one gets 401
        and no session, and past the throttle's count 429 without being compared at all."""
        sealer, fingerprint = self.sealer(), self.token_fingerprint()
        if sealer is None or fingerprint is None:
            return PlainTextResponse(
                "The operator's token sign-in is off: BEAM_DASHBOARD_TOKEN is not set.\n", status_code=404
            )
        now = self.clock()
        client = request.client.host if request.client is not None else "-"
        if self.throttle.blocked(client, now):
            return self.signin_response(
                request, error="Too many wrong tokens. Wait ten minutes, then try again.", status=429
            )
        form = await _read_form(request)
        if form is None:
            return self.signin_response(request, error="The form was too large or not a form.", status=400)
        nonce = sealer.open_form(request.cookies.get(FORM_COOKIE), now)
        given_nonce = form.get("csrf", "")
        if nonce is None or not hmac.compare_digest(given_nonce.encode(), nonce.encode()):
            return self.signin_response(
                request,
                error="The form could not be checked (it is older than an hour, or was not sent from "
                "this page). Sign in again.",
                status=403,
            )
        if not self.token_ok(form.get("token", "")):
            self.throttle.failed(client, now)
            log.warning("dashboard: a wrong operator token from %s", client)
            return self.signin_response(request, error="That is not the operator token.", status=401)
        log.info("dashboard: an operator signed in with the token from %s", client)
        session = Session(OPERATOR_NAME, fingerprint, (), now, operator=True, by_token=True)
        response = RedirectResponse("/dashboard/installation", status_code=303)
        response.delete_cookie(FORM_COOKIE, path="/dashboard")
        return await self.signed_in(response, request, session)

    async def logout(self, request: Request) -> Response:
        sessions = self.sessions()
        if sessions is not None:
            await sessions.end_cookie(request.cookies.get(SESSION_COOKIE), self.clock())
        return self.forget(RedirectResponse("/dashboard", status_code=303), request)

    def forget(self, response: Response, request: Request) -> Response:
        for name in (SESSION_COOKIE, SIGNIN_COOKIE):
            if name in request.cookies:
                response.delete_cookie(
                    name, path="/dashboard", httponly=True, secure=self.secure(request), samesite="lax"
                )
        return response


async def _read_form(request: Request) -> dict[str, str] | None:
    """An urlencoded form of at most MAX_FORM bytes, each field's first value; None for anything else."""
    if request.headers.get("content-type", "").split(";")[0].strip() != "application/x-www-form-urlencoded":
        return None
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM:
            return None
    try:
        fields = parse_qs(body.decode("utf-8"), keep_blank_values=True, strict_parsing=False)
    except (UnicodeDecodeError, ValueError):
        return None
    return {name: values[0] for name, values in fields.items()}


def _local(path: str) -> str:
    """Only a path on this server is a place to return to after sign-in (no open redirect)."""
    parts = urlsplit(path)
    if parts.scheme or parts.netloc or not path.startswith("/dashboard"):
        return "/dashboard"
    return path
