"""Who sees what on /dashboard, over HTTP against the fake GitHub's sign-in (in process).

Every refusal of a repository's figures is the 404 a missing repository gets: signed out, not
listed by GitHub for the user, a stale session whose access was removed, a forged or expired cookie.
The sign-in is refused with a forged `state`, without the browser's sign-in cookie, and GitHub
refuses a code exchanged without the PKCE verifier it was issued for.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from pydantic import SecretStr
from sqlalchemy import select, update

from bot.app.dashboard.sessions import FORM_COOKIE, SESSION_COOKIE, SIGNIN_COOKIE, CookieSealer
from bot.app.dashboard.signin import challenge
from bot.app.jobs.schema import dashboard_sessions
from tests.support.dashboard_env import CLIENT_ID, CLIENT_SECRET, OPERATOR_TOKEN, OTHER, REPO, SECRET, Env
from tests.support.fake_github import FakeGitHub
from tests.support.web_app import registered_settings, running_app, store_of

pytestmark = pytest.mark.anyio


async def test_a_maintainer_signs_in_and_sees_their_repository_only(env: Env) -> None:
    done = await env.sign_in()
    assert done.status_code == 303 and done.headers["location"] == "/dashboard"
    home = await env.client.get("/dashboard")
    assert home.status_code == 200
    assert REPO in home.text and OTHER not in home.text
    assert "operator view" not in home.text
    page = await env.client.get(f"/dashboard/repos/{REPO}?days=7")
    assert page.status_code == 200
    assert "BEM-380" in page.text and "<svg" in page.text
    refused = await env.client.get(f"/dashboard/repos/{OTHER}?days=7")
    missing = await env.client.get("/dashboard/repos/octo-org/no-such-repo?days=7")
    assert refused.status_code == missing.status_code == 404
    assert refused.text == missing.text
    assert (await env.client.get(f"/dashboard/repos/{OTHER}/export/runs.csv")).status_code == 404
    assert (await env.client.get("/dashboard/installation")).status_code == 404


async def test_signed_out_and_forged_or_expired_cookies_see_nothing(env: Env) -> None:
    assert (await env.client.get(f"/dashboard/repos/{REPO}")).status_code == 404
    assert (await env.client.get(f"/dashboard/repos/{REPO}/export/runs.json")).status_code == 404
    home = await env.client.get("/dashboard")
    assert home.status_code == 200 and 'href="/dashboard/login"' in home.text

    # A cookie sealed with another key (a forger's) and one whose bytes were changed.
    forger = CookieSealer([b"not-the-server-key"])
    forged = forger.seal_session_id("a-session-id-of-mallorys-choosing", time.time())
    env.client.cookies.set(SESSION_COOKIE, forged, domain="beam.test", path="/dashboard")
    assert (await env.client.get(f"/dashboard/repos/{REPO}")).status_code == 404
    assert (await env.client.get("/dashboard/installation")).status_code == 404

    await env.sign_in()
    genuine = env.client.cookies.get(SESSION_COOKIE, path="/dashboard")
    assert genuine is not None
    flipped = genuine[:-6] + ("A" if genuine[-6] != "A" else "B") + genuine[-5:]
    env.client.cookies.set(SESSION_COOKIE, flipped, domain="beam.test", path="/dashboard")
    assert (await env.client.get(f"/dashboard/repos/{REPO}")).status_code == 404

    # The genuine cookie, nine hours later: past its lifetime.
    env.client.cookies.set(SESSION_COOKIE, genuine, domain="beam.test", path="/dashboard")
    assert (await env.client.get(f"/dashboard/repos/{REPO}")).status_code == 200
    env.dashboard.access.clock = lambda: time.time() + 9 * 3600
    assert (await env.client.get(f"/dashboard/repos/{REPO}")).status_code == 404


async def test_a_stale_check_is_redone_and_removed_access_is_refused(env: Env) -> None:
    await env.sign_in()
    listing = "apps/list-installations-for-authenticated-user"
    asked = len(env.fake.calls_to(listing))
    assert (await env.client.get(f"/dashboard/repos/{REPO}")).status_code == 200
    assert len(env.fake.calls_to(listing)) == asked  # fresh: GitHub is not asked again

    del env.fake.repo(REPO).collaborators["maintainer"]  # the maintainer loses access on GitHub
    assert (await env.client.get(f"/dashboard/repos/{REPO}")).status_code == 200  # within 10 minutes
    env.dashboard.access.clock = lambda: time.time() + 601
    assert (await env.client.get(f"/dashboard/repos/{REPO}")).status_code == 404
    assert len(env.fake.calls_to(listing)) == asked + 1
    # The renewed session says what GitHub said: no repository, checked now.
    home = await env.client.get("/dashboard")
    assert home.status_code == 200 and REPO not in home.text


async def test_a_revoked_token_signs_the_visitor_out(env: Env) -> None:
    await env.sign_in()
    env.fake.oauth.revoke("maintainer")
    env.dashboard.access.clock = lambda: time.time() + 601
    assert (await env.client.get(f"/dashboard/repos/{REPO}")).status_code == 404
    home = await env.client.get("/dashboard")
    assert 'href="/dashboard/login"' in home.text


async def test_the_operator_view(env: Env) -> None:
    # The token's bearer: every repository, the queue, the exports; a wrong token sees nothing.
    bearer = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}
    view = await env.client.get("/dashboard/installation", headers=bearer)
    assert view.status_code == 200
    assert REPO in view.text and OTHER in view.text and "queue" in view.text
    assert (await env.client.get(f"/dashboard/repos/{OTHER}", headers=bearer)).status_code == 200
    exported = await env.client.get("/dashboard/installation/export/repositories.csv?days=90", headers=bearer)
    assert exported.status_code == 200 and OTHER in exported.text
    wrong = {"Authorization": "Bearer operator-token-0123456788"}
    assert (await env.client.get("/dashboard/installation", headers=wrong)).status_code == 404

    # An admin of the App's owner organisation signs in as an operator; a member is not one.
    await env.sign_in("boss")
    home = await env.client.get("/dashboard")
    assert 'href="/dashboard/installation"' in home.text
    assert (await env.client.get("/dashboard/installation")).status_code == 200
    assert (await env.client.get(f"/dashboard/repos/{REPO}")).status_code == 200
    await env.client.post("/dashboard/logout")
    env.fake.oauth.org_roles[("beam-org", "boss")] = "member"
    await env.sign_in("boss")
    assert (await env.client.get("/dashboard/installation")).status_code == 404


async def test_cookie_flags(env: Env) -> None:
    start = await env.client.get("/dashboard/login")
    _assert_flags(start.headers["set-cookie"], SIGNIN_COOKIE, secure=False)
    query = parse_qs(urlsplit(start.headers["location"]).query)
    assert query["code_challenge_method"] == ["S256"] and len(query["code_challenge"][0]) == 43
    assert query["redirect_uri"] == ["http://beam.test/dashboard/callback"]
    granted = await env.web.post(
        "/fake-web/authorize", data={k: v[0] for k, v in query.items()} | {"login": "maintainer"}
    )
    done = await env.client.get(f"/dashboard/callback?{urlsplit(granted.headers['location']).query}")
    cookies = done.headers.get_list("set-cookie")
    [session] = [c for c in cookies if c.startswith(f"{SESSION_COOKIE}=")]
    _assert_flags(session, SESSION_COOKIE, secure=False)
    assert "ghu_" not in session  # the user's token is sealed, not only signed
    signed_out = await env.client.post("/dashboard/logout")
    assert signed_out.status_code == 303
    assert any(
        c.startswith(f'{SESSION_COOKIE}=""') or "Max-Age=0" in c
        for c in signed_out.headers.get_list("set-cookie")
    )
    assert (await env.client.get(f"/dashboard/repos/{REPO}")).status_code == 404


async def test_secure_cookies_behind_tls(env: Env, tmp_path: Path) -> None:
    env.dashboard.resources.settings = env.dashboard.settings.model_copy(
        update={"public_url": "https://beam.example"}
    )
    start = await env.client.get("/dashboard/login")
    _assert_flags(start.headers["set-cookie"], SIGNIN_COOKIE, secure=True)
    assert "redirect_uri=https%3A%2F%2Fbeam.example%2Fdashboard%2Fcallback" in start.headers["location"]


def _assert_flags(header: str, name: str, *, secure: bool) -> None:
    parts = [p.strip().lower() for p in header.split(";")]
    assert parts[0].startswith(f"{name}=")
    assert "httponly" in parts and "samesite=lax" in parts and "path=/dashboard" in parts
    assert ("secure" in parts) is secure


async def test_a_forged_state_is_refused(env: Env) -> None:
    start = await env.client.get("/dashboard/login")
    query = {k: v[0] for k, v in parse_qs(urlsplit(start.headers["location"]).query).items()}
    granted = await env.web.post(
        "/fake-web/authorize", data={**query, "state": "forged-state", "login": "maintainer"}
    )
    back = await env.client.get(f"/dashboard/callback?{urlsplit(granted.headers['location']).query}")
    assert back.status_code == 400 and "state" in back.text
    assert env.fake.calls_to("users/get-authenticated") == []
    assert SESSION_COOKIE not in env.client.cookies


async def test_a_callback_without_the_browsers_signin_cookie_is_refused(env: Env) -> None:
    # A login CSRF: the attacker's own code and state, sent to the victim's browser.
    start = await env.client.get("/dashboard/login")
    query = {k: v[0] for k, v in parse_qs(urlsplit(start.headers["location"]).query).items()}
    granted = await env.web.post("/fake-web/authorize", data={**query, "login": "mallory"})
    env.client.cookies.clear()
    back = await env.client.get(f"/dashboard/callback?{urlsplit(granted.headers['location']).query}")
    assert back.status_code == 400
    assert env.fake.calls_to("users/get-authenticated") == []


async def test_github_refuses_a_code_without_its_pkce_verifier(env: Env) -> None:
    verifier = "v" * 50
    grant: dict[str, Any] = {
        "client_id": CLIENT_ID,
        "redirect_uri": "http://beam.test/dashboard/callback",
        "state": "s",
        "code_challenge": challenge(verifier),
        "code_challenge_method": "S256",
        "login": "maintainer",
    }
    code = parse_qs(
        urlsplit((await env.web.post("/fake-web/authorize", data=grant)).headers["location"]).query
    )["code"][0]
    wrong = await env.web.post(
        "/login/oauth/access_token",
        data={
            "client_id": CLIENT_ID,
            "client_secret": CLIENT_SECRET,
            "code": code,
            "code_verifier": "w" * 50,
        },
        headers={"Accept": "application/json"},
    )
    assert wrong.json()["error"] == "bad_verification_code"
    # The bot's own exchanges carry the verifier that matches: none was refused.
    await env.sign_in()
    assert env.fake.oauth.refused == ["bad_verification_code"]


async def test_without_a_client_secret_the_page_says_what_to_set(tmp_path: Path) -> None:
    settings = registered_settings(tmp_path, SECRET, github_api_url="http://github.test", metrics_token=None)
    async with running_app(settings, github_transport=FakeGitHub().transport()) as (_, client):
        home = await client.get("/dashboard")
        assert home.status_code == 200 and "BEAM_CLIENT_SECRET" in home.text
        assert "Sign in with GitHub" not in home.text
        assert (await client.get("/dashboard/login")).status_code == 200
        assert (await client.get(f"/dashboard/repos/{REPO}")).status_code == 404


async def test_the_owner_of_an_app_on_a_personal_account_is_an_operator(env: Env) -> None:
    env.fake.users[env.fake.app_owner.lower()].type = "User"
    await env.sign_in(env.fake.app_owner)
    assert (await env.client.get("/dashboard/installation")).status_code == 200
    await env.client.post("/dashboard/logout")
    await env.sign_in("maintainer")
    assert (await env.client.get("/dashboard/installation")).status_code == 404


# --- sessions kept on the server ---------------------------------------------------------------------


async def test_a_user_who_reads_500_repositories_keeps_a_small_cookie(env: Env) -> None:
    many = [f"octo-org/repo-{n:03d}" for n in range(500)]
    for name in many:
        env.fake.add_repo(name, installation_id=1, private=True)
        env.fake.add_collaborator(name, "maintainer", "read")
    done = await env.sign_in()
    [cookie] = [c for c in done.headers.get_list("set-cookie") if c.startswith(f"{SESSION_COOKIE}=")]
    assert len(cookie) < 400  # the 501 names (about 11 KB) stay on the server
    home = await env.client.get("/dashboard")
    assert home.status_code == 200 and home.text.count('href="/dashboard/repos/octo-org/repo-') == 500
    assert (await env.client.get("/dashboard/repos/octo-org/repo-499?days=7")).status_code == 200
    async with store_of(env.app).read() as conn:
        [row] = (await conn.execute(select(dashboard_sessions))).all()
    assert len(row.repos) == 501 and "ghu_" not in row.token  # the user token is sealed there too


async def test_a_signed_out_or_expired_session_is_refused_with_its_cookie(env: Env) -> None:
    await env.sign_in()
    cookie = env.client.cookies.get(SESSION_COOKIE, path="/dashboard")
    assert cookie is not None
    await env.client.post("/dashboard/logout")
    async with store_of(env.app).read() as conn:
        assert (await conn.execute(select(dashboard_sessions))).all() == []
    # The old cookie, replayed: still sealed by the server and within its age, but its session is gone.
    env.client.cookies.set(SESSION_COOKIE, cookie, domain="beam.test", path="/dashboard")
    assert (await env.client.get(f"/dashboard/repos/{REPO}")).status_code == 404

    await env.sign_in()
    assert (await env.client.get(f"/dashboard/repos/{REPO}")).status_code == 200
    async with store_of(env.app).write() as conn:  # the server's clock says it expired
        await conn.execute(update(dashboard_sessions).values(expires_at=time.time() - 1))
    assert (await env.client.get(f"/dashboard/repos/{REPO}")).status_code == 404
    await env.sign_in("boss")  # a new sign-in clears the expired row away
    async with store_of(env.app).read() as conn:
        assert [r.login for r in (await conn.execute(select(dashboard_sessions))).all()] == ["boss"]


# --- the operator's token form -------------------------------------------------------------------------


async def _token_form(env: Env) -> str:
    page = await env.client.get("/dashboard")
    assert page.status_code == 200 and 'id="token-form"' in page.text
    assert env.client.cookies.get(FORM_COOKIE, path="/dashboard") is not None
    return _nonce(page)


def _nonce(page: httpx.Response) -> str:
    """The form's nonce: each page showing the form has a new one (and a new cookie with it)."""
    found = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert found is not None
    return found.group(1)


