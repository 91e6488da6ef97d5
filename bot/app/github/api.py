"""The HTTP layer under every GitHub call: gidgethub over our httpx client, our retries on its hooks.

gidgethub (`sansio`) writes the headers, deciphers answers into its exceptions and parses the rate
limit; `getiter` follows the pages. Our counters and retries sit on its two hooks, `_request` and
`handle_rate_limit_error`, so every page gets them (docs/github-adapter.md).

Retries follow GitHub's guidance (https://docs.github.com/rest/using-the-rest-api/best-practices-
for-using-the-rest-api): on a primary rate limit (403/429 with `x-ratelimit-remaining: 0`) wait until
`x-ratelimit-reset`; on a secondary limit wait `Retry-After` seconds, or at least a minute growing
exponentially; retry 5xx of idempotent methods with exponential backoff (a POST that got a 5xx may
have been done: the job retries it through the effects journal, which reads GitHub first). Attempts
are bounded and a wait longer than `max_wait` is not slept: the error carries `retry_at` so the job
queue can come back later instead of holding a worker. The sleep and the clock are injectable so
tests assert on the waits, not time.
"""

from __future__ import annotations

import http
import logging
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import aclosing, contextmanager
from dataclasses import KW_ONLY, dataclass, field
from itertools import count
from typing import Any

import anyio
import httpx
from gidgethub import GitHubBroken, HTTPException, RedirectionException, sansio
from gidgethub.abc import GitHubAPI as GidgetHubAPI
from uritemplate.variable import VariableValue

log = logging.getLogger("beam.github")

API_VERSION = "2022-11-28"
ACCEPT = "application/vnd.github+json"
IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "DELETE", "PATCH"})
UNSENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)

Sleep = Callable[[float], Awaitable[None]]
Clock = Callable[[], float]
UrlVars = Mapping[str, VariableValue]


@dataclass(eq=False, repr=False)  # an exception: compared by identity, shown as (status, message)
class GitHubError(Exception):
    """A GitHub call that failed for good; says what was asked and what GitHub answered, no secrets."""

    status: int
    message: str
    _: KW_ONLY
    method: str
    path: str
    errors: list[Any] = field(default_factory=list)
    retry_at: float | None = None

    def __post_init__(self) -> None:
        super().__init__(self.status, self.message)

    @property
    def rate_limited(self) -> bool:
        return self.retry_at is not None

    @property
    def transient(self) -> bool:
        """Worth retrying later: GitHub down or slow (5xx, no answer), or a rate limit."""
        return self.status >= 500 or self.status in (0, 429) or self.rate_limited

    def __str__(self) -> str:
        what = f"GitHub {self.method} {self.path} -> {self.status or 'no response'}: {self.message}"
        if self.errors:
            what += f" ({self.errors})"
        return what


@dataclass
class GitHubStats:
    """Counters for /metrics; plain ints so the web layer can read them without locking."""

    calls: int = 0
    errors: dict[int, int] = field(default_factory=dict)
    not_modified: int = 0
    retries: int = 0
    rate_limit_waits: int = 0
    transport_errors: int = 0
    token_fetches: int = 0
    rate_limit_remaining: int | None = None

    def metrics(self) -> dict[str, int]:
        out = {
            "github_api_calls": self.calls,
            "github_api_not_modified": self.not_modified,
            "github_api_retries": self.retries,
            "github_api_rate_limit_waits": self.rate_limit_waits,
            "github_api_transport_errors": self.transport_errors,
            "github_installation_token_fetches": self.token_fetches,
        }
        out.update({f"github_api_errors_{status}": count for status, count in sorted(self.errors.items())})
        if self.rate_limit_remaining is not None:
            out["github_api_rate_limit_remaining"] = self.rate_limit_remaining
        return out


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 4
    backoff_base: float = 1.0
    backoff_max: float = 30.0
    max_wait: float = 300.0
    secondary_wait: float = 60.0


@dataclass(frozen=True)
class Answer:
    """A 2xx or 304 answer: the decoded body (None for a 304), its headers and the next page's URL."""

    status: int
    data: Any
    headers: Mapping[str, str]
    next_url: str | None = None


