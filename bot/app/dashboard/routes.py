"""The dashboard's HTTP endpoints and who may see what (issue 44).

Access, decided per request before any query runs:
- a repository's figures and exports: a signed-in user GitHub lists it for (checked at sign-in and
  again once the check is older than ten minutes), an operator, or the bearer of BEAM_DASHBOARD_TOKEN;
  anyone else gets 404, the answer a repository that does not exist gets, so a private name is
  never confirmed;
- the installation view: an operator (admin on the App's owner account) or the token's bearer.
Every endpoint answers GET except sign-out, and none changes the bot's state.
"""

from __future__ import annotations

import hmac
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Protocol
from urllib.parse import urlsplit

import httpx
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from bot.app.credentials.files import AppCredentials
from bot.app.dashboard import pages, signin
from bot.app.dashboard.queries import (
    SPANS,
    InstallationFigures,
    RepoFigures,
    Span,
    installation_figures,
    repo_figures,
)
from bot.app.dashboard.sessions import (
    SESSION_COOKIE,
    SESSION_TTL,
    SIGNIN_COOKIE,
    SIGNIN_TTL,
    CookieSealer,
    Session,
)
from bot.app.dashboard.tables import Table, installation_tables, repo_tables
from bot.app.github.api import GitHubApi, GitHubError
from bot.app.github.auth import GitHubApp
from bot.app.jobs.store import Store
from bot.app.limits.policy import Policy
from bot.app.settings import Settings

log = logging.getLogger("beam.dashboard")
DEFAULT_DAYS = 30
_FORMATS = {"csv": "text/csv; charset=utf-8", "json": "application/json"}


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


