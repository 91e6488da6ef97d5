"""The bot's GitHub client against the fake GitHub, over real HTTP on loopback (and in-process).

Every request the client makes is validated against GitHub's OpenAPI description by the fake; the
fixture fails a test that sent anything GitHub would refuse. Waits are asserted on the injected
sleep's recorded delays, never on the wall clock.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field

import anyio
import httpx
import jwt
import pytest

from bot.app.github.client import (
    GitHubApi,
    GitHubApp,
    GitHubError,
    InlineComment,
    InstallationClient,
    RetryPolicy,
    convert_manifest,
)
from tests.support.fake_github import FakeGitHub, checked_fake_github, generate_app_key, serve_fake_github
from tests.support.fake_github_auth import gidgethub_clock
from tests.support.fake_github_state import PullFile

REPO = "octo-org/hello-world"
OWNER, NAME = REPO.split("/")
INSTALLATION = 31
PATCH = "@@ -1,2 +1,3 @@\n intro\n+new line\n outro"


class FakeClock:
    def __init__(self) -> None:
        self.now = float(int(time.time()))

    def __call__(self) -> float:
        return self.now


@dataclass
class RecordingSleep:
    """Stands in for anyio.sleep: records each delay, moves the shared clock, runs an optional hook."""

    clock: FakeClock
    delays: list[float] = field(default_factory=list)
    on_sleep: Callable[[], None] | None = None

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)
        self.clock.now += seconds
        if self.on_sleep is not None:
            self.on_sleep()


@dataclass
class Rig:
    fake: FakeGitHub
    clock: FakeClock
    sleep: RecordingSleep
    api: GitHubApi
    app: GitHubApp
    gh: InstallationClient


def seed(fake: FakeGitHub) -> None:
    fake.add_repo(REPO, installation_id=INSTALLATION)
    fake.add_pull(REPO, number=7, head_sha="a" * 40, files=[PullFile("docs/a.md", patch=PATCH)])
    fake.add_collaborator(REPO, "maintainer", "maintain")
    fake.add_collaborator(REPO, "admin-person", "admin")
    fake.add_user("passer-by")
    fake.set_file(REPO, "main", ".github/beam.yml", "skills:\n  - review\n")


@pytest.fixture
def clock() -> Iterator[FakeClock]:
    """The test's clock, also the one gidgethub makes App JWTs at."""
    clock = FakeClock()
    with gidgethub_clock(clock):
        yield clock


@pytest.fixture
def fake(clock: FakeClock) -> Iterator[FakeGitHub]:
    with checked_fake_github(clock=clock, token_lifetime=3600) as fake:
        seed(fake)
        yield fake


def make_rig(fake: FakeGitHub, clock: FakeClock, http: httpx.AsyncClient, base_url: str) -> Rig:
    sleep = RecordingSleep(clock)
    api = GitHubApi(http, base_url=base_url, user_agent="beam-bot-tests/1.0", sleep=sleep, clock=clock)
    app = GitHubApp(api, fake.app_id, fake.key.private_pem)
    return Rig(fake, clock, sleep, api, app, InstallationClient(app, INSTALLATION))


@pytest.fixture
async def rig(fake: FakeGitHub, clock: FakeClock) -> AsyncIterator[Rig]:
    """The client on real HTTP: uvicorn on 127.0.0.1, a random port."""
    with serve_fake_github(fake) as url:
        async with httpx.AsyncClient() as http:
            yield make_rig(fake, clock, http, url)


@pytest.fixture
async def local(fake: FakeGitHub, clock: FakeClock) -> AsyncIterator[Rig]:
    """The same client in-process through httpx.ASGITransport, for tests that need no socket."""
    async with httpx.AsyncClient(transport=fake.transport()) as http:
        yield make_rig(fake, clock, http, "http://github.test")


# --- every call, end to end ----------------------------------------------------------------------


