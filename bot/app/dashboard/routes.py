"""The dashboard's pages and exports: the repository's and the installation's, each as HTML and as
CSV or JSON tables (issue 44).

Who asks is `access.py`'s (the sign-in routes, sessions, the token): a page asks it for the viewer,
then decides what that viewer may see here: a repository GitHub lists for them (else the 404 a
missing repository gets), the installation view for an operator. Every page answers GET and none
changes the bot's state.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from bot.app.dashboard import pages
from bot.app.dashboard.access import Access, Resources, Viewer
from bot.app.dashboard.installation_queries import InstallationFigures, installation_figures
from bot.app.dashboard.repo_queries import RepoFigures, repo_figures
from bot.app.dashboard.spans import SPANS, Span
from bot.app.dashboard.tables import Table, installation_tables, repo_tables
from bot.app.jobs.store import Store
from bot.app.limits.policy import Policy
from bot.app.settings import Settings

DEFAULT_DAYS = 30
_FORMATS = {"csv": "text/csv; charset=utf-8", "json": "application/json"}


class Dashboard:
    """The /dashboard routes over the app's resources: the pages here, the sign-in's from `access`
    (whose `clock` both read)."""

    def __init__(self, resources: Resources, *, clock: Callable[[], float] = time.time) -> None:
        self.resources = resources
        self.access = Access(resources, clock=clock)

    def routes(self) -> list[Route]:
        return [
            Route("/dashboard", self.home, methods=["GET"]),
            *self.access.routes(),
            Route("/dashboard/installation", self.installation, methods=["GET"]),
            Route("/dashboard/installation/export/{table}.{fmt}", self.installation_export, methods=["GET"]),
            Route("/dashboard/repos/{owner}/{repo}", self.repo, methods=["GET"]),
            Route("/dashboard/repos/{owner}/{repo}/export/{table}.{fmt}", self.repo_export, methods=["GET"]),
        ]

    # --- the pieces every page uses -----------------------------------------------------------------

    @property
    def settings(self) -> Settings:
        return self.resources.settings

    def span(self, request: Request) -> Span | None:
        raw = request.query_params.get("days", str(DEFAULT_DAYS))
        if not raw.isdigit() or int(raw) not in SPANS:
            return None
        return Span(int(raw), self.access.clock())

    def store(self) -> Store:
        assert self.resources.store is not None, "the lifespan opens the store"
        return self.resources.store

    # --- endpoints ----------------------------------------------------------------------------------

    async def home(self, request: Request) -> Response:
        if self.resources.credentials is None:
            return pages.page(
                "beam-bot dashboard", "<p>The App is not registered yet: open / first.</p>", status=503
            )
        viewer, refused = await self.access.guarded(request)
        if refused is not None:
            return refused
        if viewer is None:
            return self.access.signin_response(request)
        if viewer.session is None or viewer.session.by_token:
            return RedirectResponse("/dashboard/installation", status_code=303)
        return pages.home_page(viewer.session.login, viewer.session.repos, operator=viewer.operator)

    async def repo(self, request: Request) -> Response:
        found = await self._repo_tables(request)
        if isinstance(found, Response):
            return found
        viewer, figures, tables = found
        return pages.repo_page(figures, tables, viewer.login)

    async def repo_export(self, request: Request) -> Response:
        found = await self._repo_tables(request)
        if isinstance(found, Response):
            return found
        _, figures, tables = found
        return self.export(request, tables, figures.repo)

    async def _repo_tables(self, request: Request) -> Response | tuple[Viewer, RepoFigures, dict[str, Table]]:
        viewer, refused = await self.access.guarded(request)
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
        return viewer, figures, repo_tables(figures, prices, self.settings.github_web_url)

    async def installation(self, request: Request) -> Response:
        found = await self._installation_tables(request)
        if isinstance(found, Response):
            return found
        viewer, figures, tables = found
        return pages.installation_page(figures, tables, viewer.login)

    async def installation_export(self, request: Request) -> Response:
        found = await self._installation_tables(request)
        if isinstance(found, Response):
            return found
        _, _, tables = found
        return self.export(request, tables, "installation")

    async def _installation_tables(
        self, request: Request
    ) -> Response | tuple[Viewer, InstallationFigures, dict[str, Table]]:
        viewer, refused = await self.access.guarded(request)
        if refused is not None:
            return refused
        if viewer is None or not viewer.operator:
            return pages.not_found(None if viewer is None else viewer.login)
        span = self.span(request)
        if span is None:
            return PlainTextResponse(f"days must be one of {', '.join(map(str, SPANS))}\n", status_code=400)
        figures = await installation_figures(self.store(), span)
        return viewer, figures, installation_tables(figures, Policy.from_settings(self.settings).prices)

    def export(self, request: Request, tables: dict[str, Table], what: str) -> Response:
        table = tables.get(request.path_params["table"])
        fmt = request.path_params["fmt"]
        if table is None or fmt not in _FORMATS:
            return PlainTextResponse("no such table or format\n", status_code=404)
        body = table.csv() if fmt == "csv" else table.json()
        name = f"{what.replace('/', '-')}-{table.name}.{fmt}"
        headers = {**pages.SECURITY_HEADERS, "Content-Disposition": f'attachment; filename="{name}"'}
        return Response(body, media_type=_FORMATS[fmt], headers=headers)