class Dashboard:
    """The /dashboard routes over the app's resources; `clock` is the tests' seam for the 10 minutes."""

    def __init__(self, resources: Resources, *, clock: Callable[[], float] = time.time) -> None:
        self.resources = resources
        self.clock = clock
        self._sealer: CookieSealer | None = None

    def routes(self) -> list[Route]:
        return [
            Route("/dashboard", self.home, methods=["GET"]),
            Route("/dashboard/login", self.login, methods=["GET"]),
            Route("/dashboard/callback", self.callback, methods=["GET"]),
            Route("/dashboard/logout", self.logout, methods=["POST"]),
            Route("/dashboard/installation", self.installation, methods=["GET"]),
            Route("/dashboard/installation/export/{table}.{fmt}", self.installation_export, methods=["GET"]),
            Route("/dashboard/repos/{owner}/{repo}", self.repo, methods=["GET"]),
            Route("/dashboard/repos/{owner}/{repo}/export/{table}.{fmt}", self.repo_export, methods=["GET"]),
        ]

    # --- the pieces every endpoint uses -------------------------------------------------------------

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

    def bearer_ok(self, request: Request) -> bool:
        token = self.settings.dashboard_token
        if token is None:
            return False
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not given.strip():
            return False
        return hmac.compare_digest(given.strip().encode(), token.get_secret_value().encode())

    async def viewer(self, request: Request) -> tuple[Viewer | None, Session | None]:
        """Who asks, and a renewed session to send back when its check was redone (else None)."""
        if self.bearer_ok(request):
            return Viewer(None, operator=True), None
        sealer = self.sealer()
        if sealer is None:
            return None, None
        now = self.clock()
        session = sealer.open_session(request.cookies.get(SESSION_COOKIE), now)
        if session is None:
            return None, None
        if not session.stale(now):
            return Viewer(session, session.operator), None
        renewed = await self.recheck(session, now)
        if renewed is None:
            return None, None
        return Viewer(renewed, renewed.operator), renewed

    async def recheck(self, session: Session, now: float) -> Session | None:
        """GitHub's answer now: the repositories the user reads and their operator role. None when the
        token no longer works (revoked, expired): the visitor is signed out."""
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

    def with_session(self, response: Response, request: Request, session: Session | None) -> Response:
        if session is not None:
            sealer = self.sealer()
            assert sealer is not None
            response.set_cookie(
                SESSION_COOKIE,
                sealer.seal_session(session, self.clock()),
                max_age=SESSION_TTL,
                path="/dashboard",
                httponly=True,
                secure=self.secure(request),
                samesite="lax",
            )
        return response

    async def guarded(self, request: Request) -> tuple[Viewer | None, Session | None, Response | None]:
        try:
            viewer, renewed = await self.viewer(request)
        except Unavailable as error:
            log.warning("dashboard: GitHub could not be asked about a session's access: %s", error)
            return (
                None,
                None,
                pages.page(
                    "GitHub is unreachable",
                    "<p>GitHub could not be asked what you may read. Try again in a minute.</p>",
                    status=503,
                ),
            )
        return viewer, renewed, None

    def span(self, request: Request) -> Span | None:
        raw = request.query_params.get("days", str(DEFAULT_DAYS))
        if not raw.isdigit() or int(raw) not in SPANS:
            return None
        return Span(int(raw), self.clock())

    def store(self) -> Store:
        assert self.resources.store is not None, "the lifespan opens the store"
        return self.resources.store

    # --- endpoints ----------------------------------------------------------------------------------

    async def home(self, request: Request) -> Response:
        if self.resources.credentials is None:
            return pages.page(
                "beam-bot dashboard", "<p>The App is not registered yet: open / first.</p>", status=503
            )
        viewer, renewed, refused = await self.guarded(request)
        if refused is not None:
            return refused
        if viewer is None:
            return self.forget(pages.signin_page(configured=self.oauth_client() is not None), request)
        if viewer.session is None:
            return RedirectResponse("/dashboard/installation", status_code=303)
        response = pages.home_page(viewer.session.login, viewer.session.repos, operator=viewer.operator)
        return self.with_session(response, request, renewed)

    async def login(self, request: Request) -> Response:
        client, sealer = self.oauth_client(), self.sealer()
        if client is None or sealer is None:
            return pages.signin_page(configured=False)
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
            return pages.signin_page(configured=False)
        now = self.clock()
        flow = sealer.open_signin(request.cookies.get(SIGNIN_COOKIE), now)
        state, code = request.query_params.get("state", ""), request.query_params.get("code", "")
        if flow is None or not state or not hmac.compare_digest(state.encode(), flow.state.encode()):
            return self.forget(
                pages.signin_page(
                    configured=True,
                    error="The sign-in could not be checked (its state does "
                    "not match this browser's, or it took longer than ten minutes). Sign in again.",
                ),
                request,
            )
        if not code:
            return self.forget(
                pages.signin_page(configured=True, error="GitHub sent no code. Sign in again."), request
            )
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
            return self.forget(pages.signin_page(configured=True, error=str(error)), request)
        except (GitHubError, httpx.HTTPError) as error:
            log.warning("dashboard: sign-in failed at GitHub: %s", error)
            return self.forget(
                pages.signin_page(configured=True, error="GitHub did not answer the sign-in. Try again."),
                request,
            )
        log.info(
            "dashboard: %s signed in (%d repositories%s)", login, len(repos), ", operator" if operator else ""
        )
        session = Session(login, token, repos, now, operator)
        response = RedirectResponse(_local(flow.back_to), status_code=303)
        response.delete_cookie(SIGNIN_COOKIE, path="/dashboard")
        return self.with_session(response, request, session)

    async def logout(self, request: Request) -> Response:
        return self.forget(RedirectResponse("/dashboard", status_code=303), request)

    def forget(self, response: Response, request: Request) -> Response:
        for name in (SESSION_COOKIE, SIGNIN_COOKIE):
            if name in request.cookies:
                response.delete_cookie(
                    name, path="/dashboard", httponly=True, secure=self.secure(request), samesite="lax"
                )
        return response

    async def repo(self, request: Request) -> Response:
        found = await self._repo_tables(request)
        if isinstance(found, Response):
            return found
        viewer, renewed, figures, tables = found
        return self.with_session(pages.repo_page(figures, tables, viewer.login), request, renewed)

    async def repo_export(self, request: Request) -> Response:
        found = await self._repo_tables(request)
        if isinstance(found, Response):
            return found
        _, renewed, figures, tables = found
        return self.with_session(self.export(request, tables, figures.repo), request, renewed)

    async def _repo_tables(
        self, request: Request
    ) -> Response | tuple[Viewer, Session | None, RepoFigures, dict[str, Table]]:
        viewer, renewed, refused = await self.guarded(request)
        if refused is not None:
            return refused
        repo = f"{request.path_params['owner']}/{request.path_params['repo']}"
        if viewer is None or not viewer.can_read(repo):
            # The same 404 for a signed-out visitor, a user GitHub does not list it for, and no such
            # repository: a private repository's name is never confirmed.
            return pages.not_found(None if viewer is None else viewer.login)
        span = self.span(request)
        if span is None:
            return PlainTextResponse(f"days must be one of {', '.join(map(str, SPANS))}\n", status_code=400)
        if viewer.session is not None:
            repo = next((r for r in viewer.session.repos if r.lower() == repo.lower()), repo)
        figures = await repo_figures(self.store(), repo, span)
        prices = Policy.from_settings(self.settings).prices
        return viewer, renewed, figures, repo_tables(figures, prices, self.settings.github_web_url)

    async def installation(self, request: Request) -> Response:
        found = await self._installation_tables(request)
        if isinstance(found, Response):
            return found
        viewer, renewed, figures, tables = found
        return self.with_session(pages.installation_page(figures, tables, viewer.login), request, renewed)

    async def installation_export(self, request: Request) -> Response:
        found = await self._installation_tables(request)
        if isinstance(found, Response):
            return found
        _, renewed, _, tables = found
        return self.with_session(self.export(request, tables, "installation"), request, renewed)

    async def _installation_tables(
        self, request: Request
    ) -> Response | tuple[Viewer, Session | None, InstallationFigures, dict[str, Table]]:
        viewer, renewed, refused = await self.guarded(request)
        if refused is not None:
            return refused
        if viewer is None or not viewer.operator:
            return pages.not_found(None if viewer is None else viewer.login)
        span = self.span(request)
        if span is None:
            return PlainTextResponse(f"days must be one of {', '.join(map(str, SPANS))}\n", status_code=400)
        figures = await installation_figures(self.store(), span)
        return (
            viewer,
            renewed,
            figures,
            installation_tables(figures, Policy.from_settings(self.settings).prices),
        )

    def export(self, request: Request, tables: dict[str, Table], what: str) -> Response:
        table = tables.get(request.path_params["table"])
        fmt = request.path_params["fmt"]
        if table is None or fmt not in _FORMATS:
            return PlainTextResponse("no such table or format\n", status_code=404)
        body = table.csv() if fmt == "csv" else table.json()
        name = f"{what.replace('/', '-')}-{table.name}.{fmt}"
        headers = {**pages.SECURITY_HEADERS, "Content-Disposition": f'attachment; filename="{name}"'}
        return Response(body, media_type=_FORMATS[fmt], headers=headers)


def _local(path: str) -> str:
    """Only a path on this server is a place to return to after sign-in (no open redirect)."""
    parts = urlsplit(path)
    if parts.scheme or parts.netloc or not path.startswith("/dashboard"):
        return "/dashboard"
    return path
