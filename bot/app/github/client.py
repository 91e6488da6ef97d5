"""The typed GitHub calls the bot makes for one installation, and the names the rest of the app imports.

Build once per process: `api = GitHubApi(http, base_url=...)`, `app = GitHubApp(api, app_id, key)`;
then per job `gh = InstallationClient(app, installation_id)`. Every call goes through GitHubApi, so
retries, rate-limit waits and the counters in `api.stats` apply to all of them.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

import httpx

from bot.app.fence import before_write
from bot.app.github.api import DEFAULT_API_URL, GitHubApi, GitHubError, GitHubStats, RetryPolicy
from bot.app.github.auth import GitHubApp, TokenCache, app_jwt
from bot.app.github.file_cache import CachedFile, absent
from bot.app.github.models import (
    Account,
    AppInfo,
    CheckRun,
    Comment,
    Comparison,
    InlineComment,
    Installation,
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


def _file_text(body: Any) -> str | None:
    if not isinstance(body, dict) or body.get("type") != "file" or body.get("encoding") != "base64":
        return None
    try:
        return base64.b64decode(body.get("content", "")).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None


def _seg(value: str | int) -> str:
    """One path segment, escaped: owner, repo and user names come from webhook payloads."""
    return quote(str(value), safe="")


def _iso(moment: float) -> str:
    """An ISO 8601 UTC timestamp, as GitHub's `since` parameters take it."""
    return datetime.fromtimestamp(moment, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _repo(owner: str, repo: str) -> str:
    return f"/repos/{_seg(owner)}/{_seg(repo)}"


async def convert_manifest(api: GitHubApi, code: str) -> ManifestConversion:
    """Trades the code GitHub hands back after the App-manifest flow for the new App's credentials."""
    response = await api.request("POST", f"/app-manifests/{_seg(code)}/conversions")
    return ManifestConversion.model_validate(response.json())


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
    """Calls made as one installation of the App (its token is fetched and renewed by GitHubApp)."""

    def __init__(self, app: GitHubApp, installation_id: int) -> None:
        self.app = app
        self.installation_id = installation_id

    def __repr__(self) -> str:
        return f"InstallationClient(installation_id={self.installation_id})"

    async def _call(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str | int] | None = None,
        json: Any = None,
        headers: Mapping[str, str] | None = None,
    ) -> httpx.Response:
        if method != "GET":
            await before_write()  # a job's write only while the job is still ours (fence.py)
        # The installation travels in the context so the transport can count its rate limit.
        with log_context(installation_id=self.installation_id):
            return await self._call_as_installation(method, path, params=params, json=json, headers=headers)

    async def _call_as_installation(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str | int] | None = None,
        json: Any = None,
        headers: Mapping[str, str] | None = None,
    ) -> httpx.Response:
        for attempt in (1, 2):
            token = await self.app.installation_token(self.installation_id)
            try:
                return await self.app.api.request(
                    method,
                    path,
                    auth=f"Bearer {token.get_secret_value()}",
                    params=params,
                    json=json,
                    headers=headers,
                )
            except GitHubError as error:
                # A revoked or rotated token: drop it and try once more with a new one.
                if error.status != 401 or attempt == 2:
                    raise
                self.app.invalidate_token(self.installation_id)
        raise AssertionError("unreachable")

    async def _pages(
        self, path: str, params: Mapping[str, str | int], limit: int, first: int = 1
    ) -> list[Any]:
        items: list[Any] = []
        page = first
        while len(items) < limit:
            response = await self._call("GET", path, params={**params, "per_page": PER_PAGE, "page": page})
            batch = response.json()
            items.extend(batch)
            if "next" not in response.links or not batch:
                break
            page += 1
        return items[:limit]

    # --- repositories ---------------------------------------------------------------------------

    async def get_repo(self, owner: str, repo: str) -> Repository:
        return Repository.model_validate((await self._call("GET", _repo(owner, repo))).json())

    async def get_permission(self, owner: str, repo: str, user: str) -> Permission:
        """The user's permission now; `none` when GitHub does not know them (404)."""
        path = f"{_repo(owner, repo)}/collaborators/{_seg(user)}/permission"
        try:
            response = await self._call("GET", path)
        except GitHubError as error:
            if error.status == 404:
                return "none"
            raise
        permission = response.json().get("permission")
        return permission if permission in ("admin", "write", "read") else "none"

    def recent_file(self, owner: str, repo: str, path: str, ref: str, max_age: float) -> CachedFile | None:
        """What `get_file` last got for this file, if GitHub confirmed it less than `max_age` seconds
        ago; None otherwise. Asks nothing (see file_cache)."""
        return self.app.files.fresh((self.installation_id, owner, repo, path, ref), max_age)

    async def get_file(self, owner: str, repo: str, path: str, ref: str | None = None) -> str | None:
        """A text file's contents at `ref`, or None when there is no such file (or it is a directory).

        Revalidated with the ETag of the last read (`GitHubApp.files`): an unchanged file costs a
        `304` and no rate limit."""
        params = {"ref": ref} if ref else None
        key = (self.installation_id, owner, repo, path, ref or "")
        files = self.app.files
        cached = files.get(key)
        try:
            response = await self._call(
                "GET",
                f"{_repo(owner, repo)}/contents/{quote(path, safe='/')}",
                params=params,
                headers={"If-None-Match": cached.etag} if cached is not None and cached.etag else None,
            )
        except GitHubError as error:
            if error.status == 404:
                files.put(key, absent(files.clock()))
                return None
            raise
        if response.status_code == 304 and cached is not None:
            files.hits += 1
            return files.confirm(key, cached).text
        body = response.json()
        text = _file_text(body)
        etag = response.headers.get("etag")
        if etag:
            sha = body.get("sha") if isinstance(body, dict) else None
            files.put(key, CachedFile(etag, sha if isinstance(sha, str) else None, text, files.clock()))
        else:
            files.drop(key)
        return text

    # --- issues and comments --------------------------------------------------------------------

    async def get_issue(self, owner: str, repo: str, number: int) -> Issue:
        return Issue.model_validate((await self._call("GET", f"{_repo(owner, repo)}/issues/{number}")).json())

    async def list_comments(
        self, owner: str, repo: str, number: int, *, limit: int = 1000, since: float | None = None
    ) -> list[Comment]:
        """Comments on an issue; with `since` (epoch seconds), only those updated since then."""
        params = {} if since is None else {"since": _iso(since)}
        items = await self._pages(f"{_repo(owner, repo)}/issues/{number}/comments", params, limit)
        return [Comment.model_validate(item) for item in items]

    async def create_comment(self, owner: str, repo: str, number: int, body: str) -> Comment:
        response = await self._call(
            "POST", f"{_repo(owner, repo)}/issues/{number}/comments", json={"body": body}
        )
        return Comment.model_validate(response.json())

    async def update_comment(self, owner: str, repo: str, comment_id: int, body: str) -> Comment:
        path = f"{_repo(owner, repo)}/issues/comments/{comment_id}"
        return Comment.model_validate((await self._call("PATCH", path, json={"body": body})).json())

    async def get_comment(self, owner: str, repo: str, comment_id: int) -> Comment:
        path = f"{_repo(owner, repo)}/issues/comments/{comment_id}"
        return Comment.model_validate((await self._call("GET", path)).json())

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
        kind = "pulls" if review_comment else "issues"
        path = f"{_repo(owner, repo)}/{kind}/comments/{comment_id}/reactions"
        return Reaction.model_validate((await self._call("POST", path, json={"content": content})).json())

    async def list_reactions(
        self, owner: str, repo: str, comment_id: int, etag: str | None = None
    ) -> tuple[list[Reaction] | None, str | None]:
        """Reactions on an issue comment, or None when unchanged since `etag` (a 304 costs no rate limit)."""
        path = f"{_repo(owner, repo)}/issues/comments/{comment_id}/reactions"
        headers = {"If-None-Match": etag} if etag else None
        response = await self._call("GET", path, params={"per_page": PER_PAGE}, headers=headers)
        if response.status_code == 304:
            return None, etag
        items = list(response.json())
        etag_out = response.headers.get("etag")
        if "next" in response.links:
            items += await self._pages(path, {}, limit=10_000, first=2)
            # The ETag covers the first page only, and new reactions land on the last one:
            # without it the next poll asks unconditionally instead of missing an answer.
            etag_out = None
        return [Reaction.model_validate(item) for item in items], etag_out

    # --- pull requests --------------------------------------------------------------------------

    async def get_pull(self, owner: str, repo: str, number: int) -> PullRequest:
        return PullRequest.model_validate(
            (await self._call("GET", f"{_repo(owner, repo)}/pulls/{number}")).json()
        )

    async def list_pull_files(
        self, owner: str, repo: str, number: int, *, max_files: int = MAX_PULL_FILES
    ) -> list[PullFile]:
        items = await self._pages(f"{_repo(owner, repo)}/pulls/{number}/files", {}, max_files)
        return [PullFile.model_validate(item) for item in items]

    async def list_review_comments(
        self, owner: str, repo: str, number: int, *, limit: int = 300
    ) -> list[ReviewComment]:
        """The review comments on a pull request's diff, oldest first (REST says nothing of threads
        being resolved; that is GraphQL only)."""
        items = await self._pages(f"{_repo(owner, repo)}/pulls/{number}/comments", {}, limit)
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
        response = await self._call("POST", f"{_repo(owner, repo)}/pulls/{number}/reviews", json=payload)
        return Review.model_validate(response.json())

    async def create_pull(
        self, owner: str, repo: str, title: str, head: str, base: str, body: str = "", draft: bool = False
    ) -> PullRequest:
        payload = {"title": title, "head": head, "base": base, "body": body, "draft": draft}
        response = await self._call("POST", f"{_repo(owner, repo)}/pulls", json=payload)
        return PullRequest.model_validate(response.json())

    async def reply_to_review_comment(
        self, owner: str, repo: str, pull_number: int, comment_id: int, body: str
    ) -> ReviewComment:
        path = f"{_repo(owner, repo)}/pulls/{pull_number}/comments/{comment_id}/replies"
        return ReviewComment.model_validate((await self._call("POST", path, json={"body": body})).json())

    async def get_review_comment(self, owner: str, repo: str, comment_id: int) -> ReviewComment:
        path = f"{_repo(owner, repo)}/pulls/comments/{comment_id}"
        return ReviewComment.model_validate((await self._call("GET", path)).json())

    async def compare(self, owner: str, repo: str, base: str, head: str) -> Comparison | None:
        """`base...head`, or None when GitHub no longer knows one of them (a force-push dropped it)."""
        path = f"{_repo(owner, repo)}/compare/{_seg(base)}...{_seg(head)}"
        try:
            response = await self._call("GET", path, params={"per_page": PER_PAGE})
        except GitHubError as error:
            if error.status in (404, 422):
                return None
            raise
        return Comparison.model_validate(response.json())

    # --- check runs -----------------------------------------------------------------------------

    async def create_check_run(
        self, owner: str, repo: str, name: str, head_sha: str, *, external_id: str | None = None
    ) -> CheckRun:
        payload = {"name": name, "head_sha": head_sha, "status": "queued"}
        if external_id is not None:
            payload["external_id"] = external_id
        response = await self._call("POST", f"{_repo(owner, repo)}/check-runs", json=payload)
        return CheckRun.model_validate(response.json())

    async def update_check_run(self, owner: str, repo: str, check_run_id: int, **fields: Any) -> CheckRun:
        """PATCH a check run: status, conclusion, started_at, completed_at, output, details_url."""
        path = f"{_repo(owner, repo)}/check-runs/{check_run_id}"
        return CheckRun.model_validate((await self._call("PATCH", path, json=fields)).json())

    # --- listings: how a retried job finds what an earlier attempt wrote (bot/app/effects) -------

    async def list_reviews(self, owner: str, repo: str, number: int, *, limit: int = 1000) -> list[Review]:
        items = await self._pages(f"{_repo(owner, repo)}/pulls/{number}/reviews", {}, limit)
        return [Review.model_validate(item) for item in items]

    async def list_check_runs(self, owner: str, repo: str, ref: str, name: str) -> list[CheckRun]:
        """The check runs named `name` of commit `ref` (the newest 100: a commit has few)."""
        path = f"{_repo(owner, repo)}/commits/{_seg(ref)}/check-runs"
        params: dict[str, str | int] = {"check_name": name, "filter": "all", "per_page": PER_PAGE}
        runs = (await self._call("GET", path, params=params)).json().get("check_runs") or []
        return [CheckRun.model_validate(item) for item in runs]

    async def list_open_pulls(self, owner: str, repo: str, head: str) -> list[PullRequest]:
        """Open pull requests whose head is `head` (`owner:branch`)."""
        items = await self._pages(f"{_repo(owner, repo)}/pulls", {"state": "open", "head": head}, 100)
        return [PullRequest.model_validate(item) for item in items]


__all__ = [
    "DEFAULT_API_URL",
    "MAX_PULL_FILES",
    "Account",
    "AppInfo",
    "CheckRun",
    "Comment",
    "Comparison",
    "GitHubApi",
    "GitHubApp",
    "GitHubError",
    "GitHubStats",
    "InlineComment",
    "Installation",
    "InstallationClient",
    "Issue",
    "ManifestConversion",
    "Permission",
    "PullFile",
    "PullRequest",
    "Reaction",
    "ReactionContent",
    "Repository",
    "RetryPolicy",
    "Review",
    "ReviewComment",
    "ReviewEvent",
    "TokenCache",
    "app_jwt",
    "convert_manifest",
]
