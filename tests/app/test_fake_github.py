"""The fake GitHub itself: its OpenAPI validation is real, its answers match GitHub's schemas, its
credentials, ETags, faults and pagination behave as the client tests assume, and webhook signing
matches GitHub's documented example."""

from __future__ import annotations

import base64
import hmac
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import jwt
import pytest

from tests.support.fake_github import FakeGitHub, generate_app_key, serve_fake_github
from tests.support.fake_github_auth import app_jwt_at
from tests.support.fake_github_handlers import diff_lines
from tests.support.fake_github_spec import RestSpec
from tests.support.fake_github_state import PullFile
from tests.support.webhooks import (
    delivery,
    event_of,
    example_delivery,
    issue_comment_payload,
    load_payload,
    payload_names,
    raw_payload,
    review_comment_payload,
    sign,
)

REPO = "octo-org/hello-world"
PATCH = "@@ -1,3 +1,4 @@\n line one\n-line two\n+line 2\n+line 2b\n line three"


def seeded() -> FakeGitHub:
    fake = FakeGitHub()
    fake.add_repo(REPO, installation_id=11)
    fake.add_pull(REPO, number=7, files=[PullFile("docs/a.md", patch=PATCH), "b.py"], head_sha="a" * 40)
    fake.add_collaborator(REPO, "maintainer", "maintain")
    fake.set_file(REPO, "main", ".github/beam.yml", "skills: [review]\n")
    return fake


@pytest.fixture
async def gh() -> AsyncIterator[tuple[FakeGitHub, httpx.AsyncClient, dict[str, str]]]:
    fake = seeded()
    async with httpx.AsyncClient(transport=fake.transport(), base_url="http://gh.test") as client:
        jwt_auth = {"Authorization": f"Bearer {app_jwt_at(fake.app_id, fake.key.private_pem, time.time())}"}
        token = (await client.post("/app/installations/11/access_tokens", headers=jwt_auth)).json()["token"]
        yield fake, client, {"Authorization": f"token {token}"}


# --- webhooks ------------------------------------------------------------------------------------


def test_signature_matches_githubs_documented_example() -> None:
    # https://docs.github.com/webhooks/using-webhooks/validating-webhook-deliveries#testing-the-webhook-payload-validation
    expected = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
    assert sign(b"Hello, World!", "It's a Secret to Everybody") == expected
    assert sign(b"Hello, World!", "another secret") != expected


def test_example_deliveries_are_signed_over_the_exact_bytes() -> None:
    names = payload_names()
    assert len(names) == 18
    for name in names:
        sent = example_delivery(name, "s3cret")
        assert sent.body == raw_payload(name)
        assert sent.headers["X-GitHub-Event"] == event_of(name) == name.split(".")[0]
        assert hmac.compare_digest(sent.headers["X-Hub-Signature-256"], sign(sent.body, "s3cret"))
    first, second = example_delivery("ping.json", None), example_delivery("ping.json", None)
    assert "X-Hub-Signature-256" not in first.headers
    assert first.delivery_id != second.delivery_id


def test_payload_builders_change_only_what_they_are_told() -> None:
    payload = issue_comment_payload("/beam review", repo="acme/widget", number=12, commenter="bob")
    original = load_payload("issue_comment.created.pull_request.json")
    assert payload["comment"]["body"] == "/beam review"
    assert payload["repository"]["full_name"] == "acme/widget"
    assert payload["repository"]["owner"]["login"] == "acme"
    assert payload["issue"]["number"] == 12 and "pull_request" in payload["issue"]
    assert payload["sender"]["login"] == payload["comment"]["user"]["login"] == "bob"
    assert payload["installation"]["id"] == 1 and "installation" not in original
    assert set(payload["comment"]) == set(original["comment"])
    plain = issue_comment_payload("hi", on_pull_request=False, action="edited", commenter_type="Bot")
    assert "pull_request" not in plain["issue"] and plain["changes"]["body"]["from"]
    assert plain["sender"]["type"] == "Bot"
    review = review_comment_payload("/beam explain", path="src/x.py", line=9)
    assert (review["comment"]["path"], review["comment"]["line"]) == ("src/x.py", 9)
    sent = delivery("issue_comment", payload, "k")
    assert sent.json() == payload and sent.headers["X-Hub-Signature-256"] == sign(sent.body, "k")