@dataclass(eq=False)  # one per process, compared and hashed by identity as before
class GitHubApi:
    """One GitHub (github.com or an Enterprise Server's `https://host/api/v3`) over a shared httpx client.

    URLs are gidgethub's: relative to `base_url`, URI templates filled from `url_vars` (which
    escapes owner, repo and user names from webhook payloads), or absolute (a `Link` page)."""

    http: httpx.AsyncClient
    _: KW_ONLY
    base_url: str = sansio.DOMAIN
    user_agent: str = "beam-bot"
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    sleep: Sleep = anyio.sleep
    clock: Clock = time.time
    stats: GitHubStats = field(default_factory=GitHubStats)

    def __post_init__(self) -> None:
        self.base_url = self.base_url.rstrip("/")

    @contextmanager
    def call(self, method: str, url: str, url_vars: UrlVars | None = None) -> Iterator[_Call]:
        """A gidgethub API for one logical call, whose HTTPExceptions come out as GitHubError."""
        call = _Call(self, method, url, url_vars)
        try:
            yield call
        except HTTPException as exc:
            raise call.error(exc) from None

    async def request(
        self,
        method: str,
        url: str,
        url_vars: UrlVars | None = None,
        *,
        jwt: str | None = None,
        oauth_token: str | None = None,
        data: Any = b"",
        etag: str = "",
    ) -> Answer:
        """Sends one call with retries; returns 2xx and 304 answers (`etag` makes a GET conditional),
        raises GitHubError otherwise."""
        conditional = {"if-none-match": etag} if etag else None
        auth: dict[str, Any] = {"jwt": jwt, "oauth_token": oauth_token, "extra_headers": conditional}
        with self.call(method, url, url_vars) as gh:
            try:
                if method == "GET":
                    body = await gh.getitem(url, url_vars, **auth)
                else:
                    body = await getattr(gh, method.lower())(url, url_vars, data=data, **auth)
            except RedirectionException as exc:
                if exc.status_code != http.HTTPStatus.NOT_MODIFIED:
                    raise
                return Answer(304, None, exc.headers)
        last = gh.last
        assert last is not None  # gidgethub answered, so a response came
        return Answer(last.status_code, body, last.headers, last.links.get("next", {}).get("url"))

    async def pages(
        self, url: str, url_vars: UrlVars | None = None, *, oauth_token: str | None = None, limit: int
    ) -> list[Any]:
        """Up to `limit` items of a listing, page after page by its `Link` header (gidgethub's getiter);
        a page is asked for only while more items are wanted."""
        items: list[Any] = []
        with self.call("GET", url, url_vars) as gh:
            async with aclosing(gh.getiter(url, url_vars, oauth_token=oauth_token)) as pages:
                async for item in pages:
                    items.append(item)
                    if len(items) >= limit:
                        break
        return items

    @property
    def graphql_url(self) -> str:
        """GitHub's GraphQL endpoint: `/graphql` beside the REST root on github.com, `/api/graphql`
        on an Enterprise Server (whose REST root is `/api/v3`)."""
        base = self.base_url
        return base.removesuffix("/v3") + "/graphql" if base.endswith("/api/v3") else base + "/graphql"

    def backoff(self, attempt: int) -> float:
        return float(min(self.retry.backoff_base * 2 ** (attempt - 1), self.retry.backoff_max))

    def retry_wait(self, method: str, exc: HTTPException, message: str, attempt: int) -> float | None:
        """Seconds to wait before asking again, or None when asking again would not help."""
        status, headers = int(exc.status_code), exc.headers
        try:
            retry_after: float | None = float(headers["retry-after"])
        except (KeyError, ValueError):
            retry_after = None
        if status in (403, 429):
            if retry_after is not None:
                return retry_after
            limit = sansio.RateLimit.from_http(headers)
            if limit is not None and limit.remaining == 0:
                return max(limit.reset_datetime.timestamp() - self.clock(), 0.0) + 1.0
            if status == 429 or "secondary rate limit" in message.lower():
                return float(self.retry.secondary_wait * 2 ** (attempt - 1))
            return None
        if isinstance(exc, GitHubBroken) and method in IDEMPOTENT:
            # A write may have happened before GitHub failed: the job's retry first reads GitHub
            # through the effects journal instead of writing blindly again (issue 8).
            return retry_after if retry_after is not None else self.backoff(attempt)
        return None


