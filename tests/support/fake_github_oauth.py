"""GitHub's user-authorization flow for a GitHub App, in the fake: the web pages and the user's API.

The web side (mounted by fake_github_web.py): `GET /login/oauth/authorize` shows an "Authorize"
page for the user signed in on the fake's github.com (`OAuthState.signed_in`, changeable by a form
field, as switching accounts is); its button redirects to `redirect_uri?code=...&state=...`.
`POST /login/oauth/access_token` exchanges the code once, checking the client id and secret, the
redirect URI and the PKCE verifier (S256) as GitHub does, and answers with a user token (`ghu_...`).
GitHub answers a bad exchange with HTTP 200 and an `error` field, so the fake does too.

The API side (registered handlers): `GET /user`, `GET /user/installations`,
`GET /user/installations/{id}/repositories` (the repositories the user can read in that
installation: a collaborator of any permission, or the owner) and `GET /user/memberships/orgs/{org}`.
See https://docs.github.com/apps/creating-github-apps/authenticating-with-a-github-app/generating-a-user-access-token-for-a-github-app
"""

from __future__ import annotations

import base64
import hashlib
import html
import secrets
from typing import Any
from urllib.parse import parse_qsl, urlencode

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from tests.support.fake_github_handlers import Answer, Ctx, FakeHandlers, Reply, operation, paginate
from tests.support.fake_github_state import Grant, Repo

USER_OPERATIONS = frozenset(
    {
        "users/get-authenticated",
        "apps/list-installations-for-authenticated-user",
        "apps/list-installation-repos-for-authenticated-user",
        "orgs/get-membership-for-authenticated-user",
    }
)


def s256(verifier: str) -> str:
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).decode("ascii").rstrip("=")


def readable_repos(fake: FakeHandlers, login: str, installation_id: int) -> list[Repo]:
    """What GitHub lists for the user in an installation: repositories they have a permission on."""
    key = login.lower()
    return [
        repo
        for repo in fake.repos.values()
        if repo.installation_id == installation_id
        and (repo.owner.lower() == key or repo.collaborators.get(key, "none") != "none")
    ]


# --- the web pages ------------------------------------------------------------------------------


async def authorize_page(fake: FakeHandlers, request: Request) -> Response:
    query = request.query_params
    client_id = query.get("client_id", "")
    if client_id not in fake.oauth.clients:
        return HTMLResponse("<h1>404: this application does not exist</h1>", status_code=404)
    fields = {
        key: query.get(key, "")
        for key in ("client_id", "redirect_uri", "state", "code_challenge", "code_challenge_method")
    }
    hidden = "".join(f'<input type="hidden" name="{k}" value="{html.escape(v)}">' for k, v in fields.items())
    return HTMLResponse(
        f"""<!doctype html><title>Authorize application</title>
<h1>Authorize beam-bot</h1>
<form action="/fake-web/authorize" method="post">{hidden}
<label>Signed in as <input name="login" value="{html.escape(fake.oauth.signed_in)}"></label>
<button type="submit">Authorize</button></form>"""
    )


async def authorize(fake: FakeHandlers, request: Request) -> Response:
    form = dict(parse_qsl((await request.body()).decode("utf-8"), keep_blank_values=True))
    login = form.get("login") or fake.oauth.signed_in
    fake.add_user(login)
    code = secrets.token_hex(10)
    fake.oauth.grants[code] = Grant(
        login,
        form["client_id"],
        form["redirect_uri"],
        form.get("code_challenge") or None,
        form.get("code_challenge_method") or None,
    )
    fake.oauth.authorized.append(login)
    query = urlencode({"code": code, "state": form.get("state", "")})
    return RedirectResponse(f"{form['redirect_uri']}?{query}", status_code=302)