# --- validation is real --------------------------------------------------------------------------


@pytest.mark.anyio
async def test_invalid_request_body_is_refused_and_recorded(
    gh: tuple[FakeGitHub, httpx.AsyncClient, dict[str, str]],
) -> None:
    fake, client, auth = gh
    bad = await client.post(f"/repos/{REPO}/issues/7/comments", json={"body": 5}, headers=auth)
    assert bad.status_code == 422
    assert fake.violations[-1].problems == ["body['body']: 5 is not of type 'string'"]
    missing = await client.post(f"/repos/{REPO}/pulls", json={"title": "t", "head": "x"}, headers=auth)
    assert missing.status_code == 422 and "'base' is a required property" in missing.text
    reaction = await client.post(
        f"/repos/{REPO}/issues/comments/1/reactions", json={"content": "tada"}, headers=auth
    )
    assert reaction.status_code == 422
    review = await client.post(
        f"/repos/{REPO}/pulls/7/reviews", json={"event": "LGTM", "comments": [{"path": 1}]}, headers=auth
    )
    assert review.status_code == 422 and len(fake.violations[-1].problems) == 3  # path, body, event
    assert len(fake.violations) == 4
    assert fake.comments == {} and fake.reviews == {}
    with pytest.raises(AssertionError, match="GitHub would refuse"):
        fake.assert_no_violations()


@pytest.mark.anyio
async def test_unknown_route_method_and_parameters_are_refused(
    gh: tuple[FakeGitHub, httpx.AsyncClient, dict[str, str]],
) -> None:
    fake, client, auth = gh
    assert (await client.get(f"/repos/{REPO}/pulls/7/commits", headers=auth)).status_code == 404
    assert (await client.delete(f"/repos/{REPO}", headers=auth)).status_code == 404
    assert (await client.get(f"/repos/{REPO}/pulls/seven", headers=auth)).status_code == 422
    assert (await client.get(f"/repos/{REPO}/pulls/7/files?per_page=x", headers=auth)).status_code == 422
    assert (await client.get(f"/repos/{REPO}/pulls/7/files?sort=asc", headers=auth)).status_code == 422
    versioned = await client.get(f"/repos/{REPO}", headers={**auth, "X-GitHub-Api-Version": "2019-01-01"})
    assert versioned.status_code == 422
    assert [v.problems[0].split(" ")[0] for v in fake.violations] == [
        "unknown", "method", "path", "query", "unknown", "unsupported",
    ]  # fmt: skip
    fake.violations.clear()


def test_spec_resolves_every_operation_the_bot_calls() -> None:
    spec = RestSpec.load()
    assert len(spec.operations) == 35  # issue 44 added the four user operations of the dashboard's sign-in
    checked = spec.check_request("GET", "/repos/o/r/contents/.github/beam.yml", [("ref", "main")], b"")
    assert checked.operation is not None and checked.operation.operation_id == "repos/get-content"
    assert checked.path_params["path"] == ".github/beam.yml" and checked.problems == []
    encoded = spec.check_request("GET", "/repos/o/r/contents/.github%2Fbeam.yml", [], b"")
    assert encoded.path_params["path"] == ".github/beam.yml"
    nullable = spec.check_request(
        "POST", "/repos/o/r/pulls", [], b'{"title":"t","head":"h","base":"b","body":"x"}'
    )
    assert nullable.problems == []
    not_json = spec.check_request("PATCH", "/repos/o/r/issues/comments/1", [], b"{body")
    assert not_json.problems == ["request body is not JSON"]
    # GitHub's own POST check-runs (not Octokit's older override): completed needs a conclusion.
    check = b'{"name":"beam / review","head_sha":"abc","status":"completed"}'
    assert spec.check_request("POST", "/repos/o/r/check-runs", [], check).problems != []
    queued = b'{"name":"beam / review","head_sha":"abc","status":"queued"}'
    assert spec.check_request("POST", "/repos/o/r/check-runs", [], queued).problems == []


