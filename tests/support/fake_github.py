"""The fake GitHub used by the whole test suite: an ASGI app over in-memory state.

Every request is checked against GitHub's OpenAPI description (tests/data/github/rest-subset.json):
an unknown route or an invalid request is recorded in `fake.violations` and answered 4xx, and
`checked_fake_github()` fails the test on exit if there was any. Credentials are checked as GitHub
checks them: an RS256 App JWT on the /app endpoints, an unexpired installation token elsewhere.

Use it in-process through `fake.transport()` (httpx.ASGITransport), or on loopback for
subprocesses with `with serve_fake_github(fake) as api_url: ...`. Seed state with the helpers of
FakeState (add_repo, add_pull, add_collaborator, add_comment, add_reaction, set_file, ...), inject
faults with `fake.inject(...)`, and read what the client did in `fake.calls`. A test module's fixture:

    @pytest.fixture
    def fake() -> Iterator[FakeGitHub]:
        with checked_fake_github() as fake:
            yield fake
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

import anyio
import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from bot.app.github.api import GitHubApi
from bot.app.github.client import GitHubApp, InstallationClient
from tests.support import (
    fake_github_hooks,
    fake_github_oauth,
    fake_github_ops_checks,
    fake_github_ops_issues,
    fake_github_ops_pulls,
)
from tests.support.asgi_server import serve_asgi
from tests.support.fake_github_auth import AppKey, check_app_jwt, generate_app_key, shared_app_key
from tests.support.fake_github_graphql import GraphQL
from tests.support.fake_github_handlers import HANDLERS, Answer, Ctx, FakeHandlers, Reply
from tests.support.fake_github_render import Render, Urls
from tests.support.fake_github_spec import Checked, RestSpec

JWT_OPERATIONS = frozenset(
    {
        "apps/get-authenticated",
        "apps/create-installation-access-token",
        "apps/get-repo-installation",
        "apps/list-webhook-deliveries",
        "apps/redeliver-webhook-delivery",
    }
)
OPERATION_MODULES = (
    fake_github_hooks,
    fake_github_oauth,
    fake_github_ops_issues,
    fake_github_ops_pulls,
    fake_github_ops_checks,
)  # importing them registers handlers
UNAUTHENTICATED = frozenset({"apps/create-from-manifest"})
BASE_URL = "http://github.test"  # what in-process clients of the fake call it
API_VERSIONS = frozenset({"2022-11-28"})
DOCS = "https://docs.github.com/rest"


@dataclass
class Call:
    method: str
    path: str
    query: dict[str, str]
    body: Any
    operation_id: str | None
    headers: dict[str, str]
    prefix: str = ""
    status: int = 0
    auth: str | None = None
    installation_id: int | None = None
    user: str | None = None


@dataclass
class Violation:
    method: str
    path: str
    problems: list[str]


@dataclass
class Injection:
    method: str
    pattern: re.Pattern[str]
    status: int | None
    headers: dict[str, str]
    body: Any
    times: int | None
    delay: float
    hits: int = 0


@dataclass
class RateLimit:
    limit: int = 5000
    remaining: int = 5000
    reset: float | None = None  # epoch seconds; None means an hour after the fake started


class FakeGitHub(FakeHandlers):
    def __init__(
        self,
        *,
        api_prefix: str = "",
        git_base_url: str = "http://git.invalid",
        web_url: str = "https://github.com",
        key: AppKey | None = None,
        clock: Callable[[], float] = time.time,
        app_id: int = 4242,
        app_slug: str = "beam-bot",
        token_lifetime: float = 3600.0,
    ) -> None:
        super().__init__(clock=clock, app_id=app_id, app_slug=app_slug, token_lifetime=token_lifetime)
        self.api_prefix = api_prefix.rstrip("/")
        self.git_base_url = git_base_url.rstrip("/")
        self.web_url = web_url.rstrip("/")
        self.key = key or shared_app_key()
        self.spec = RestSpec.load()
        self.calls: list[Call] = []
        self.violations: list[Violation] = []
        self.injections: list[Injection] = []
        self.not_modified = 0
        # Called with each call GitHub has acted on, before its answer is sent (crash tests kill the
        # bot here: the write happened, the bot never reads the answer).
        self.on_answered: list[Callable[[Call], None]] = []
        self.rate_limit = RateLimit(reset=clock() + 3600)
        self.resolved_threads: set[int] = set()  # root review comment ids (fake_github_graphql.py)
        # The App's webhook: deliveries sent to the bot, their attempts, redeliveries (issue 32).
        self.hooks = fake_github_hooks.HookDeliveries(clock)
        methods = ["GET", "POST", "PATCH", "PUT", "DELETE", "HEAD"]
        self.app = Starlette(routes=[Route("/{anything:path}", self._endpoint, methods=methods)])

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)

    # --- test-facing API --------------------------------------------------------------------------

    def transport(self) -> httpx.ASGITransport:
        return httpx.ASGITransport(app=self)

    def inject(
        self,
        method: str,
        path_regex: str,
        *,
        status: int | None = 500,
        headers: dict[str, str] | None = None,
        body: Any = None,
        times: int | None = 1,
        delay: float = 0.0,
    ) -> Injection:
        """Answers the next `times` matching requests (None: all) with `status`, after `delay` seconds.

        `path_regex` is searched in the path without the API prefix; `method` may be "*". With
        `status=None` the request is only delayed, then handled normally.
        """
        if body is None and status is not None:
            body = {"message": "Server Error" if status >= 500 else "Injected failure"}
        injection = Injection(
            method.upper(), re.compile(path_regex), status, headers or {}, body, times, delay
        )
        self.injections.append(injection)
        return injection

    def calls_to(self, operation_id: str) -> list[Call]:
        return [c for c in self.calls if c.operation_id == operation_id]

    def assert_no_violations(self) -> None:
        assert not self.violations, "requests GitHub would refuse:\n" + "\n".join(
            f"  {v.method} {v.path}: {'; '.join(v.problems)}" for v in self.violations
        )

    @property
    def graphql_path(self) -> str:
        """`/graphql` beside the REST root, or `/api/graphql` beside an Enterprise `/api/v3`."""
        prefix = self.api_prefix
        return prefix.removesuffix("/v3") + "/graphql" if prefix.endswith("/api/v3") else prefix + "/graphql"

    async def _graphql(self, request: Request) -> Response:
        """GraphQL (fake_github_graphql.py): an installation token, a JSON body, a checked document."""
        raw = await request.body()
        try:
            body = json.loads(raw or b"null")
        except ValueError:
            body = None
        call = Call("POST", "/graphql", {}, body, "graphql", {}, self.api_prefix)
        self.calls.append(call)
        try:
            call.auth, call.installation_id = self._authenticate(request, "graphql")
        except Answer as refused:
            call.status = refused.status
            return self._error(refused)
        answer = GraphQL(self, self.resolved_threads).answer(body)
        if "errors" in answer:
            self.violations.append(Violation("POST", "/graphql", [e["message"] for e in answer["errors"]]))
        call.status = 200
        for hook in list(self.on_answered):
            hook(call)
        return self._json(200, answer)

    # --- request pipeline ------------------------------------------------------------------------

    async def _endpoint(self, request: Request) -> Response:
        raw_path = request.scope.get("raw_path", request.url.path.encode()).decode("latin-1")
        path = raw_path.split("?", 1)[0]
        if request.method == "POST" and path == self.graphql_path:
            return await self._graphql(request)
        prefix = ""
        if self.api_prefix:
            if path.startswith(self.api_prefix + "/"):
                prefix, path = self.api_prefix, path[len(self.api_prefix) :]
            else:
                path = "/__outside_api_prefix__" + path
        query = parse_qsl(request.url.query, keep_blank_values=True)
        raw_body = await request.body()
        checked = self.spec.check_request(request.method, path, query, raw_body)
        problems = list(checked.problems) + self._header_problems(request)
        wanted = ("user-agent", "accept", "x-github-api-version", "if-none-match")
        call = Call(
            request.method,
            path,
            dict(query),
            checked.body if checked.body is not None else raw_body or None,
            checked.operation.operation_id if checked.operation else None,
            {k: request.headers[k] for k in wanted if k in request.headers},
            prefix,
        )
        self.calls.append(call)
        # As GitHub does, a request is carried out even when its client goes away meanwhile (a bot
        # killed during a delayed POST: the object still appears, seconds later; issue 23).
        with anyio.CancelScope(shield=True):
            response = await self._answer(
                request, call, checked.operation is not None, problems, checked, query
            )
        call.status = response.status_code
        for hook in list(self.on_answered):
            hook(call)
        return response

    def _header_problems(self, request: Request) -> list[str]:
        problems = []
        if not request.headers.get("user-agent"):
            problems.append("no User-Agent header (GitHub answers 403)")
        version = request.headers.get("x-github-api-version")
        if version is not None and version not in API_VERSIONS:
            problems.append(f"unsupported X-GitHub-Api-Version {version!r}")
        return problems

    async def _answer(
        self,
        request: Request,
        call: Call,
        known: bool,
        problems: list[str],
        checked: Checked,
        query: list[tuple[str, str]],
    ) -> Response:
        if problems:
            self.violations.append(Violation(call.method, call.path, problems))
            status = 422 if known else 404
            return self._json(
                status,
                {
                    "message": "Validation Failed" if known else "Not Found",
                    "errors": problems,
                    "documentation_url": DOCS,
                },
            )
        for injection in self.injections:
            if injection.times == 0 or injection.method not in ("*", call.method):
                continue
            if not injection.pattern.search(call.path):
                continue
            injection.hits += 1
            if injection.times is not None:
                injection.times -= 1
            if injection.delay:
                await anyio.sleep(injection.delay)
            if injection.status is not None:
                return self._json(
                    injection.status, injection.body, {**self._limit_headers(), **injection.headers}
                )
            break
        operation_id = call.operation_id or ""
        try:
            call.auth, call.installation_id = self._authenticate(request, operation_id)
        except Answer as refused:
            return self._error(refused)
        if call.auth is not None and self.rate_limit.remaining <= 0:
            what = f"installation ID {call.installation_id}" if call.installation_id else "this app"
            return self._json(
                403,
                {
                    "message": f"API rate limit exceeded for {what}.",
                    "documentation_url": f"{DOCS}/overview/rate-limits-for-the-rest-api",
                },
                self._limit_headers(),
            )
        base = str(request.base_url).rstrip("/") + call.prefix
        ctx = Ctx(
            checked.path_params,
            dict(query),
            checked.body,
            str(request.url),
            Render(self, Urls(base, self.web_url, self.git_base_url)),
            call.installation_id,
            call.auth.removeprefix("user:") if call.auth and call.auth.startswith("user:") else None,
        )
        try:
            reply = HANDLERS[operation_id](self, ctx)
        except Answer as refused:
            reply = Reply(refused.status, self._error_body(refused))
        return self._finish(request, call, reply)

    def _finish(self, request: Request, call: Call, reply: Reply) -> Response:
        content = json.dumps(reply.body, separators=(",", ":")).encode()
        headers = dict(reply.headers)
        if call.method == "GET" and reply.status == 200:
            etag = 'W/"' + hashlib.sha256(content).hexdigest() + '"'
            headers["ETag"] = etag
            if etag in [t.strip() for t in request.headers.get("if-none-match", "").split(",")]:
                self.not_modified += 1  # conditional hits cost no rate limit on GitHub
                return Response(status_code=304, headers={**headers, **self._limit_headers()})
        if call.auth is not None:
            self.rate_limit.remaining = max(self.rate_limit.remaining - 1, 0)
            headers.update(self._limit_headers())
        return Response(content, reply.status, headers, media_type="application/json; charset=utf-8")

    def _authenticate(self, request: Request, operation_id: str) -> tuple[str | None, int | None]:
        if operation_id in UNAUTHENTICATED:
            return None, None
        scheme, _, credential = request.headers.get("authorization", "").partition(" ")
        if operation_id in fake_github_oauth.USER_OPERATIONS:
            # A user token (the dashboard's sign-in): only these operations, and only with one.
            login = self.oauth.tokens.get(credential) if scheme.lower() in ("token", "bearer") else None
            if login is None:
                raise Answer(401, "Bad credentials")
            return f"user:{login}", None
        if operation_id in JWT_OPERATIONS:
            if scheme.lower() != "bearer":
                raise Answer(401, "A JSON web token could not be decoded")
            check_app_jwt(credential, self.key.public_pem, self.app_id, self.clock())
            return "jwt", None
        if scheme.lower() not in ("token", "bearer") or credential not in self.tokens:
            raise Answer(401, "Bad credentials")
        installation_id, expires_at = self.tokens[credential]
        if expires_at <= self.clock():
            raise Answer(401, "Bad credentials")
        return "token", installation_id

    def _limit_headers(self) -> dict[str, str]:
        limit = self.rate_limit
        return {
            "x-ratelimit-limit": str(limit.limit),
            "x-ratelimit-remaining": str(limit.remaining),
            "x-ratelimit-used": str(limit.limit - limit.remaining),
            "x-ratelimit-reset": str(int(limit.reset or 0)),
            "x-ratelimit-resource": "core",
        }

    def _error_body(self, refused: Answer) -> dict[str, Any]:
        body: dict[str, Any] = {
            "message": refused.message,
            "documentation_url": DOCS,
            "status": str(refused.status),
        }
        if refused.errors is not None:
            body["errors"] = refused.errors
        return body

    def _error(self, refused: Answer) -> Response:
        return self._json(refused.status, self._error_body(refused))

    def _json(self, status: int, body: Any, headers: dict[str, str] | None = None) -> Response:
        content = json.dumps(body, separators=(",", ":")).encode() if body is not None else b""
        return Response(content, status, headers, media_type="application/json; charset=utf-8")


@contextmanager
def serve_fake_github(fake: FakeGitHub, host: str = "127.0.0.1") -> Iterator[str]:
    """Serves `fake` with uvicorn on `host` (random port) in a thread; yields the API base URL."""
    with serve_asgi(fake, "fake GitHub server", host) as base:
        yield f"{base}{fake.api_prefix}"


@contextmanager
def checked_fake_github(**options: Any) -> Iterator[FakeGitHub]:
    """A fresh fake that fails the test on exit if any request was one GitHub would refuse."""
    fake = FakeGitHub(**options)
    yield fake
    fake.assert_no_violations()


__all__ = [
    "AppKey",
    "Call",
    "FakeGitHub",
    "Injection",
    "RateLimit",
    "Violation",
    "checked_fake_github",
    "generate_app_key",
    "serve_fake_github",
    "shared_app_key",
]


@asynccontextmanager
async def installation_client(
    fake: FakeGitHub, installation_id: int, transport: httpx.AsyncBaseTransport | None = None
) -> AsyncIterator[InstallationClient]:
    """The app's own `InstallationClient` talking to `fake` in process (through `transport`, which
    wraps the fake's, when a test must see or hold the calls)."""
    async with httpx.AsyncClient(transport=transport or fake.transport(), base_url=BASE_URL) as http:
        app = GitHubApp(GitHubApi(http, base_url=BASE_URL), fake.app_id, fake.key.private_pem)
        yield InstallationClient(app, installation_id)
