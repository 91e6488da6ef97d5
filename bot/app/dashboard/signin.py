""" "Sign in with GitHub" for the dashboard: the App's user-authorization flow, and what GitHub says the
user may read.

The flow is GitHub's web application flow for a GitHub App, with `state` and PKCE (S256): the
browser goes to `<web>/login/oauth/authorize`, comes back with a code, and the server exchanges it
with the App's client id and secret and the PKCE verifier for a user token. That token can only do
what both the App and the user can (GitHub intersects them), so the repositories GitHub lists for it
under the App's installations are exactly the ones the user can read and the App serves.
See https://docs.github.com/apps/creating-github-apps/authenticating-with-a-github-app/generating-a-user-access-token-for-a-github-app

The operator view needs admin on the App's owner account: for an organisation, the user's active
membership there with the `admin` role; for a personal account, being that account.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import httpx

from bot.app.dashboard.sessions import SignIn
from bot.app.github.api import GitHubApi, GitHubError
from bot.app.github.auth import GitHubApp

MAX_INSTALLATIONS = 100
MAX_REPOS = 1000


class SignInError(Exception):
    """The flow failed: GitHub refused the code, or could not be reached. The message is for the page."""


@dataclass(frozen=True, slots=True)
class OAuthClient:
    client_id: str
    client_secret: str = ""

    def __repr__(self) -> str:
        return f"OAuthClient(client_id={self.client_id!r})"


def new_signin(back_to: str = "/dashboard") -> SignIn:
    """A fresh state and PKCE verifier (43 to 128 characters, RFC 7636), kept in a sealed cookie."""
    return SignIn(secrets.token_urlsafe(24), secrets.token_urlsafe(48), back_to)


def challenge(verifier: str) -> str:
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).decode("ascii").rstrip("=")


def authorize_url(web_url: str, client: OAuthClient, redirect_uri: str, signin: SignIn) -> str:
    query = urlencode(
        {
            "client_id": client.client_id,
            "redirect_uri": redirect_uri,
            "state": signin.state,
            "code_challenge": challenge(signin.verifier),
            "code_challenge_method": "S256",
            "allow_signup": "false",
        }
    )
    return f"{web_url}/login/oauth/authorize?{query}"


async def exchange_code(
    http: httpx.AsyncClient, web_url: str, client: OAuthClient, code: str, verifier: str, redirect_uri: str
) -> str:
    """The user token for `code`; SignInError when GitHub refuses (it answers 200 with `error`)."""
    try:
        response = await http.post(
            f"{web_url}/login/oauth/access_token",
            data={
                "client_id": client.client_id,
                "client_secret": client.client_secret,
                "code": code,
                "code_verifier": verifier,
                "redirect_uri": redirect_uri,
            },
            headers={"Accept": "application/json"},
        )
    except httpx.HTTPError as exc:
        raise SignInError(f"GitHub could not be reached ({type(exc).__name__}).") from None
    try:
        body: Any = response.json()
    except ValueError:
        body = None
    if response.status_code != 200 or not isinstance(body, dict):
        raise SignInError(f"GitHub answered HTTP {response.status_code} to the sign-in.")
    token = body.get("access_token")
    if not isinstance(token, str) or not token:
        raise SignInError(f"GitHub refused the sign-in ({body.get('error') or 'no token'}).")
    return token


async def user_login(api: GitHubApi, token: str) -> str:
    login = (await api.request("GET", "/user", oauth_token=token)).data.get("login")
    if not isinstance(login, str) or not login:
        raise SignInError("GitHub did not say who signed in.")
    return login


async def readable_repos(api: GitHubApi, token: str) -> tuple[str, ...]:
    """Full names of every repository the user can read among the App's installations."""
    names: list[str] = []
    for installation in await _listing(api, "/user/installations", "installations", token, MAX_INSTALLATIONS):
        url = "/user/installations/{installation_id}/repositories"
        vars_ = {"installation_id": str(installation["id"])}
        for repo in await _listing(api, url, "repositories", token, MAX_REPOS, vars_):
            if isinstance(repo.get("full_name"), str):
                names.append(repo["full_name"])
    return tuple(sorted(set(names), key=str.lower))


async def is_owner_admin(api: GitHubApi, app: GitHubApp, token: str, login: str) -> bool:
    """Admin on the App's owner account: an active `admin` member of the organisation, or its user."""
    owner = (await app.get_app()).owner
    if owner is None:
        return False
    if owner.type != "Organization":
        return owner.login.lower() == login.lower()
    try:
        answer = await api.request(
            "GET", "/user/memberships/orgs/{org}", {"org": owner.login}, oauth_token=token
        )
    except GitHubError as error:
        if error.status in (403, 404):
            return False
        raise
    data = answer.data
    return isinstance(data, dict) and data.get("state") == "active" and data.get("role") == "admin"


async def _listing(
    api: GitHubApi, url: str, key: str, token: str, limit: int, url_vars: dict[str, str] | None = None
) -> list[dict[str, Any]]:
    """A listing whose pages wrap their items under `key` (`{"total_count": n, key: [...]}`)."""
    items: list[dict[str, Any]] = []
    next_url: str | None = url + ("&" if "?" in url else "?") + "per_page=100"
    first = True
    while next_url is not None and len(items) < limit:
        answer = await api.request("GET", next_url, url_vars if first else None, oauth_token=token)
        first = False
        page = answer.data.get(key) if isinstance(answer.data, dict) else None
        items += [item for item in page or [] if isinstance(item, dict)]
        next_url = answer.next_url
    return items[:limit]