# --- answers look like GitHub's ------------------------------------------------------------------


@pytest.mark.anyio
async def test_every_answer_validates_against_githubs_response_schemas(
    gh: tuple[FakeGitHub, httpx.AsyncClient, dict[str, str]],
) -> None:
    fake, client, auth = gh
    spec = RestSpec.load()
    fake.register_manifest_code("abc", app_id=9, slug="beam-new", pem=generate_app_key().private_pem)
    review_comment = fake.add_review_comment(REPO, 7, "why?", path="docs/a.md", line=2)
    jwt_auth = {"Authorization": f"Bearer {app_jwt_at(fake.app_id, fake.key.private_pem, time.time())}"}
    comment = (
        await client.post(f"/repos/{REPO}/issues/7/comments", json={"body": "hi"}, headers=auth)
    ).json()
    cid = comment["id"]
    inline = [{"path": "docs/a.md", "line": 2, "body": "n"}]
    review = {"commit_id": "a" * 40, "body": "ok", "event": "COMMENT", "comments": inline}
    requests: list[tuple[str, str, Any, dict[str, str]]] = [
        ("GET", "/app", None, jwt_auth),
        ("GET", f"/repos/{REPO}/installation", None, jwt_auth),
        ("POST", "/app-manifests/abc/conversions", None, {}),
        ("GET", f"/repos/{REPO}", None, auth),
        ("GET", f"/repos/{REPO}/collaborators/maintainer/permission", None, auth),
        ("GET", f"/repos/{REPO}/contents/.github/beam.yml", None, auth),
        ("GET", f"/repos/{REPO}/issues/7", None, auth),
        ("GET", f"/repos/{REPO}/issues/7/comments", None, auth),
        ("PATCH", f"/repos/{REPO}/issues/comments/{cid}", {"body": "edited"}, auth),
        ("GET", f"/repos/{REPO}/issues/comments/{cid}", None, auth),
        ("POST", f"/repos/{REPO}/issues/comments/{cid}/reactions", {"content": "eyes"}, auth),
        ("POST", f"/repos/{REPO}/issues/comments/{cid}/reactions", {"content": "eyes"}, auth),
        ("GET", f"/repos/{REPO}/issues/comments/{cid}/reactions", None, auth),
        ("POST", f"/repos/{REPO}/pulls/comments/{review_comment.id}/reactions", {"content": "+1"}, auth),
        ("GET", f"/repos/{REPO}/pulls/7", None, auth),
        ("GET", f"/repos/{REPO}/pulls/7/files", None, auth),
        ("POST", f"/repos/{REPO}/pulls/7/reviews", review, auth),
        ("POST", f"/repos/{REPO}/pulls/7/comments/{review_comment.id}/replies", {"body": "because"}, auth),
        ("POST", f"/repos/{REPO}/pulls", {"title": "t", "head": "beam/x", "base": "feature"}, auth),
    ]
    statuses, problems = [], []
    for method, path, body, headers in requests:
        response = await client.request(method, path, json=body, headers=headers)
        call = fake.calls[-1]
        operation = spec.check_request(method, path, [], b"").operation
        assert operation is not None and call.operation_id == operation.operation_id
        problems += [
            f"{path}: {p}" for p in spec.check_response(operation, response.status_code, response.json())
        ]
        statuses.append(response.status_code)
    assert problems == [], "\n".join(problems)
    assert statuses == [
        200,
        200,
        201,
        200,
        200,
        200,
        200,
        200,
        200,
        200,
        201,
        200,
        200,
        201,
        200,
        200,
        200,
        201,
        201,
    ]
    fake.assert_no_violations()


