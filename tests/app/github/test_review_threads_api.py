"""Review threads through GraphQL and reactions on review comments, against the fake GitHub: the
fake parses and checks each document against its copy of GitHub's schema, so a wrong query fails."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from bot.app.github.api import GitHubError
from bot.app.github.client import InstallationClient
from bot.app.github.review_threads import (
    graphql,
    resolve_thread,
    review_comment_reactions,
    review_threads,
)
from tests.support.fake_github import FakeGitHub, checked_fake_github, installation_client
from tests.support.fake_github_state import PullFile

REPO = "octo/th"
OWNER, NAME = REPO.split("/")
INSTALLATION = 78
pytestmark = pytest.mark.anyio


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    with checked_fake_github() as fake:
        fake.add_repo(REPO, installation_id=INSTALLATION)
        fake.add_pull(
            REPO, number=4, head_sha="a" * 40, files=[PullFile("f.py", patch="@@ -1 +1 @@\n-a\n+b\n")]
        )
        yield fake


@pytest.fixture
async def gh(fake: FakeGitHub) -> AsyncIterator[InstallationClient]:
    async with installation_client(fake, INSTALLATION) as client:
        yield client


async def test_threads_are_listed_with_their_first_comment_and_resolved(
    fake: FakeGitHub, gh: InstallationClient
) -> None:
    first = fake.add_review_comment(REPO, 4, "finding one", path="f.py", line=1)
    reply = fake.add_review_comment(REPO, 4, "a reply", path="f.py", line=1)
    reply.in_reply_to = first.id
    second = fake.add_review_comment(REPO, 4, "finding two", path="f.py", line=1)
    threads = await review_threads(gh, OWNER, NAME, 4)
    assert [(t.root_comment_id, t.resolved) for t in threads] == [(first.id, False), (second.id, False)]
    assert await resolve_thread(gh, threads[1].node_id) is True
    assert fake.resolved_threads == {second.id}
    again = await review_threads(gh, OWNER, NAME, 4)
    assert [t.resolved for t in again] == [False, True]
    assert [c.operation_id for c in fake.calls].count("graphql") == 3


async def test_a_document_the_schema_does_not_allow_is_an_error(
    fake: FakeGitHub, gh: InstallationClient
) -> None:
    bad = "query($owner: String!) { repository(owner: $owner) { pullRequest(number: 1) { title } } }"
    with pytest.raises(GitHubError, match="GraphQL: "):
        await graphql(gh, bad, {"owner": OWNER}, write=False)
    mistyped = (
        "mutation($threadId: ID!) { resolveReviewThread(input: {threadId: $threadId}) { thread { id } } }"
    )
    with pytest.raises(GitHubError, match="expected ID"):
        await graphql(gh, mistyped, {"threadId": 12}, write=True)
    # The fake recorded both as requests GitHub would refuse; this test expects them.
    assert len(fake.violations) == 2
    fake.violations.clear()


async def test_reactions_on_a_review_comment_are_read_conditionally(
    fake: FakeGitHub, gh: InstallationClient
) -> None:
    comment = fake.add_review_comment(REPO, 4, "finding", path="f.py", line=1)
    fake.add_reaction(comment.id, "maintainer", "-1")
    reactions, etag = await review_comment_reactions(gh, OWNER, NAME, comment.id, None)
    assert reactions is not None and [(r.content, r.user.login if r.user else "") for r in reactions] == [
        ("-1", "maintainer")
    ]
    assert etag is not None
    unchanged, same = await review_comment_reactions(gh, OWNER, NAME, comment.id, etag)
    assert unchanged is None and same == etag and fake.not_modified == 1