@pytest.mark.anyio
async def test_every_call_over_loopback(rig: Rig) -> None:
    fake, gh = rig.fake, rig.gh
    app_info = await rig.app.get_app()
    assert (app_info.id, app_info.bot_login) == (fake.app_id, "beam-bot[bot]")
    assert (await rig.app.installation_for_repo(OWNER, NAME)).id == INSTALLATION
    repo = await gh.get_repo(OWNER, NAME)
    assert (repo.default_branch, repo.clone_url) == ("main", f"http://git.invalid/{REPO}.git")
    pull = await gh.get_pull(OWNER, NAME, 7)
    assert (pull.head.sha, pull.head.ref, pull.base.ref, pull.from_fork) == (
        "a" * 40,
        "feature",
        "main",
        False,
    )
    assert [f.filename for f in await gh.list_pull_files(OWNER, NAME, 7)] == ["docs/a.md"]
    issue = await gh.get_issue(OWNER, NAME, 7)
    assert issue.is_pull_request and issue.number == 7
    assert await gh.get_file(OWNER, NAME, ".github/beam.yml", "main") == "skills:\n  - review\n"

    command = fake.add_comment(REPO, 7, "/beam review", user="maintainer")
    eyes = await gh.add_reaction(OWNER, NAME, command.id, "eyes")
    assert (eyes.content, eyes.user and eyes.user.login) == ("eyes", "beam-bot[bot]")
    tracking = await gh.create_comment(OWNER, NAME, 7, "Working on it")
    assert tracking.html_url.endswith(f"#issuecomment-{tracking.id}")
    await gh.update_comment(OWNER, NAME, tracking.id, "- [x] done")
    assert (await gh.get_comment(OWNER, NAME, tracking.id)).body == "- [x] done"
    assert [c.body for c in await gh.list_comments(OWNER, NAME, 7)] == ["/beam review", "- [x] done"]

    review = await gh.create_review(
        OWNER, NAME, 7, commit_id="a" * 40, body="Looks fine",
        comments=[
            InlineComment(path="docs/a.md", line=2, body="nit"),
            {"path": "docs/a.md", "line": 1, "side": "RIGHT", "body": "as a dict"},
        ],
    )  # fmt: skip
    assert review.state == "COMMENTED"
    stored = fake.reviews[review.id]
    assert (stored.event, len(stored.comment_ids)) == ("COMMENT", 2)
    assert [fake.comments[i].line for i in stored.comment_ids] == [2, 1]
    thread = fake.add_review_comment(REPO, 7, "/beam explain", user="maintainer", path="docs/a.md", line=2)
    await gh.add_reaction(OWNER, NAME, thread.id, "+1", review_comment=True)
    reply = await gh.reply_to_review_comment(OWNER, NAME, 7, thread.id, "Because.")
    assert reply.in_reply_to_id == thread.id
    opened = await gh.create_pull(
        OWNER, NAME, title="beam: fix", head="beam/pr-7/author-1", base="feature", body="b"
    )
    assert (opened.base.ref, opened.head.ref, opened.user and opened.user.login) == (
        "feature", "beam/pr-7/author-1", "beam-bot[bot]",
    )  # fmt: skip

    assert [r.content for r in fake.reactions_on(command.id)] == ["eyes"]
    assert all(c.operation_id is not None for c in fake.calls)
    for call in fake.calls:
        assert call.headers["user-agent"] == "beam-bot-tests/1.0"
        assert call.headers["accept"] == "application/vnd.github+json"
        assert call.headers["x-github-api-version"] == "2022-11-28"
    assert fake.token_requests == [INSTALLATION]
    assert rig.api.stats.calls == len(fake.calls) and rig.api.stats.errors == {}


@pytest.mark.anyio
async def test_manifest_conversion_needs_no_credentials(local: Rig) -> None:
    pem = generate_app_key().private_pem
    local.fake.register_manifest_code("code-1", app_id=77, slug="beam-new", pem=pem, webhook_secret="hook-s")
    made = await convert_manifest(local.api, "code-1")
    assert (made.id, made.slug, made.pem.get_secret_value(), made.webhook_secret) == (
        77,
        "beam-new",
        pem,
        made.webhook_secret,
    )
    assert made.webhook_secret is not None and made.webhook_secret.get_secret_value() == "hook-s"
    assert pem not in repr(made) and "hook-s" not in repr(made)
    with pytest.raises(GitHubError) as used:
        await convert_manifest(local.api, "code-1")  # a code converts once
    assert used.value.status == 404
    assert local.fake.calls[0].auth is None


# --- the App JWT and installation tokens --------------------------------------------------------


@pytest.mark.anyio
async def test_app_jwt_claims(local: Rig) -> None:
    key = generate_app_key()
    local.clock.now = 1_800_000_000.7
    token = GitHubApp(local.api, 4242, key.private_pem).jwt()
    claims = jwt.decode(
        token, key.public_pem, algorithms=["RS256"], options={"verify_exp": False, "verify_iat": False}
    )
    assert claims == {"iat": 1_800_000_000 - 60, "exp": 1_800_000_000 + 540, "iss": "4242"}
    assert jwt.get_unverified_header(token)["alg"] == "RS256"