@pytest.mark.anyio
async def test_state_changes_are_visible(gh: tuple[FakeGitHub, httpx.AsyncClient, dict[str, str]]) -> None:
    fake, client, auth = gh
    made = (await client.post(f"/repos/{REPO}/issues/7/comments", json={"body": "one"}, headers=auth)).json()
    assert made["user"]["login"] == "beam-bot[bot]" and made["user"]["type"] == "Bot"
    assert made["html_url"].endswith(f"/{REPO}/pull/7#issuecomment-{made['id']}")
    await client.patch(f"/repos/{REPO}/issues/comments/{made['id']}", json={"body": "two"}, headers=auth)
    assert [c.body for c in fake.comments_on(REPO, 7)] == ["two"]
    someone = fake.add_comment(REPO, 7, "not yours", user="maintainer")
    refused = await client.patch(
        f"/repos/{REPO}/issues/comments/{someone.id}", json={"body": "x"}, headers=auth
    )
    assert refused.status_code == 403
    content = (await client.get(f"/repos/{REPO}/contents/.github%2Fbeam.yml", headers=auth)).json()
    assert base64.b64decode(content["content"]) == b"skills: [review]\n"
    missing = await client.get(f"/repos/{REPO}/contents/.github/beam.yml?ref=feature", headers=auth)
    assert missing.status_code == 404
    stranger = await client.get(f"/repos/{REPO}/collaborators/nobody/permission", headers=auth)
    assert stranger.status_code == 404
    fake.add_user("reader")
    public_read = (await client.get(f"/repos/{REPO}/collaborators/reader/permission", headers=auth)).json()
    maintain = (await client.get(f"/repos/{REPO}/collaborators/maintainer/permission", headers=auth)).json()
    assert (public_read["permission"], maintain["permission"], maintain["role_name"]) == (
        "read",
        "write",
        "maintain",
    )
    body = {"title": "t", "head": "beam/x", "base": "feature"}
    assert (await client.post(f"/repos/{REPO}/pulls", json=body, headers=auth)).status_code == 201
    again = await client.post(f"/repos/{REPO}/pulls", json=body, headers=auth)
    assert again.status_code == 422 and "already exists" in again.text


@pytest.mark.anyio
async def test_review_lines_must_be_in_the_diff(
    gh: tuple[FakeGitHub, httpx.AsyncClient, dict[str, str]],
) -> None:
    fake, client, auth = gh
    assert diff_lines(PATCH) == ({1, 2, 3}, {1, 2, 3, 4})

    async def review(**inline: Any) -> httpx.Response:
        body = {"commit_id": "a" * 40, "body": "r", "event": "COMMENT", "comments": [{"body": "c", **inline}]}
        return await client.post(f"/repos/{REPO}/pulls/7/reviews", json=body, headers=auth)

    assert (await review(path="docs/a.md", line=3)).status_code == 200
    assert (await review(path="docs/a.md", line=2, side="LEFT")).status_code == 200
    outside = await review(path="docs/a.md", line=40)
    assert outside.status_code == 422 and outside.json()["errors"] == ["Line could not be resolved"]
    assert (await review(path="nope.md", line=1)).status_code == 422
    stale = await client.post(
        f"/repos/{REPO}/pulls/7/reviews", json={"commit_id": "f" * 40, "body": "x"}, headers=auth
    )
    assert stale.status_code == 422
    assert [len(r.comment_ids) for r in fake.reviews_on(REPO, 7)] == [1, 1]


