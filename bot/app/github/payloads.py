"""The webhook fields the bot uses, as small pydantic models; everything else in a payload is ignored.

Parsing only what we read keeps the bot working when GitHub adds fields, and makes a payload that
lacks a field we need fail loudly at one place.
"""

from __future__ import annotations

from bot.app.github.models import Account as User
from bot.app.github.models import GitHubModel, Installation, Label, PullRequest


class Repository(GitHubModel):
    full_name: str
    name: str
    owner: User
    default_branch: str = "main"
    clone_url: str = ""
    html_url: str = ""
    private: bool = False


class IssuePullLink(GitHubModel):
    url: str | None = None


class Issue(GitHubModel):
    number: int
    title: str = ""
    body: str | None = None
    user: User | None = None
    pull_request: IssuePullLink | None = None
    state: str = "open"

    @property
    def is_pull_request(self) -> bool:
        return self.pull_request is not None


class Comment(GitHubModel):
    id: int
    body: str = ""
    user: User
    html_url: str = ""
    # Review comments only: the file and line the comment is on.
    path: str | None = None
    line: int | None = None
    original_line: int | None = None
    diff_hunk: str | None = None
    in_reply_to_id: int | None = None


class CommentEvent(GitHubModel):
    """`issue_comment` and `pull_request_review_comment`, reduced to one shape."""

    action: str
    comment: Comment
    repository: Repository
    sender: User
    installation: Installation | None = None
    issue: Issue | None = None
    pull_request: PullRequest | None = None

    @property
    def number(self) -> int:
        if self.issue is not None:
            return self.issue.number
        assert self.pull_request is not None
        return self.pull_request.number

    @property
    def on_pull_request(self) -> bool:
        return self.pull_request is not None or (self.issue is not None and self.issue.is_pull_request)

    @property
    def is_review_comment(self) -> bool:
        return self.issue is None and self.pull_request is not None


class PullRequestEvent(GitHubModel):
    action: str
    number: int
    pull_request: PullRequest
    repository: Repository
    installation: Installation | None = None
    sender: User | None = None
    label: Label | None = None  # labeled, unlabeled
    before: str | None = None  # synchronize: the head before and after the push
    after: str | None = None
