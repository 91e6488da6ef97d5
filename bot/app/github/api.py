"""The HTTP layer under every GitHub call: headers, retries, rate-limit waits, errors and counters.

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

import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx

log = logging.getLogger("beam.github")

API_VERSION = "2022-11-28"
DEFAULT_API_URL = "https://api.github.com"
IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "DELETE", "PATCH"})

Sleep = Callable[[float], Awaitable[None]]
Clock = Callable[[], float]


class GitHubError(Exception):
    """A GitHub call that failed for good; says what was asked and what GitHub answered, no secrets."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        method: str,
        path: str,
        documentation_url: str | None = None,
        errors: list[Any] | None = None,
        retry_at: float | None = None,
    ) -> None:
        super().__init__(status, message)
        self.status = status
        self.message = message
        self.method = method
        self.path = path
        self.documentation_url = documentation_url
        self.errors = errors or []
        self.retry_at = retry_at

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


class GitHubApi:
    """One GitHub (github.com or an Enterprise Server's `https://host/api/v3`) over a shared httpx client."""

    def __init__(
        self,
        http: httpx.AsyncClient,
        *,
        base_url: str = DEFAULT_API_URL,
        user_agent: str = "beam-bot",
        retry: RetryPolicy | None = None,
        sleep: Sleep = anyio.sleep,
        clock: Clock = time.time,
        stats: GitHubStats | None = None,
    ) -> None:
        self.http = http
        self.base_url = base_url.rstrip("/")
        self.user_agent = user_agent
        self.retry = retry or RetryPolicy()
        self.sleep = sleep
        self.clock = clock
        self.stats = stats or GitHubStats()

    async def request(
        self,
        method: str,
        path: str,
        *,
        auth: str | None = None,
        params: Mapping[str, str | int] | None = None,
        json: Any = None,
        headers: Mapping[str, str] | None = None,
        url: str | None = None,
    ) -> httpx.Response:
        """Sends one call with retries; returns 2xx and 304 answers, raises GitHubError otherwise.

        `auth` is the whole Authorization header value; it goes in the header only. `url` replaces
        the REST address (GraphQL's, `graphql_url`); `path` still names the call in logs.
        """
        sent = {
            "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": API_VERSION,
            "User-Agent": self.user_agent,
            **(headers or {}),
        }
        if auth is not None:
            sent["Authorization"] = auth
        url = url or self.base_url + path
        attempt = 0
        while True:
            attempt += 1
            try:
                response = await self.http.request(method, url, params=params, json=json, headers=sent)
            except httpx.TransportError as exc:
                self.stats.transport_errors += 1
                # A request that may have reached GitHub is only repeated when repeating is harmless.
                unsent = isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout | httpx.PoolTimeout)
                if attempt < self.retry.max_attempts and (unsent or method in IDEMPOTENT):
                    delay = self._backoff(attempt)
                    log.info(
                        "github %s %s failed (%s); retrying in %.1f s",
                        method,
                        path,
                        type(exc).__name__,
                        delay,
                    )
                    await self.sleep(delay)
                    continue
                raise GitHubError(0, f"{type(exc).__name__}: {exc}", method=method, path=path) from None
            self.stats.calls += 1
            self._note_rate_limit(response)
            status = response.status_code
            log.debug("github %s %s -> %s", method, path, status)
            if status < 400:
                if status == 304:
                    self.stats.not_modified += 1
                return response
            self.stats.errors[status] = self.stats.errors.get(status, 0) + 1
            wait = self._retry_wait(response, attempt)
            if status >= 500 and method not in IDEMPOTENT:
                # The write may have happened before GitHub failed: the job's retry first reads
                # GitHub through the effects journal instead of writing blindly again (issue 8).
                wait = None
            if wait is None or attempt >= self.retry.max_attempts or wait > self.retry.max_wait:
                retry_at = self.clock() + wait if wait is not None and status in (403, 429) else None
                raise self._error(response, method, path, retry_at)
            self.stats.retries += 1
            if status in (403, 429):
                self.stats.rate_limit_waits += 1
            log.info("github %s %s -> %s; retrying in %.1f s", method, path, status, wait)
            await self.sleep(wait)

    @property
    def graphql_url(self) -> str:
        """GitHub's GraphQL endpoint: `/graphql` beside the REST root on github.com, `/api/graphql`
        on an Enterprise Server (whose REST root is `/api/v3`)."""
        base = self.base_url
        return base.removesuffix("/v3") + "/graphql" if base.endswith("/api/v3") else base + "/graphql"

    def _backoff(self, attempt: int) -> float:
        return float(min(self.retry.backoff_base * 2 ** (attempt - 1), self.retry.backoff_max))

    def _retry_wait(self, response: httpx.Response, attempt: int) -> float | None:
        status = response.status_code
        retry_after = _seconds(response.headers.get("retry-after"))
        if status in (403, 429):
            if retry_after is not None:
                return retry_after
            if response.headers.get("x-ratelimit-remaining") == "0":
                reset = _seconds(response.headers.get("x-ratelimit-reset"))
                if reset is not None:
                    return max(reset - self.clock(), 0.0) + 1.0
            if status == 429 or "secondary rate limit" in _message(response).lower():
                return float(self.retry.secondary_wait * 2 ** (attempt - 1))
            return None
        if status >= 500:
            return retry_after if retry_after is not None else self._backoff(attempt)
        return None

    def _note_rate_limit(self, response: httpx.Response) -> None:
        remaining = response.headers.get("x-ratelimit-remaining")
        if remaining is not None and remaining.isdigit():
            self.stats.rate_limit_remaining = int(remaining)

    def _error(self, response: httpx.Response, method: str, path: str, retry_at: float | None) -> GitHubError:
        body = _json_object(response)
        errors = body.get("errors")
        return GitHubError(
            response.status_code,
            _message(response),
            method=method,
            path=path,
            documentation_url=body.get("documentation_url"),
            errors=errors if isinstance(errors, list) else None,
            retry_at=retry_at,
        )


def _seconds(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def _json_object(response: httpx.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def _message(response: httpx.Response) -> str:
    message = _json_object(response).get("message")
    if isinstance(message, str):
        return message
    return response.reason_phrase or f"HTTP {response.status_code}"