@pytest.mark.anyio
async def test_token_is_cached_and_renewed_a_minute_before_expiry(local: Rig) -> None:
    local.fake.token_lifetime = 600
    for _ in range(3):
        await local.gh.get_repo(OWNER, NAME)
    assert local.fake.token_requests == [INSTALLATION]
    local.clock.now += 600 - 61  # 61 s left: still good
    await local.gh.get_repo(OWNER, NAME)
    assert len(local.fake.token_requests) == 1
    local.clock.now += 2  # 59 s left: renewed before use
    await local.gh.get_repo(OWNER, NAME)
    assert len(local.fake.token_requests) == 2
    other = InstallationClient(local.app, 99)
    local.fake.add_repo("other/repo", installation_id=99)
    await other.get_repo("other", "repo")
    assert local.fake.token_requests == [INSTALLATION, INSTALLATION, 99]
    assert local.api.stats.token_fetches == 3


@pytest.mark.anyio
async def test_concurrent_callers_share_one_token_fetch(rig: Rig) -> None:
    slow = rig.fake.inject("POST", r"/access_tokens$", status=None, delay=0.05)
    results: list[str] = []

    async def one() -> None:
        results.append((await rig.gh.get_repo(OWNER, NAME)).full_name)

    async with anyio.create_task_group() as tasks:
        for _ in range(8):
            tasks.start_soon(one)
    assert results == [REPO] * 8
    assert rig.fake.token_requests == [INSTALLATION] and slow.hits == 1


@pytest.mark.anyio
async def test_revoked_token_is_replaced_once(local: Rig) -> None:
    await local.gh.get_repo(OWNER, NAME)
    local.fake.tokens.clear()  # GitHub forgot the token (revoked, or the app was reinstalled)
    assert (await local.gh.get_repo(OWNER, NAME)).full_name == REPO
    assert len(local.fake.token_requests) == 2 and local.api.stats.errors == {401: 1}
    local.fake.inject(
        "GET", r"^/repos/[^/]+/[^/]+$", status=401, body={"message": "Bad credentials"}, times=2
    )
    with pytest.raises(GitHubError) as refused:
        await local.gh.get_repo(OWNER, NAME)
    assert refused.value.status == 401 and len(local.fake.token_requests) == 3


# --- retries and rate limits ---------------------------------------------------------------------


@pytest.mark.anyio
async def test_server_errors_are_retried_with_exponential_backoff(rig: Rig) -> None:
    rig.fake.inject("GET", r"/pulls/7$", status=502, times=2)
    assert (await rig.gh.get_pull(OWNER, NAME, 7)).number == 7
    assert rig.sleep.delays == [1.0, 2.0]
    assert rig.api.stats.errors == {502: 2} and rig.api.stats.retries == 2

    rig.sleep.delays.clear()
    rig.fake.inject("POST", r"/issues/7/comments$", status=500, times=None)
    with pytest.raises(GitHubError) as failed:
        await rig.gh.create_comment(OWNER, NAME, 7, "hello")
    assert failed.value.status == 500 and not failed.value.rate_limited and failed.value.transient
    # A POST that failed with 5xx may have been done: it is not sent again blindly (issue 8); the
    # job's retry reads GitHub first (bot/app/effects).
    assert rig.sleep.delays == []
    assert len(rig.fake.calls_to("issues/create-comment")) == 1 and rig.fake.comments_on(REPO, 7) == []


@pytest.mark.anyio
async def test_backoff_is_capped(fake: FakeGitHub, clock: FakeClock) -> None:
    async with httpx.AsyncClient(transport=fake.transport()) as http:
        rig = make_rig(fake, clock, http, "http://github.test")
        rig.api.retry = RetryPolicy(max_attempts=6, backoff_base=2.0, backoff_max=10.0)
        fake.inject("GET", r"/pulls/7$", status=503, times=5)
        await rig.gh.get_pull(OWNER, NAME, 7)
    assert rig.sleep.delays == [2.0, 4.0, 8.0, 10.0, 10.0]


@pytest.mark.anyio
async def test_secondary_rate_limit_waits_retry_after(rig: Rig) -> None:
    message = {
        "message": "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."
    }
    rig.fake.inject("POST", r"/issues/7/comments$", status=403, headers={"Retry-After": "7"}, body=message)
    comment = await rig.gh.create_comment(OWNER, NAME, 7, "hello")
    assert rig.sleep.delays == [7.0]
    assert [c.id for c in rig.fake.comments_on(REPO, 7)] == [comment.id]
    rig.fake.inject("POST", r"/issues/7/comments$", status=403, body=message)  # no Retry-After: a minute
    await rig.gh.create_comment(OWNER, NAME, 7, "again")
    assert rig.sleep.delays == [7.0, 60.0] and rig.api.stats.rate_limit_waits == 2