async def test_the_operator_signs_in_with_the_token_through_the_form(env: Env) -> None:
    csrf = await _token_form(env)
    done = await env.client.post("/dashboard/token", data={"csrf": csrf, "token": OPERATOR_TOKEN})
    assert done.status_code == 303 and done.headers["location"] == "/dashboard/installation"
    view = await env.client.get("/dashboard/installation?days=90")
    assert view.status_code == 200 and REPO in view.text and OTHER in view.text
    assert "operator (token)" in view.text
    assert (await env.client.get(f"/dashboard/repos/{OTHER}")).status_code == 200
    assert (await env.client.get("/dashboard")).headers["location"] == "/dashboard/installation"
    # Ten minutes on, the session is checked against the token configured now: changed, it ends.
    env.dashboard.access.clock = lambda: time.time() + 601
    assert (await env.client.get("/dashboard/installation")).status_code == 200
    env.dashboard.resources.settings = env.dashboard.settings.model_copy(
        update={"dashboard_token": SecretStr("a-new-operator-token-9876543210")}
    )
    env.dashboard.access.clock = lambda: time.time() + 1300
    assert (await env.client.get("/dashboard/installation")).status_code == 404


async def test_a_wrong_token_gets_401_and_no_session(env: Env) -> None:
    csrf = await _token_form(env)
    wrong = await env.client.post("/dashboard/token", data={"csrf": csrf, "token": OPERATOR_TOKEN + "x"})
    assert wrong.status_code == 401 and "not the operator token" in wrong.text
    assert not any(c.startswith(f"{SESSION_COOKIE}=") for c in wrong.headers.get_list("set-cookie"))
    assert (await env.client.get("/dashboard/installation")).status_code == 404
    async with store_of(env.app).read() as conn:
        assert (await conn.execute(select(dashboard_sessions))).all() == []