# --- credentials ---------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_credentials_are_checked(gh: tuple[FakeGitHub, httpx.AsyncClient, dict[str, str]]) -> None:
    fake, client, auth = gh
    now = time.time()
    assert (await client.get(f"/repos/{REPO}")).status_code == 401
    assert (
        await client.get(f"/repos/{REPO}", headers={"Authorization": "token ghs_guess"})
    ).status_code == 401
    bearer = {"Authorization": auth["Authorization"].replace("token ", "Bearer ")}
    assert (await client.get(f"/repos/{REPO}", headers=bearer)).status_code == 200
    assert (await client.get("/app", headers=auth)).status_code == 401  # a token is not a JWT
    other_key = app_jwt_at(fake.app_id, generate_app_key().private_pem, now)
    assert (await client.get("/app", headers={"Authorization": f"Bearer {other_key}"})).status_code == 401
    wrong_app = app_jwt_at(999, fake.key.private_pem, now)
    assert (await client.get("/app", headers={"Authorization": f"Bearer {wrong_app}"})).status_code == 401
    claims = {"iat": int(now), "exp": int(now) + 3600, "iss": str(fake.app_id)}
    too_long = jwt.encode(claims, fake.key.private_pem, algorithm="RS256")
    answer = await client.get("/app", headers={"Authorization": f"Bearer {too_long}"})
    assert answer.status_code == 401 and "too far in the future" in answer.json()["message"]
    expired = app_jwt_at(fake.app_id, fake.key.private_pem, now - 700)
    assert (await client.get("/app", headers={"Authorization": f"Bearer {expired}"})).status_code == 401
    good = {"Authorization": f"Bearer {app_jwt_at(fake.app_id, fake.key.private_pem, now)}"}
    assert (await client.post("/app/installations/404/access_tokens", headers=good)).status_code == 404
    fake.add_repo("elsewhere/repo", installation_id=12)
    assert (await client.get("/repos/elsewhere/repo", headers=auth)).status_code == 404
    fake.clock = lambda: now + fake.token_lifetime + 1
    assert (await client.get(f"/repos/{REPO}", headers=auth)).status_code == 401
    assert fake.token_requests == [11]
    assert fake.violations == []


# --- ETags, rate limits, faults, pagination -------------------------------------------------------


@pytest.mark.anyio
async def test_etag_answers_304_without_spending_rate_limit(
    gh: tuple[FakeGitHub, httpx.AsyncClient, dict[str, str]],
) -> None:
    fake, client, auth = gh
    comment = fake.add_comment(REPO, 7, "approve?", user=fake.bot_login)
    path = f"/repos/{REPO}/issues/comments/{comment.id}/reactions"
    first = await client.get(path, headers=auth)
    etag = first.headers["etag"]
    remaining = int(first.headers["x-ratelimit-remaining"])
    again = await client.get(path, headers={**auth, "If-None-Match": etag})
    assert again.status_code == 304 and again.content == b""
    assert int(again.headers["x-ratelimit-remaining"]) == remaining and fake.not_modified == 1
    fake.add_reaction(comment.id, "maintainer", "+1")
    changed = await client.get(path, headers={**auth, "If-None-Match": etag})
    assert changed.status_code == 200 and changed.headers["etag"] != etag
    assert [r["user"]["login"] for r in changed.json()] == ["maintainer"]
    assert int(changed.headers["x-ratelimit-remaining"]) == remaining - 1
    fake.rate_limit.remaining = 0
    limited = await client.get(path, headers=auth)
    assert limited.status_code == 403 and limited.headers["x-ratelimit-remaining"] == "0"
    assert "rate limit exceeded" in limited.json()["message"]


@pytest.mark.anyio
async def test_injected_faults_then_normal_answers(
    gh: tuple[FakeGitHub, httpx.AsyncClient, dict[str, str]],
) -> None:
    fake, client, auth = gh
    flaky = fake.inject("GET", r"^/repos/[^/]+/[^/]+$", status=502, times=2)
    slow = fake.inject("*", r"/pulls/7$", status=None, delay=0.01, times=1)
    limited = fake.inject("POST", r"/comments$", status=403, headers={"Retry-After": "7"},
                          body={"message": "You have exceeded a secondary rate limit."})  # fmt: skip
    assert [(await client.get(f"/repos/{REPO}", headers=auth)).status_code for _ in range(3)] == [
        502,
        502,
        200,
    ]
    assert (await client.get(f"/repos/{REPO}/pulls/7", headers=auth)).status_code == 200
    answer = await client.post(f"/repos/{REPO}/issues/7/comments", json={"body": "x"}, headers=auth)
    assert (answer.status_code, answer.headers["retry-after"]) == (403, "7")
    assert (flaky.hits, slow.hits, limited.hits) == (2, 1, 1)
    assert fake.comments == {}
    invalid = await client.post(f"/repos/{REPO}/issues/7/comments", json={}, headers=auth)
    assert invalid.status_code == 422  # validation runs before any injected fault
    fake.violations.clear()