@pytest.mark.anyio
async def test_primary_rate_limit_waits_until_reset(local: Rig) -> None:
    await local.gh.get_repo(OWNER, NAME)
    local.fake.rate_limit.remaining = 0
    local.fake.rate_limit.reset = local.clock.now + 30

    def refill() -> None:
        if local.clock.now >= (local.fake.rate_limit.reset or 0):
            local.fake.rate_limit.remaining = 5000

    local.sleep.on_sleep = refill
    assert (await local.gh.get_pull(OWNER, NAME, 7)).number == 7
    assert local.sleep.delays == [31.0]  # until x-ratelimit-reset, plus a second
    assert local.api.stats.rate_limit_remaining == 4999


@pytest.mark.anyio
async def test_long_rate_limit_is_not_slept_but_reported(local: Rig) -> None:
    await local.gh.get_repo(OWNER, NAME)
    local.fake.rate_limit.remaining = 0
    local.fake.rate_limit.reset = local.clock.now + 3600
    with pytest.raises(GitHubError) as limited:
        await local.gh.get_pull(OWNER, NAME, 7)
    assert limited.value.status == 403 and limited.value.rate_limited
    assert limited.value.retry_at == pytest.approx(local.clock.now + 3601)
    assert local.sleep.delays == []


@pytest.mark.anyio
async def test_plain_client_errors_are_not_retried(local: Rig) -> None:
    with pytest.raises(GitHubError) as missing:
        await local.gh.get_pull(OWNER, NAME, 404)
    outside = InlineComment(path="docs/a.md", line=40, body="not in the diff")
    with pytest.raises(GitHubError) as refused:
        await local.gh.create_review(OWNER, NAME, 7, commit_id="a" * 40, body="r", comments=[outside])
    assert (missing.value.status, refused.value.status) == (404, 422)
    assert refused.value.errors == ["Line could not be resolved"]
    assert str(refused.value) == (
        f"GitHub POST /repos/{REPO}/pulls/7/reviews -> 422: "
        "Unprocessable Entity (['Line could not be resolved'])"
    )
    assert local.sleep.delays == [] and local.api.stats.errors == {404: 1, 422: 1}


# --- conditional requests, permissions, files, pagination ---------------------------------------


@pytest.mark.anyio
async def test_reactions_with_etag(rig: Rig) -> None:
    comment = rig.fake.add_comment(REPO, 7, "approve?", user=rig.fake.bot_login)
    rig.fake.add_reaction(comment.id, "maintainer", "+1")
    reactions, etag = await rig.gh.list_reactions(OWNER, NAME, comment.id)
    assert reactions is not None and [(r.content, r.user and r.user.login) for r in reactions] == [
        ("+1", "maintainer")
    ]
    assert etag is not None
    unchanged, same = await rig.gh.list_reactions(OWNER, NAME, comment.id, etag=etag)
    assert (unchanged, same) == (None, etag)
    assert rig.fake.not_modified == 1 and rig.api.stats.not_modified == 1
    rig.fake.add_reaction(comment.id, "admin-person", "-1")
    changed, newer = await rig.gh.list_reactions(OWNER, NAME, comment.id, etag=etag)
    assert changed is not None and len(changed) == 2 and newer not in (None, etag)
    assert rig.fake.calls[-1].headers["if-none-match"] == etag


@pytest.mark.anyio
async def test_many_reactions_are_paged(local: Rig) -> None:
    comment = local.fake.add_comment(REPO, 7, "approve?", user=local.fake.bot_login)
    for i in range(130):
        local.fake.add_reaction(comment.id, f"user{i}", "+1")
    reactions, etag = await local.gh.list_reactions(OWNER, NAME, comment.id)
    assert reactions is not None and len({r.id for r in reactions}) == 130
    assert len(local.fake.calls_to("reactions/list-for-issue-comment")) == 2
    # The first page's ETag would hide a reaction added on page two: none is handed back.
    assert etag is None


