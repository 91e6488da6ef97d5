"""The webhook fields the bot uses, as small pydantic models; everything else in a payload is ignored.

Parsing only what we read keeps the bot working when GitHub adds fields, and makes a payload that
lacks a field we need fail loudly at one place.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class User(_Model):
    login: str
    id: int = 0
    type: str = "User"

    @property
    def noreply_email(self) -> str:
        """GitHub's private commit email for the user, so a `Co-authored-by:` trailer links to them."""
        prefix = f"{self.id}+" if self.id else ""
        return f"{prefix}{self.login}@users.noreply.github.com"

    @property
    def is_bot(self) -> bool:
        return self.type == "Bot" or self.login.endswith("[bot]")


class Owner(_Model):
    login: str


class Repository(_Model):
    full_name: str
    name: str
    owner: Owner
    default_branch: str = "main"
    clone_url: str = ""
    html_url: str = ""
    private: bool = False


class Installation(_Model):
    id: int


class IssuePullLink(_Model):
    url: str | None = None


class Issue(_Model):
    number: int
    title: str = ""
    body: str | None = None
    user: User | None = None
    pull_request: IssuePullLink | None = None
    state: str = "open"

    @property
    def is_pull_request(self) -> bool:
        return self.pull_request is not None


class Comment(_Model):
    id: int
    body: str = ""
    user: User
    html_url: str = ""
    # Review comments only: the file and line the comment is on.
    path: str | None = None
    line: int | None = None
    original_line: int | None = None
    diff_hunk: str | None = None


class PullRef(_Model):
    ref: str
    sha: str


class PullRequest(_Model):
    number: int
    title: str = ""
    body: str | None = None
    head: PullRef
    base: PullRef


class CommentEvent(_Model):
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


class PullRequestEvent(_Model):
    action: str
    number: int
    pull_request: PullRequest
    repository: Repository
    installation: Installation | None = None
