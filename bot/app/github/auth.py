"""The App's own credentials: its JWT and installation tokens from `gidgethub.apps`, and the tokens
kept until a minute before they expire, which gidgethub does not do.

gidgethub makes the JWT as GitHub asks (at most 10 minutes long, `iat` back-dated 60 s against clock
drift: https://docs.github.com/apps/creating-github-apps/authenticating-with-a-github-app/
generating-a-json-web-token-jwt-for-a-github-app) and asks for installation tokens. They live one
hour; ours are renewed a minute early so a token never expires in the middle of a job, and
concurrent callers for the same installation wait on one fetch instead of each asking GitHub.
"""

from __future__ import annotations

import anyio
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey
from cryptography.hazmat.primitives.serialization import load_pem_private_key
from gidgethub.apps import get_installation_access_token, get_jwt
from pydantic import SecretStr

from bot.app.github.api import GitHubApi
from bot.app.github.file_cache import FileCache
from bot.app.github.models import AppInfo, HookDelivery, Installation, InstallationToken

TOKEN_RENEW_MARGIN = 60.0


def load_private_key(pem: str) -> RSAPrivateKey:
    """Parses the App's PEM key: parsing checks the RSA key and costs tens of milliseconds of CPU,
    signing a JWT with the parsed key well under one, so it is parsed once."""
    try:
        key = load_pem_private_key(pem.encode(), password=None)
    except (ValueError, TypeError):
        raise ValueError("the GitHub App private key is not a readable PEM private key") from None
    if not isinstance(key, RSAPrivateKey):
        raise ValueError("the GitHub App private key is not an RSA key")
    return key


class GitHubApp:
    """The App itself: JWT-authenticated calls and its installations' tokens, by installation id."""

    def __init__(self, api: GitHubApi, app_id: int | str, private_key: str | SecretStr) -> None:
        self.api = api
        self.app_id = app_id
        self._pem = private_key if isinstance(private_key, SecretStr) else SecretStr(private_key)
        self._key: RSAPrivateKey | None = None
        self._tokens: dict[int, InstallationToken] = {}
        self._locks: dict[int, anyio.Lock] = {}
        self.files = FileCache()  # contents read by installations, revalidated with ETags

    def __repr__(self) -> str:
        return f"GitHubApp(app_id={self.app_id!r}, api={self.api.base_url!r})"

    def key(self) -> RSAPrivateKey:
        """The parsed key, for gidgethub: it hands it to `jwt.encode`, which takes a parsed key as
        well as a PEM (gidgethub's `str | bytes` says less than it takes)."""
        if self._key is None:
            self._key = load_private_key(self._pem.get_secret_value())
        return self._key

    def jwt(self) -> str:
        """A new App JWT (a signature's worth of CPU): for `GET /app` and an installation's lookup."""
        return get_jwt(app_id=str(self.app_id), private_key=self.key())  # type: ignore[arg-type]

    def _fresh(self, installation_id: int) -> SecretStr | None:
        token = self._tokens.get(installation_id)
        if token is not None and token.expires_at.timestamp() - TOKEN_RENEW_MARGIN > self.api.clock():
            return token.token
        return None

    async def installation_token(self, installation_id: int) -> SecretStr:
        """The installation's token; asked of GitHub at most once at a time per installation."""
        if (token := self._fresh(installation_id)) is not None:
            return token
        async with self._locks.setdefault(installation_id, anyio.Lock()):
            if (token := self._fresh(installation_id)) is not None:  # fetched while we waited
                return token
            url_vars = {"id": installation_id}
            with self.api.call("POST", "/app/installations/{id}/access_tokens", url_vars) as gh:
                answer = await get_installation_access_token(
                    gh,
                    installation_id=str(installation_id),
                    app_id=str(self.app_id),
                    private_key=self.key(),  # type: ignore[arg-type]
                )
            self.api.stats.token_fetches += 1
            fetched = self._tokens[installation_id] = InstallationToken.model_validate(answer)
            return fetched.token

    def invalidate_token(self, installation_id: int) -> None:
        self._tokens.pop(installation_id, None)

    async def get_app(self) -> AppInfo:
        return AppInfo.model_validate((await self.api.request("GET", "/app", jwt=self.jwt())).data)

    async def installation_for_repo(self, owner: str, repo: str) -> Installation:
        url, url_vars = "/repos/{owner}/{repo}/installation", {"owner": owner, "repo": repo}
        return Installation.model_validate(
            (await self.api.request("GET", url, url_vars, jwt=self.jwt())).data
        )

    async def hook_deliveries(self, since: float) -> list[HookDelivery]:
        """The App webhook's delivery attempts made at `since` (epoch seconds) or later, newest
        first, page after page by the cursor of the `Link` header (issue 32)."""
        found: list[HookDelivery] = []
        url: str | None = "/app/hook/deliveries?per_page=100"
        while url is not None:
            answer = await self.api.request("GET", url, jwt=self.jwt())  # a JWT lives 10 minutes
            page = [HookDelivery.model_validate(item) for item in answer.data or []]
            found += [d for d in page if d.delivered_at.timestamp() >= since]
            # Newest first: a page that reaches past `since` is the last one needed.
            if not page or page[-1].delivered_at.timestamp() < since:
                break
            url = answer.next_url
        return found

    async def redeliver(self, delivery_id: int) -> None:
        """Asks GitHub to deliver the attempt `delivery_id` again (same payload, same GUID)."""
        url, url_vars = "/app/hook/deliveries/{delivery_id}/attempts", {"delivery_id": delivery_id}
        await self.api.request("POST", url, url_vars, jwt=self.jwt())


# What a workflow's GITHUB_TOKEN acts as: https://docs.github.com/actions/security-for-github-actions/
# security-guides/automatic-token-authentication. A token from `gh auth token` acts as its user.
ACTIONS_LOGIN = "github-actions[bot]"
ONE_INSTALLATION = 1  # a token stands for one "installation": the repositories it may reach


class TokenAuth(GitHubApp):
    """The same client, authenticated by one token instead of the App's JWT: the Action's
    GITHUB_TOKEN or a person's token for `beam-bot review <URL>`. Everything above asks for an
    installation's token as with the App; this answers with the one token for every installation,
    so no part of triage, permission checks, runs or posting knows which way the bot came in."""

    def __init__(self, api: GitHubApi, token: str | SecretStr, login: str = ACTIONS_LOGIN) -> None:
        super().__init__(api, 0, SecretStr(""))
        self._token = token if isinstance(token, SecretStr) else SecretStr(token)
        self.login = login

    def __repr__(self) -> str:
        return f"TokenAuth(login={self.login!r}, api={self.api.base_url!r})"

    def jwt(self) -> str:
        raise RuntimeError("a token-authenticated client has no App JWT")

    async def installation_token(self, installation_id: int) -> SecretStr:
        return self._token

    def invalidate_token(self, installation_id: int) -> None:
        """A refused token stays refused: there is no other to fetch."""

    async def get_app(self) -> AppInfo:
        return AppInfo(id=0, slug=self.login.removesuffix("[bot]"))

    async def installation_for_repo(self, owner: str, repo: str) -> Installation:
        return Installation(id=ONE_INSTALLATION)
