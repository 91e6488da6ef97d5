"""What the fake GitHub's endpoint handlers share: the registry by operation id, replies, paging.

Handlers (fake_github_ops_*.py) run only after route, parameter, body and credential checks
(fake_github.py), so each deals with GitHub's own semantics: 404 for what the installation cannot
see, 422 for a review line outside the diff or a duplicate pull request, 200 instead of 201 for a
repeated reaction.
"""

from __future__ import annotations

import math
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from tests.support.fake_github_render import Render
from tests.support.fake_github_state import Comment, FakeState, Pull, Repo

MAX_PULL_FILES = 3000  # GitHub lists at most 3000 files of a pull request


class Answer(Exception):
    """Raised by a handler to answer with an error the way GitHub words it."""

    def __init__(self, status: int, message: str, errors: list[Any] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.errors = errors


@dataclass
class Reply:
    status: int
    body: Any
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Ctx:
    """One validated request, as handlers see it."""

    params: dict[str, Any]
    query: dict[str, str]
    body: Any
    url: str
    render: Render
    installation_id: int | None = None
    user: str | None = None  # the login behind a user token (fake_github_oauth.py)


Handler = Callable[["FakeHandlers", Ctx], Reply]
HANDLERS: dict[str, Handler] = {}


def operation(operation_id: str) -> Callable[[Handler], Handler]:
    def register(handler: Handler) -> Handler:
        HANDLERS[operation_id] = handler
        return handler

    return register


def diff_lines(patch: str) -> tuple[set[int], set[int]]:
    """Lines a review comment may target in a unified diff hunk list: (LEFT side, RIGHT side)."""
    left: set[int] = set()
    right: set[int] = set()
    old = new = 0
    for line in patch.splitlines():
        header = re.match(r"@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@", line)
        if header:
            old, new = int(header[1]), int(header[2])
        elif line.startswith("+"):
            right.add(new)
            new += 1
        elif line.startswith("-"):
            left.add(old)
            old += 1
        elif not line.startswith("\\"):
            left.add(old)
            right.add(new)
            old, new = old + 1, new + 1
    return left, right


def _page_url(url: str, page: int) -> str:
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query) if k != "page"] + [("page", str(page))]
    return urlunsplit(parts._replace(query=urlencode(query)))


def paginate(ctx: Ctx, items: list[Any]) -> Reply:
    per_page = min(int(ctx.query.get("per_page", 30)), 100)
    page = max(int(ctx.query.get("page", 1)), 1)
    last = max(1, math.ceil(len(items) / per_page))
    links = []
    if page < last:
        links += [
            f'<{_page_url(ctx.url, page + 1)}>; rel="next"',
            f'<{_page_url(ctx.url, last)}>; rel="last"',
        ]
    if page > 1:
        links += [f'<{_page_url(ctx.url, page - 1)}>; rel="prev"', f'<{_page_url(ctx.url, 1)}>; rel="first"']
    headers = {"Link": ", ".join(links)} if links else {}
    return Reply(200, items[(page - 1) * per_page : page * per_page], headers)


class FakeHandlers(FakeState):
    """State plus the App's identity and token issuing, which several handlers need."""

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.time,
        app_id: int = 4242,
        app_slug: str = "beam-bot",
        app_owner: str = "beam-org",
        token_lifetime: float = 3600.0,
    ) -> None:
        super().__init__(clock=clock)
        self.app_id = app_id
        self.app_slug = app_slug
        self.app_owner = app_owner
        self.token_lifetime = token_lifetime
        self.tokens: dict[str, tuple[int, float]] = {}
        self.token_requests: list[int] = []
        self.ref_resolver: Callable[[str, str], str | None] | None = None
        # (repo, base, head) -> (status, ahead_by, behind_by, files) or None (unknown commit: 404)
        self.compare_resolver: Callable[[str, str, str], Any] | None = None
        self.add_bot(self.bot_login)

    @property
    def bot_login(self) -> str:
        return f"{self.app_slug}[bot]"

    def mint_token(self, installation_id: int) -> tuple[str, float]:
        token = "ghs_" + secrets.token_urlsafe(27)
        expires_at = self.clock() + self.token_lifetime
        self.tokens[token] = (installation_id, expires_at)
        self.token_requests.append(installation_id)
        return token, expires_at

    def visible_repo(self, ctx: Ctx) -> Repo:
        repo = self.repos.get(f"{ctx.params['owner']}/{ctx.params['repo']}".lower())
        if repo is None or (ctx.installation_id is not None and repo.installation_id != ctx.installation_id):
            raise Answer(404, "Not Found")
        return repo

    def issue_comment(self, ctx: Ctx, repo: Repo) -> Comment:
        comment = self.comments.get(ctx.params["comment_id"])
        if comment is None or comment.review or comment.repo != repo.full_name:
            raise Answer(404, "Not Found")
        return comment

    def review_comment(self, ctx: Ctx, repo: Repo) -> Comment:
        comment = self.comments.get(ctx.params["comment_id"])
        if comment is None or not comment.review or comment.repo != repo.full_name:
            raise Answer(404, "Not Found")
        return comment

    def pull_of(self, ctx: Ctx, repo: Repo) -> Pull:
        issue = repo.issues.get(ctx.params["pull_number"])
        if not isinstance(issue, Pull):
            raise Answer(404, "Not Found")
        return issue

    def react(self, ctx: Ctx, comment: Comment) -> Reply:
        content = ctx.body["content"]
        for existing in self.reactions_on(comment.id):
            if existing.user == self.bot_login and existing.content == content:
                return Reply(200, ctx.render.reaction(existing))
        return Reply(201, ctx.render.reaction(self.add_reaction(comment.id, self.bot_login, content)))

    def check_review_comment(self, pull: Pull, item: dict[str, Any]) -> None:
        if "line" not in item and "position" not in item:
            raise Answer(422, "Unprocessable Entity", ["Either position or line must be given"])
        if not pull.files:
            return
        entry = next((f for f in pull.files if f.filename == item["path"]), None)
        if entry is None:
            raise Answer(422, "Unprocessable Entity", ["Path could not be resolved"])
        if entry.patch is not None and "line" in item:
            left, right = diff_lines(entry.patch)
            if item["line"] not in (left if item.get("side") == "LEFT" else right):
                raise Answer(422, "Unprocessable Entity", ["Line could not be resolved"])