@pytest.mark.anyio
async def test_permissions(local: Rig) -> None:
    gh = local.gh
    assert await gh.get_permission(OWNER, NAME, "admin-person") == "admin"
    assert await gh.get_permission(OWNER, NAME, "maintainer") == "write"  # maintain reads as write
    assert await gh.get_permission(OWNER, NAME, "passer-by") == "read"  # public repository
    assert await gh.get_permission(OWNER, NAME, "ghost-user") == "none"  # 404
    local.fake.repo(REPO).private = True
    assert await gh.get_permission(OWNER, NAME, "passer-by") == "none"


@pytest.mark.anyio
async def test_files_from_a_ref(local: Rig) -> None:
    local.fake.set_file(REPO, "feature", ".github/beam.yml", "skills: []\n")
    assert await local.gh.get_file(OWNER, NAME, ".github/beam.yml") == "skills:\n  - review\n"
    assert await local.gh.get_file(OWNER, NAME, ".github/beam.yml", "feature") == "skills: []\n"
    assert await local.gh.get_file(OWNER, NAME, ".github/missing.yml", "main") is None


@pytest.mark.anyio
async def test_pull_files_are_paged_and_capped(local: Rig) -> None:
    local.fake.pull(REPO, 7).files = [PullFile(f"src/f{i}.py") for i in range(250)]
    files = await local.gh.list_pull_files(OWNER, NAME, 7)
    assert [f.filename for f in files] == [f"src/f{i}.py" for i in range(250)]
    assert len(local.fake.calls_to("pulls/list-files")) == 3
    capped = await local.gh.list_pull_files(OWNER, NAME, 7, max_files=150)
    assert len(capped) == 150 and len(local.fake.calls_to("pulls/list-files")) == 5


# --- GitHub Enterprise Server, secrets, metrics --------------------------------------------------


@pytest.mark.anyio
async def test_enterprise_server_base_url_with_path_prefix(clock: FakeClock) -> None:
    with checked_fake_github(clock=clock, api_prefix="/api/v3") as fake:
        seed(fake)
        with serve_fake_github(fake) as url:
            assert url.endswith("/api/v3")
            async with httpx.AsyncClient() as http:
                rig = make_rig(fake, clock, http, url + "/")
                assert (await rig.app.get_app()).slug == "beam-bot"
                assert (await rig.gh.get_pull(OWNER, NAME, 7)).number == 7
                assert await rig.gh.get_file(OWNER, NAME, ".github/beam.yml", "main")
        assert [c.prefix for c in fake.calls] == ["/api/v3"] * 4
        assert [c.operation_id for c in fake.calls] == [
            "apps/get-authenticated",
            "apps/create-installation-access-token",
            "pulls/get",
            "repos/get-content",
        ]


@pytest.mark.anyio
async def test_tokens_and_keys_never_reach_errors_or_logs(
    local: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    await local.gh.get_repo(OWNER, NAME)
    token = next(iter(local.fake.tokens))
    local.fake.inject(
        "GET", r"/pulls/7$", status=403, body={"message": "Resource not accessible by integration"}
    )
    with pytest.raises(GitHubError) as refused:
        await local.gh.get_pull(OWNER, NAME, 7)
    async with httpx.AsyncClient() as http:  # nothing listens on port 9 of loopback
        dead = GitHubApi(http, base_url="http://127.0.0.1:9", sleep=local.sleep, clock=local.clock)
        with pytest.raises(GitHubError) as unreachable:
            await dead.request("GET", "/app", oauth_token=token)
    assert unreachable.value.status == 0 and unreachable.value.__cause__ is None
    assert local.sleep.delays == [1.0, 2.0, 4.0]  # an unsent request is always safe to repeat
    for error in (refused.value, unreachable.value):
        for text in (str(error), repr(error), repr(error.args)):
            assert token not in text and "BEGIN PRIVATE KEY" not in text
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert token not in logged and "retrying" in logged
    assert token not in repr(local.app) and "PRIVATE" not in repr(local.app)


@pytest.mark.anyio
async def test_metrics_counters(local: Rig) -> None:
    local.fake.inject("GET", r"/pulls/7$", status=500, times=1)
    await local.gh.get_pull(OWNER, NAME, 7)
    await local.gh.get_permission(OWNER, NAME, "ghost-user")
    metrics = local.api.stats.metrics()
    assert metrics["github_api_calls"] == 4  # token, 500, pull, permission 404
    assert (metrics["github_api_errors_500"], metrics["github_api_errors_404"]) == (1, 1)
    assert metrics["github_api_retries"] == 1 and metrics["github_installation_token_fetches"] == 1
    assert all(isinstance(v, int) for v in metrics.values())