@pytest.mark.anyio
async def test_pagination_links(gh: tuple[FakeGitHub, httpx.AsyncClient, dict[str, str]]) -> None:
    fake, client, auth = gh
    fake.pull(REPO, 7).files = [PullFile(f"f{i}.txt") for i in range(250)]
    first = await client.get(f"/repos/{REPO}/pulls/7/files?per_page=100", headers=auth)
    assert len(first.json()) == 100 and "page=2" in first.links["next"]["url"]
    assert "page=3" in first.links["last"]["url"]
    last = await client.get(f"/repos/{REPO}/pulls/7/files?per_page=100&page=3", headers=auth)
    assert [f["filename"] for f in last.json()][-1] == "f249.txt" and "next" not in last.links


# --- serving on loopback ------------------------------------------------------------------------


def test_served_on_loopback_under_an_enterprise_prefix() -> None:
    fake = FakeGitHub(api_prefix="/api/v3", git_base_url="http://127.0.0.1:9/git")
    fake.add_repo(REPO)
    with serve_fake_github(fake) as url:
        assert url.startswith("http://127.0.0.1:") and url.endswith("/api/v3")
        now = time.time()
        headers = {"Authorization": f"Bearer {app_jwt_at(fake.app_id, fake.key.private_pem, now)}"}
        token = httpx.post(f"{url}/app/installations/1/access_tokens", headers=headers).json()["token"]
        repo = httpx.get(f"{url}/repos/{REPO}", headers={"Authorization": f"token {token}"}).json()
        outside = httpx.get(url.removesuffix("/api/v3") + f"/repos/{REPO}")
    assert repo["clone_url"] == f"http://127.0.0.1:9/git/{REPO}.git"
    assert repo["url"] == f"{url}/repos/{REPO}"
    assert outside.status_code == 404 and len(fake.violations) == 1
    assert [c.prefix for c in fake.calls] == ["/api/v3", "/api/v3", ""]
    assert json.loads(json.dumps(fake.snapshot()))["repos"] == [REPO]


@pytest.mark.anyio
async def test_the_users_api_answers_as_github_does_and_only_to_user_tokens(
    gh: tuple[FakeGitHub, httpx.AsyncClient, dict[str, str]],
) -> None:
    fake, client, installation_auth = gh
    fake.add_collaborator(REPO, "reader", "read")
    fake.oauth.org_roles[("octo-org", "reader")] = "member"
    user = {"Authorization": f"Bearer {fake.oauth.mint('reader')}"}
    spec = RestSpec.load()
    problems: list[str] = []
    for path in (
        "/user",
        "/user/installations",
        "/user/installations/11/repositories",
        "/user/memberships/orgs/octo-org",
    ):
        response = await client.get(path, headers=user)
        assert response.status_code == 200, path
        operation = spec.check_request("GET", path, [], b"").operation
        assert operation is not None
        problems += [f"{path}: {p}" for p in spec.check_response(operation, 200, response.json())]
    assert problems == [], "\n".join(problems)
    listed = (await client.get("/user/installations/11/repositories", headers=user)).json()
    assert [r["full_name"] for r in listed["repositories"]] == [REPO]
    # An installation token is no user token, and a revoked user token is refused.
    assert (await client.get("/user", headers=installation_auth)).status_code == 401
    fake.oauth.revoke("reader")
    assert (await client.get("/user", headers=user)).status_code == 401
