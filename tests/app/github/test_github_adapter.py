"""What the adapter's layering on gidgethub adds: retries on every page of a listing, names from
payloads escaped by the URI templates, a redirect that is an error rather than a body, and GitHub's
own message kept on a 422 whatever gidgethub makes of it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from bot.app.github.client import GitHubError
from tests.app.github.test_github_client import (
    INSTALLATION,
    NAME,
    OWNER,
    REPO,
    FakeClock,
    Rig,
    make_rig,
    seed,
)
from tests.support.fake_github import FakeGitHub, checked_fake_github
from tests.support.fake_github_auth import gidgethub_clock
from tests.support.fake_github_state import PullFile


class FlakyPageTwo(httpx.AsyncBaseTransport):
    """GitHub failing once, with a 502, on the second page of any listing; the fake answers the rest."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner
        self.failed: list[str] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.params.get("page") == "2" and not self.failed:
            self.failed.append(str(request.url))
            return httpx.Response(502, json={"message": "Server Error"}, request=request)
        return await self.inner.handle_async_request(request)


@pytest.fixture
def clock() -> Iterator[FakeClock]:
    clock = FakeClock()
    with gidgethub_clock(clock):  # gidgethub makes App JWTs at the test's clock
        yield clock


@pytest.fixture
async def fake(clock: FakeClock) -> AsyncIterator[FakeGitHub]:
    with checked_fake_github(clock=clock, token_lifetime=3600) as fake:
        seed(fake)
        yield fake


@pytest.mark.anyio
async def test_a_failed_page_is_retried_not_the_listing(fake: FakeGitHub, clock: FakeClock) -> None:
    fake.pull(REPO, 7).files = [PullFile(f"src/f{i}.py") for i in range(250)]
    flaky = FlakyPageTwo(fake.transport())
    async with httpx.AsyncClient(transport=flaky) as http:
        rig = make_rig(fake, clock, http, "http://github.test")
        files = await rig.gh.list_pull_files(OWNER, NAME, 7)
    assert [f.filename for f in files] == [f"src/f{i}.py" for i in range(250)]
    assert len(flaky.failed) == 1 and rig.sleep.delays == [1.0]
    # Page 1 once, page 2 after its retry, page 3: the listing did not start again.
    assert len(fake.calls_to("pulls/list-files")) == 3 and rig.api.stats.retries == 1


@pytest.fixture
async def local(fake: FakeGitHub, clock: FakeClock) -> AsyncIterator[Rig]:
    async with httpx.AsyncClient(transport=fake.transport()) as http:
        yield make_rig(fake, clock, http, "http://github.test")


@pytest.mark.anyio
async def test_names_from_payloads_are_escaped_by_the_templates(local: Rig) -> None:
    odd = "docs/a b#c?d.md"  # each of ' ', '#', '?' would cut or change the URL unescaped
    local.fake.set_file(REPO, "topic/x", odd, "odd\n")
    assert await local.gh.get_file(OWNER, NAME, odd, "topic/x") == "odd\n"
    call = local.fake.calls_to("repos/get-content")[-1]
    assert call.path.endswith("/contents/docs/a%20b%23c%3Fd.md") and call.query == {"ref": "topic/x"}
    assert await local.gh.get_permission(OWNER, NAME, "../../orgs") == "none"  # one segment, a 404
    assert local.fake.calls[-1].path.endswith("/collaborators/..%2F..%2Forgs/permission")


@pytest.mark.anyio
async def test_a_redirect_is_an_error_not_a_body(local: Rig) -> None:
    local.fake.inject("GET", r"/pulls/7$", status=301, headers={"Location": "http://github.test/x"})
    with pytest.raises(GitHubError) as moved:
        await local.gh.get_pull(OWNER, NAME, 7)
    assert moved.value.status == 301 and not moved.value.transient and local.sleep.delays == []


@pytest.mark.anyio
async def test_a_422_keeps_githubs_message_and_errors(local: Rig) -> None:
    errors = [{"resource": "Issue", "code": "custom", "message": "x"}]
    body = {"message": "Validation Failed", "errors": errors}
    local.fake.inject("POST", r"/issues/7/comments$", status=422, body=body)
    with pytest.raises(GitHubError) as refused:
        await local.gh.create_comment(OWNER, NAME, 7, "hello")
    assert (refused.value.message, refused.value.errors) == ("Validation Failed", errors)
    assert refused.value.path == f"/repos/{REPO}/issues/7/comments"
    assert local.fake.token_requests == [INSTALLATION]