async def access_token(fake: FakeHandlers, request: Request) -> Response:
    form = dict(parse_qsl((await request.body()).decode("utf-8"), keep_blank_values=True))
    grant = fake.oauth.grants.pop(form.get("code", ""), None)  # a code exchanges once
    problem = None
    if grant is None:
        problem = "bad_verification_code"
    elif fake.oauth.clients.get(form.get("client_id", "")) != form.get("client_secret"):
        problem = "incorrect_client_credentials"
    elif grant.client_id != form.get("client_id"):
        problem = "bad_verification_code"
    elif form.get("redirect_uri") and form["redirect_uri"] != grant.redirect_uri:
        problem = "redirect_uri_mismatch"
    elif grant.challenge is not None and (
        grant.method != "S256" or s256(form.get("code_verifier", "")) != grant.challenge
    ):
        problem = "bad_verification_code"
    if problem is not None or grant is None:
        fake.oauth.refused.append(problem or "bad_verification_code")
        return JSONResponse({"error": problem, "error_description": problem})
    body: dict[str, Any] = {
        "access_token": fake.oauth.mint(grant.login),
        "token_type": "bearer",
        "scope": "",
    }
    if "application/json" in request.headers.get("accept", ""):
        return JSONResponse(body)
    return Response(urlencode(body), media_type="application/x-www-form-urlencoded")


# --- the user's API -----------------------------------------------------------------------------


@operation("users/get-authenticated")
def get_user(fake: FakeHandlers, ctx: Ctx) -> Reply:
    assert ctx.user is not None
    out = ctx.render.user(ctx.user)
    out.update(name=None, company=None, blog="", location=None, email=None, hireable=None, bio=None)
    out.update(public_repos=0, public_gists=0, followers=0, following=0)
    out.update(created_at="2011-01-25T18:44:36Z", updated_at="2011-01-25T18:44:36Z")
    return Reply(200, out)


@operation("apps/list-installations-for-authenticated-user")
def list_installations(fake: FakeHandlers, ctx: Ctx) -> Reply:
    assert ctx.user is not None
    login = ctx.user
    found = [
        ctx.render.installation(installation, fake.app_id, fake.app_slug)
        for installation in fake.installations.values()
        if readable_repos(fake, login, installation.id)
        or (installation.account, login) in fake.oauth.org_roles
    ]
    page = paginate(ctx, found)
    return Reply(200, {"total_count": len(found), "installations": page.body}, page.headers)


@operation("apps/list-installation-repos-for-authenticated-user")
def list_installation_repos(fake: FakeHandlers, ctx: Ctx) -> Reply:
    assert ctx.user is not None
    if ctx.params["installation_id"] not in fake.installations:
        raise Answer(404, "Not Found")
    repos = [ctx.render.repo(repo) for repo in readable_repos(fake, ctx.user, ctx.params["installation_id"])]
    page = paginate(ctx, repos)
    return Reply(200, {"total_count": len(repos), "repositories": page.body}, page.headers)


@operation("orgs/get-membership-for-authenticated-user")
def get_membership(fake: FakeHandlers, ctx: Ctx) -> Reply:
    assert ctx.user is not None
    org = ctx.params["org"]
    role = fake.oauth.org_roles.get((org, ctx.user))
    if role is None:
        raise Answer(404, "Not Found")
    return Reply(
        200,
        {
            "url": f"{ctx.render.urls.api}/orgs/{org}/memberships/{ctx.user}",
            "state": "active",
            "role": role,
            "organization_url": f"{ctx.render.urls.api}/orgs/{org}",
            "organization": _org(ctx, org),
            "user": ctx.render.user(ctx.user),
        },
    )


def _org(ctx: Ctx, org: str) -> dict[str, Any]:
    api = f"{ctx.render.urls.api}/orgs/{org}"
    return {
        "login": org,
        "id": 1,
        "node_id": "MDEyOk9yZ2FuaXphdGlvbjE=",
        "url": api,
        "repos_url": f"{api}/repos",
        "events_url": f"{api}/events",
        "hooks_url": f"{api}/hooks",
        "issues_url": f"{api}/issues",
        "members_url": f"{api}/members{{/member}}",
        "public_members_url": f"{api}/public_members{{/member}}",
        "avatar_url": "https://avatars.githubusercontent.com/u/1?v=4",
        "description": None,
    }
