"""The App's own credentials: its JWT, and installation tokens cached until a minute before expiry.

GitHub accepts a JWT at most 10 minutes long and advises back-dating `iat` by 60 s against clock
drift (https://docs.github.com/apps/creating-github-apps/authenticating-with-a-github-app/
generating-a-json-web-token-jwt-for-a-github-app). Installation tokens live one hour; the cache
renews them a minute early so a token never expires in the middle of a job, and concurrent callers
for the same installation wait on one fetch instead of each asking GitHub for a token.

The token is asked for as `gidgethub.apps.get_installation_access_token` asks, through gidgethub
(api.py); the JWT and the cache are ours, for the reasons in `app_jwt` and because gidgethub keeps
no installation tokens.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import anyio
import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey
from pydantic import SecretStr

from bot.app.github.api import GitHubApi
from bot.app.github.file_cache import FileCache
from bot.app.github.models import AppInfo, Installation, InstallationToken

JWT_BACKDATE = 60
JWT_LIFETIME = 600  # from the back-dated iat: expires 9 minutes after now
JWT_REUSE = 300.0  # a JWT is reused for 5 minutes, so it has at least 4 left when GitHub sees it
TOKEN_RENEW_MARGIN = 60.0


def load_private_key(pem: str) -> RSAPrivateKey:
    """Parses the App's PEM key once (parsing validates the RSA key and costs tens of milliseconds)."""
    try:
        key = serialization.load_pem_private_key(pem.encode(), password=None)
    except (ValueError, TypeError):
        raise ValueError("the GitHub App private key is not a readable PEM private key") from None
    if not isinstance(key, RSAPrivateKey):
        raise ValueError("the GitHub App private key is not an RSA key")
    return key


def app_jwt(app_id: int | str, private_key: str | RSAPrivateKey, now: float) -> str:
    """The claims `gidgethub.apps.get_jwt` makes, at `now` rather than at `time.time()`: the JWT follows
    the injected clock every other time here follows (the fake GitHub checks it against that clock),
    and the parsed key is reused instead of parsing the PEM for every JWT."""
    issued = int(now) - JWT_BACKDATE
    claims = {"iat": issued, "exp": issued + JWT_LIFETIME, "iss": str(app_id)}
    return jwt.encode(claims, private_key, algorithm="RS256")


@dataclass
class _Cached:
    token: SecretStr
    expires_at: float


class TokenCache:
    """Installation tokens by installation id; `fetch` is called at most once at a time per id."""

    def __init__(
        self,
        fetch: Callable[[int], Awaitable[InstallationToken]],
        clock: Callable[[], float],
        margin: float = TOKEN_RENEW_MARGIN,
    ) -> None:
        self._fetch = fetch
        self._clock = clock
        self._margin = margin
        self._tokens: dict[int, _Cached] = {}
        self._locks: dict[int, anyio.Lock] = {}

    def _fresh(self, installation_id: int) -> SecretStr | None:
        cached = self._tokens.get(installation_id)
        if cached is not None and cached.expires_at - self._margin > self._clock():
            return cached.token
        return None

    async def get(self, installation_id: int) -> SecretStr:
        token = self._fresh(installation_id)
        if token is not None:
            return token
        lock = self._locks.get(installation_id)
        if lock is None:
            lock = self._locks[installation_id] = anyio.Lock()
        async with lock:
            token = self._fresh(installation_id)  # another caller may have fetched while we waited
            if token is not None:
                return token
            fetched = await self._fetch(installation_id)
            self._tokens[installation_id] = _Cached(fetched.token, fetched.expires_at.timestamp())
            return fetched.token

    def invalidate(self, installation_id: int) -> None:
        self._tokens.pop(installation_id, None)


class GitHubApp:
    """The App itself: JWT-authenticated calls and the installation-token cache."""

    def __init__(self, api: GitHubApi, app_id: int | str, private_key: str | SecretStr) -> None:
        self.api = api
        self.app_id = app_id
        self._pem = private_key if isinstance(private_key, SecretStr) else SecretStr(private_key)
        self._key: RSAPrivateKey | None = None
        self._jwt: tuple[float, str] | None = None
        self.tokens = TokenCache(self._fetch_token, api.clock)
        self.files = FileCache()  # contents read by installations, revalidated with ETags

    def __repr__(self) -> str:
        return f"GitHubApp(app_id={self.app_id!r}, api={self.api.base_url!r})"

    def jwt(self) -> str:
        now = self.api.clock()
        if self._jwt is None or not self._jwt[0] <= now < self._jwt[0] + JWT_REUSE:
            if self._key is None:
                self._key = load_private_key(self._pem.get_secret_value())
            self._jwt = (now, app_jwt(self.app_id, self._key, now))
        return self._jwt[1]

    async def _fetch_token(self, installation_id: int) -> InstallationToken:
        # The call gidgethub.apps.get_installation_access_token makes, with our JWT (see app_jwt).
        url, url_vars = "/app/installations/{id}/access_tokens", {"id": installation_id}
        answer = await self.api.request("POST", url, url_vars, jwt=self.jwt())
        self.api.stats.token_fetches += 1
        return InstallationToken.model_validate(answer.data)

    async def installation_token(self, installation_id: int) -> SecretStr:
        return await self.tokens.get(installation_id)

    def invalidate_token(self, installation_id: int) -> None:
        self.tokens.invalidate(installation_id)

    async def get_app(self) -> AppInfo:
        return AppInfo.model_validate((await self.api.request("GET", "/app", jwt=self.jwt())).data)

    async def installation_for_repo(self, owner: str, repo: str) -> Installation:
        url, url_vars = "/repos/{owner}/{repo}/installation", {"owner": owner, "repo": repo}
        return Installation.model_validate(
            (await self.api.request("GET", url, url_vars, jwt=self.jwt())).data
        )