class _Call(GidgetHubAPI):
    """One logical call, with its pages and retries, on gidgethub's abstract API over our httpx client.

    Made per call (it is a few attributes) so what it records, the last response and when to come
    back, belongs to this call and never to a concurrent one."""

    def __init__(self, api: GitHubApi, method: str, url: str, url_vars: UrlVars | None) -> None:
        super().__init__(api.user_agent, base_url=api.base_url)
        self.api = api
        self.method = method
        # What errors and logs name: the path asked for, without the host or the query.
        self.path = sansio.format_url(url, url_vars, base_url="/").partition("?")[0]
        self.last: httpx.Response | None = None
        self.retry_at: float | None = None

    async def sleep(self, seconds: float) -> None:
        await self.api.sleep(seconds)

    async def _request(
        self, method: str, url: str, headers: Mapping[str, str], body: bytes = b""
    ) -> tuple[int, Mapping[str, str], bytes]:
        api, stats = self.api, self.api.stats
        # gidgethub's default Accept is the old v3 media type; GitHub documents its current one.
        accept = ACCEPT if headers["accept"] == sansio.accept_format() else headers["accept"]
        sent = {**headers, "accept": accept, "x-github-api-version": API_VERSION}
        for attempt in count(1):
            try:
                response = await api.http.request(method, url, headers=sent, content=body)
                break
            except httpx.TransportError as exc:
                stats.transport_errors += 1
                # A request that may have reached GitHub is only repeated when repeating is harmless.
                if attempt >= api.retry.max_attempts or not (isinstance(exc, UNSENT) or method in IDEMPOTENT):
                    raise GitHubError(
                        0, f"{type(exc).__name__}: {exc}", method=method, path=self.path
                    ) from None
                delay = api.backoff(attempt)
                log.info("github %s %s: %s; retrying in %.1f s", method, self.path, type(exc).__name__, delay)
                await self.sleep(delay)
        stats.calls += 1
        status = response.status_code
        log.debug("github %s %s -> %s", method, self.path, status)
        limit = sansio.RateLimit.from_http(response.headers)
        if limit is not None:
            stats.rate_limit_remaining = limit.remaining
        if status == 304:
            stats.not_modified += 1
        elif status >= 400:
            stats.errors[status] = stats.errors.get(status, 0) + 1
        self.last = response
        return status, response.headers, response.content

    async def handle_rate_limit_error(
        self, *, method: str, url: str, exception: HTTPException, attempt: int
    ) -> bool:
        api = self.api
        status = int(exception.status_code)
        wait = api.retry_wait(method, exception, self._message(status), attempt)
        if wait is None or attempt >= api.retry.max_attempts or wait > api.retry.max_wait:
            self.retry_at = api.clock() + wait if wait is not None and status in (403, 429) else None
            return False
        api.stats.retries += 1
        if status in (403, 429):
            api.stats.rate_limit_waits += 1
        log.info("github %s %s -> %s; retrying in %.1f s", method, self.path, status, wait)
        await self.sleep(wait)
        return True

    def _message(self, status: int) -> str:
        """GitHub's own message, as it wrote it (gidgethub adds the errors to a 422's)."""
        try:
            message = self.last.json().get("message") if self.last is not None else None
        except (ValueError, AttributeError):  # not JSON, or not an object
            message = None
        return message if isinstance(message, str) else http.HTTPStatus(status).phrase

    def error(self, exc: HTTPException) -> GitHubError:
        status, errors = int(exc.status_code), getattr(exc, "errors", None)
        return GitHubError(
            status,
            self._message(status),
            method=self.method,
            path=self.path,
            errors=errors if isinstance(errors, list) else [],
            retry_at=self.retry_at,
        )
