"""What the findings ledger asks of GitHub beyond `client.py`: the reactions on a review comment
(conditional, like the approval poller's), and review threads, which only GraphQL knows.

REST has no notion of a thread being resolved: `pullRequest.reviewThreads` gives each thread's node
id (with the database id of its first comment, which is how the bot knows its findings' threads)
and `resolveReviewThread(input: {threadId})` resolves one. GraphQL answers 200 with an `errors`
list when a query is wrong; that is raised as a GitHubError like a REST failure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bot.app.fence import before_write
from bot.app.github.api import GitHubError
from bot.app.github.client import InstallationClient
from bot.app.github.models import Reaction

THREADS_QUERY = """
query($owner: String!, $name: String!, $number: Int!, $after: String) {
  repository(owner: $owner, name: $name) {
    pullRequest(number: $number) {
      reviewThreads(first: 100, after: $after) {
        pageInfo { hasNextPage endCursor }
        nodes { id isResolved comments(first: 1) { nodes { databaseId } } }
      }
    }
  }
}
""".strip()

RESOLVE_MUTATION = """
mutation($threadId: ID!) {
  resolveReviewThread(input: {threadId: $threadId}) { thread { id isResolved } }
}
""".strip()

MAX_THREAD_PAGES = 30


@dataclass(frozen=True, slots=True)
class Thread:
    node_id: str
    resolved: bool
    root_comment_id: int | None


async def graphql(gh: InstallationClient, query: str, variables: dict[str, Any], *, write: bool) -> Any:
    """One GraphQL call as the installation; its `data`, or a GitHubError naming the first error."""
    if write:
        await before_write()  # a job's write only while the job is still ours (fence.py)
    api, data = gh.app.api, {"query": query, "variables": variables}
    answer = await gh._as_installation(
        lambda token: api.request("POST", api.graphql_url, oauth_token=token, data=data)
    )
    body = answer.data
    errors = body.get("errors") if isinstance(body, dict) else None
    if errors:
        message = str(errors[0].get("message", "GraphQL error")) if isinstance(errors[0], dict) else "error"
        raise GitHubError(422, f"GraphQL: {message}", method="POST", path="/graphql")
    return body.get("data") if isinstance(body, dict) else None


async def review_threads(gh: InstallationClient, owner: str, name: str, number: int) -> list[Thread]:
    out: list[Thread] = []
    after: str | None = None
    for _ in range(MAX_THREAD_PAGES):
        variables = {"owner": owner, "name": name, "number": number, "after": after}
        data = await graphql(gh, THREADS_QUERY, variables, write=False)
        pull = ((data or {}).get("repository") or {}).get("pullRequest") or {}
        threads = pull.get("reviewThreads") or {}
        for node in threads.get("nodes") or []:
            first = ((node.get("comments") or {}).get("nodes") or [{}])[0] or {}
            root = first.get("databaseId")
            root_id = root if isinstance(root, int) else None
            out.append(Thread(str(node["id"]), bool(node.get("isResolved")), root_id))
        page = threads.get("pageInfo") or {}
        if not page.get("hasNextPage"):
            break
        after = page.get("endCursor")
    return out


async def resolve_thread(gh: InstallationClient, thread_id: str) -> bool:
    """Resolve one review thread; whether GitHub says it is resolved now."""
    data = await graphql(gh, RESOLVE_MUTATION, {"threadId": thread_id}, write=True)
    thread = ((data or {}).get("resolveReviewThread") or {}).get("thread") or {}
    return bool(thread.get("isResolved"))


async def review_comment_reactions(
    gh: InstallationClient, owner: str, name: str, comment_id: int, etag: str | None
) -> tuple[list[Reaction] | None, str | None]:
    """Reactions on a review comment, or None when unchanged since `etag` (a 304 costs no rate limit)."""
    return await gh.list_reactions(owner, name, comment_id, etag, review_comment=True)