async def test_the_form_needs_its_csrf_cookie_and_nonce(env: Env) -> None:
    csrf = await _token_form(env)
    other = await env.client.post("/dashboard/token", data={"csrf": "guessed", "token": OPERATOR_TOKEN})
    assert other.status_code == 403
    env.client.cookies.delete(FORM_COOKIE, domain="beam.test", path="/dashboard")  # a post from elsewhere
    bare = await env.client.post("/dashboard/token", data={"csrf": csrf, "token": OPERATOR_TOKEN})
    assert bare.status_code == 403
    assert (await env.client.post("/dashboard/token", content=b"{}")).status_code == 400
    assert (await env.client.get("/dashboard/installation")).status_code == 404


async def test_wrong_tokens_are_throttled(env: Env) -> None:
    csrf = await _token_form(env)
    for n in range(5):
        wrong = await env.client.post("/dashboard/token", data={"csrf": csrf, "token": f"guess-{n}"})
        assert wrong.status_code == 401
        csrf = _nonce(wrong)
    stopped = await env.client.post("/dashboard/token", data={"csrf": csrf, "token": OPERATOR_TOKEN})
    assert stopped.status_code == 429 and "Too many wrong tokens" in stopped.text
    env.dashboard.access.clock = lambda: time.time() + 601  # the window passes
    csrf = await _token_form(env)
    done = await env.client.post("/dashboard/token", data={"csrf": csrf, "token": OPERATOR_TOKEN})
    assert done.status_code == 303
