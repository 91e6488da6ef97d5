"""The typed GitHub calls the bot makes for one installation, and the names the rest of the app imports.

Build once per process: `api = GitHubApi(http, base_url=...)`, `app = GitHubApp(api, app_id, key)`;
then per job `gh = InstallationClient(app, installation_id)`. Every call goes through GitHubApi
(gidgethub under our retries), so retries, rate-limit waits and the counters in `api.stats` apply
to all of them; every write passes the job's write fence first.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Awaitable, Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, TypeVar

from uritemplate.variable import VariableValue

from bot.app.fence import before_write
from bot.app.github.api import Answer, GitHubApi, GitHubError, RetryPolicy, UrlVars
from bot.app.github.auth import GitHubApp
from bot.app.github.file_cache import CachedFile, absent
from bot.app.github.models import (
    CheckRun,
    Comment,
    Comparison,
    InlineComment,
    Issue,
    ManifestConversion,
    Permission,
    PullFile,
    PullRequest,
    Reaction,
    ReactionContent,
    Repository,
    Review,
    ReviewComment,
    ReviewEvent,
)
from bot.app.github.payloads import CommentEvent, PullRequestEvent
from bot.app.logs import log_context

MAX_PULL_FILES = 3000  # GitHub itself lists no more than 3000 files of a pull request
PER_PAGE = 100
REPO = "/repos/{owner}/{repo}"  # the URI template every repository call starts with

T = TypeVar("T")


def _file_text(body: Any) -> str | None:
    if not isinstance(body, dict) or body.get("type") != "file" or body.get("encoding") != "base64":
        return None
    try:
        return base64.b64decode(body.get("content", "")).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None


def _iso(moment: float) -> str:
    """An ISO 8601 UTC timestamp, as GitHub's `since` parameters take it."""
    return datetime.fromtimestamp(moment, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


async def convert_manifest(api: GitHubApi, code: str) -> ManifestConversion:
    """Trades the code GitHub hands back after the App-manifest flow for the new App's credentials."""
    answer = await api.request("POST", "/app-manifests/{code}/conversions", {"code": code})
    return ManifestConversion.model_validate(answer.data)


async def event_client(
    app: GitHubApp, event: CommentEvent | PullRequestEvent
) -> tuple[InstallationClient, int]:
    """The client of the installation a delivery came from (asked of GitHub when the payload lacks it)."""
    if event.installation is not None:
        installation_id = event.installation.id
    else:
        repo = event.repository
        installation_id = (await app.installation_for_repo(repo.owner.login, repo.name)).id
    return InstallationClient(app, installation_id), installation_id


class InstallationClient:
    """Calls made as one installation of the App (its token is fetched and renewed by GitHubApp).

    URLs are gidgethub's URI templates; the `url_vars` fill them, escaped."""

    def __init__(self, app: GitHubApp, installation_id: int) -> None:
        self.app = app
        self.installation_id = installation_id

    def __repr__(self) -> str:
        return f"InstallationClient(installation_id={self.installation_id})"

    async def _as_installation(self, send: Callable[[str], Awaitable[T]]) -> T:
        # The installation travels in the context so the transport can count its rate limit.
        with log_context(installation_id=self.installation_id):
            token = await self.app.installation_token(self.installation_id)
            try:
                return await send(token.get_secret_value())
            except GitHubError as error:
                if error.status != 401:
                    raise
            # A revoked or rotated token: drop it and try once more with a new one.
            self.app.invalidate_token(self.installation_id)
            token = await self.app.installation_token(self.installation_id)
            return await send(token.get_secret_value())

    async def _call(
        self, method: str, url: str, url_vars: UrlVars, data: Any = b"", etag: str = ""
    ) -> Answer:
        """One call as the installation; with `etag`, a conditional GET (a 304 costs no rate limit)."""
        if method != "GET":
            await before_write()  # a job's write only while the job is still ours (fence.py)
        api = self.app.api
        return await self._as_installation(
            lambda token: api.request(method, url, url_vars, oauth_token=token, data=data, etag=etag)
        )

    async def _get(self, owner: str, repo: str, url: str = "", **url_vars: VariableValue) -> Any:
        """GET `/repos/{owner}/{repo}` + `url`: the decoded body."""
        return (await self._call("GET", REPO + url, {"owner": owner, "repo": repo, **url_vars})).data

    async def _send(
        self, method: str, owner: str, repo: str, url: str, data: Any, **url_vars: VariableValue
    ) -> Any:
        return (await self._call(method, REPO + url, {"owner": owner, "repo": repo, **url_vars}, data)).data

    async def _pages(self, url: str, limit: int, url_vars: UrlVars | None = None) -> list[Any]:
        api = self.app.api
        return await self._as_installation(
            lambda token: api.pages(url, url_vars, oauth_token=token, limit=limit)
        )

    async def _list(
        self, owner: str, repo: str, url: str, limit: int, **url_vars: VariableValue
    ) -> list[Any]:
        """Up to `limit` items of the listing at `/repos/{owner}/{repo}` + `url`, 100 a page."""
        url_vars = {"owner": owner, "repo": repo, "per_page": PER_PAGE, **url_vars}
        return await self._pages(REPO + url, limit, url_vars)

    # --- repositories ---------------------------------------------------------------------------

    async def get_repo(self, owner: str, repo: str) -> Repository:
        return Repository.model_validate(await self._get(owner, repo))

    async def get_permission(self, owner: str, repo: str, user: str) -> Permission:
        """The user's permission now; `none` when GitHub does not know them (404)."""
        try:
            body = await self._get(owner, repo, "/collaborators/{user}/permission", user=user)
        except GitHubError as error:
            if error.status == 404:
                return "none"
            raise
        permission = body.get("permission")
        return permission if permission in ("admin", "write", "read") else "none"

    def recent_file(self, owner: str, repo: str, path: str, ref: str, max_age: float) -> CachedFile | None:
        """What `get_file` last got for this file, if GitHub confirmed it less than `max_age` seconds
        ago; None otherwise. Asks nothing (see file_cache)."""
        return self.app.files.fresh((self.installation_id, owner, repo, path, ref), max_age)

    async def get_file(self, owner: str, repo: str, path: str, ref: str | None = None) -> str | None:
        """A text file's contents at `ref`, or None when there is no such file (or it is a directory).

        Revalidated with the ETag of the last read (`GitHubApp.files`, not gidgethub's cache: see
        file_cache): an unchanged file costs a `304` and no rate limit."""
        key = (self.installation_id, owner, repo, path, ref or "")
        files = self.app.files
        cached = files.get(key)
        url_vars: UrlVars = {"owner": owner, "repo": repo, "path": path.split("/"), "ref": ref or None}
        try:
            answer = await self._call(
                "GET", REPO + "/contents{/path*}{?ref}", url_vars, etag=cached.etag if cached else ""
            )
        except GitHubError as error:
            if error.status == 404:
                files.put(key, absent(files.clock()))
                return None
            raise
        if answer.status == 304 and cached is not None:
            files.hits += 1
            return files.confirm(key, cached).text
        text = _file_text(answer.data)
        etag = answer.headers.get("etag")
        if etag:
            sha = answer.data.get("sha") if isinstance(answer.data, dict) else None
            files.put(key, CachedFile(etag, sha if isinstance(sha, str) else None, text, files.clock()))
        else:
            files.drop(key)
        return text

    # --- issues and comments --------------------------------------------------------------------

    async def get_issue(self, owner: str, repo: str, number: int) -> Issue:
        return Issue.model_validate(await self._get(owner, repo, "/issues/{number}", number=number))

    async def list_comments(
        self, owner: str, repo: str, number: int, *, limit: int = 1000, since: float | None = None
    ) -> list[Comment]:
        """Comments on an issue; with `since` (epoch seconds), only those updated since then."""
        stamp = None if since is None else _iso(since)
        items = await self._list(
            owner, repo, "/issues/{number}/comments{?since,per_page}", limit, number=number, since=stamp
        )
        return [Comment.model_validate(item) for item in items]

    async def create_comment(self, owner: str, repo: str, number: int, body: str) -> Comment:
        url = "/issues/{number}/comments"
        return Comment.model_validate(
            await self._send("POST", owner, repo, url, {"body": body}, number=number)
        )

    async def update_comment(self, owner: str, repo: str, comment_id: int, body: str) -> Comment:
        url = "/issues/comments/{id}"
        return Comment.model_validate(
            await self._send("PATCH", owner, repo, url, {"body": body}, id=comment_id)
        )

    async def get_comment(self, owner: str, repo: str, comment_id: int) -> Comment:
        return Comment.model_validate(await self._get(owner, repo, "/issues/comments/{id}", id=comment_id))

    # --- reactions ------------------------------------------------------------------------------

    async def add_reaction(
        self,
        owner: str,
        repo: str,
        comment_id: int,
        content: ReactionContent,
        *,
        review_comment: bool = False,
    ) -> Reaction:
        url, kind = "/{kind}/comments/{id}/reactions", "pulls" if review_comment else "issues"
        body = await self._send("POST", owner, repo, url, {"content": content}, kind=kind, id=comment_id)
        return Reaction.model_validate(body)

    async def list_reactions(
        self, owner: str, repo: str, comment_id: int, etag: str | None = None, *, review_comment: bool = False
    ) -> tuple[list[Reaction] | None, str | None]:
        """Reactions on a comment, or None when unchanged since `etag` (a 304 costs no rate limit)."""
        kind = "pulls" if review_comment else "issues"
        url_vars: UrlVars = {"owner": owner, "repo": repo, "kind": kind, "id": comment_id}
        url = REPO + "/{kind}/comments/{id}/reactions{?per_page}"
        first = await self._call("GET", url, {**url_vars, "per_page": PER_PAGE}, etag=etag or "")
        if first.status == 304:
            return None, etag
        items, etag_out = list(first.data), first.headers.get("etag")
        if first.next_url is not None:
            items += await self._pages(first.next_url, limit=10_000)
            # The ETag covers the first page only, and new reactions land on the last one:
            # without it the next poll asks unconditionally instead of missing an answer.
            etag_out = None
        return [Reaction.model_validate(item) for item in items], etag_out

    # --- pull requests --------------------------------------------------------------------------

    async def get_pull(self, owner: str, repo: str, number: int) -> PullRequest:
        return PullRequest.model_validate(await self._get(owner, repo, "/pulls/{number}", number=number))

    async def list_pull_files(
        self, owner: str, repo: str, number: int, *, max_files: int = MAX_PULL_FILES
    ) -> list[PullFile]:
        items = await self._list(owner, repo, "/pulls/{number}/files{?per_page}", max_files, number=number)
        return [PullFile.model_validate(item) for item in items]

    async def list_review_comments(
        self, owner: str, repo: str, number: int, *, limit: int = 300
    ) -> list[ReviewComment]:
        """The review comments on a pull request's diff, oldest first (REST says nothing of threads
        being resolved; that is GraphQL only)."""
        items = await self._list(owner, repo, "/pulls/{number}/comments{?per_page}", limit, number=number)
        return [ReviewComment.model_validate(item) for item in items]

    async def create_review(
        self,
        owner: str,
        repo: str,
        number: int,
        commit_id: str,
        body: str,
        event: ReviewEvent = "COMMENT",
        comments: Iterable[InlineComment | Mapping[str, Any]] = (),
    ) -> Review:
        """One submitted review; inline comments may be InlineComment or {path, line, side, body} dicts."""
        payload: dict[str, Any] = {"commit_id": commit_id, "body": body, "event": event}
        inline = [InlineComment.model_validate(c).model_dump(exclude_none=True) for c in comments]
        if inline:
            payload["comments"] = inline
        return Review.model_validate(
            await self._send("POST", owner, repo, "/pulls/{number}/reviews", payload, number=number)
        )

    async def create_pull(
        self, owner: str, repo: str, title: str, head: str, base: str, body: str = "", draft: bool = False
    ) -> PullRequest:
        payload = {"title": title, "head": head, "base": base, "body": body, "draft": draft}
        return PullRequest.model_validate(await self._send("POST", owner, repo, "/pulls", payload))

    async def reply_to_review_comment(
        self, owner: str, repo: str, pull_number: int, comment_id: int, body: str
    ) -> ReviewComment:
        url, payload = "/pulls/{number}/comments/{id}/replies", {"body": body}
        return ReviewComment.model_validate(
            await self._send("POST", owner, repo, url, payload, number=pull_number, id=comment_id)
        )

    async def get_review_comment(self, owner: str, repo: str, comment_id: int) -> ReviewComment:
        return ReviewComment.model_validate(
            await self._get(owner, repo, "/pulls/comments/{id}", id=comment_id)
        )

    async def compare(self, owner: str, repo: str, base: str, head: str) -> Comparison | None:
        """`base...head`, or None when GitHub no longer knows one of them (a force-push dropped it)."""
        try:
            body = await self._get(
                owner, repo, "/compare/{base}...{head}{?per_page}", base=base, head=head, per_page=PER_PAGE
            )
        except GitHubError as error:
            if error.status in (404, 422):
                return None
            raise
        return Comparison.model_validate(body)

    # --- check runs -----------------------------------------------------------------------------

    async def create_check_run(
        self, owner: str, repo: str, name: str, head_sha: str, *, external_id: str | None = None
    ) -> CheckRun:
        payload = {"name": name, "head_sha": head_sha, "status": "queued"}
        if external_id is not None:
            payload["external_id"] = external_id
        return CheckRun.model_validate(await self._send("POST", owner, repo, "/check-runs", payload))

    async def update_check_run(self, owner: str, repo: str, check_run_id: int, **fields: Any) -> CheckRun:
        """PATCH a check run: status, conclusion, started_at, completed_at, output, details_url."""
        return CheckRun.model_validate(
            await self._send("PATCH", owner, repo, "/check-runs/{id}", fields, id=check_run_id)
        )

    # --- listings: how a retried job finds what an earlier attempt wrote (bot/app/effects) -------

    async def list_reviews(self, owner: str, repo: str, number: int, *, limit: int = 1000) -> list[Review]:
        items = await self._list(owner, repo, "/pulls/{number}/reviews{?per_page}", limit, number=number)
        return [Review.model_validate(item) for item in items]

    async def list_check_runs(self, owner: str, repo: str, ref: str, name: str) -> list[CheckRun]:
        """The check runs named `name` of commit `ref` (the newest 100: a commit has few)."""
        url = "/commits/{ref}/check-runs{?check_name,filter,per_page}"
        body = await self._get(owner, repo, url, ref=ref, check_name=name, filter="all", per_page=PER_PAGE)
        return [CheckRun.model_validate(item) for item in body.get("check_runs") or []]

    async def list_open_pulls(self, owner: str, repo: str, head: str) -> list[PullRequest]:
        """Open pull requests whose head is `head` (`owner:branch`)."""
        items = await self._list(owner, repo, "/pulls{?state,head,per_page}", 100, state="open", head=head)
        return [PullRequest.model_validate(item) for item in items]


# What the rest of the app imports from here (the models' home is models.py).
__all__ = [
    "CheckRun",
    "GitHubApi",
    "GitHubApp",
    "GitHubError",
    "InlineComment",
    "InstallationClient",
    "PullFile",
    "PullRequest",
    "ReactionContent",
    "RetryPolicy",
    "convert_manifest",
    "event_client",
]
