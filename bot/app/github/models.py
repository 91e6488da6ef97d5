"""Small pydantic models of the GitHub REST answers the bot reads: only the fields it uses.

Unknown fields are ignored, so GitHub adding fields never breaks parsing; secrets from a manifest
conversion are `SecretStr`, so they never print in a log line or a repr.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, SecretStr

ReactionContent = Literal["+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes"]
Permission = Literal["admin", "write", "read", "none"]
ReviewEvent = Literal["COMMENT", "REQUEST_CHANGES"]  # never APPROVE: the bot does not approve changes


class GitHubModel(BaseModel):
    """Base of every model of GitHub data, from the REST API or a webhook payload."""

    model_config = ConfigDict(extra="ignore", frozen=True)


def is_bot_login(login: str) -> bool:
    """App bots act as `<slug>[bot]`; the suffix marks them even where `type` is missing."""
    return login.lower().endswith("[bot]")


class Account(GitHubModel):
    login: str
    id: int = 0
    type: str = "User"

    @property
    def is_bot(self) -> bool:
        return self.type == "Bot" or is_bot_login(self.login)

    @property
    def noreply_email(self) -> str:
        """GitHub's private commit email for the user, so a `Co-authored-by:` trailer links to them."""
        prefix = f"{self.id}+" if self.id else ""
        return f"{prefix}{self.login}@users.noreply.github.com"


class HookDelivery(GitHubModel):
    """One attempt of the App's webhook (`GET /app/hook/deliveries`): `guid` is the event's
    X-GitHub-Delivery, shared by its redeliveries; `status_code` 0 when nothing answered."""

    id: int
    guid: str
    delivered_at: datetime
    redelivery: bool = False
    status_code: int = 0
    status: str = ""
    event: str = ""
    action: str | None = None

    @property
    def succeeded(self) -> bool:
        return 200 <= self.status_code < 300


class AppInfo(GitHubModel):
    id: int
    slug: str
    name: str = ""
    html_url: str = ""
    owner: Account | None = None

    @property
    def bot_login(self) -> str:
        """The login the App's installation tokens act as, e.g. `beam-bot[bot]`."""
        return f"{self.slug}[bot]"


class Installation(GitHubModel):
    id: int
    app_id: int | None = None
    account: Account | None = None


class RepoRef(GitHubModel):
    full_name: str
    clone_url: str | None = None
    private: bool = False
    fork: bool = False


class Repository(GitHubModel):
    id: int
    name: str
    full_name: str
    owner: Account
    private: bool
    default_branch: str
    clone_url: str
    html_url: str
    fork: bool = False


class Comment(GitHubModel):
    id: int
    body: str | None = None
    html_url: str
    user: Account | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None


class ReviewComment(Comment):
    pull_request_review_id: int | None = None
    path: str | None = None
    line: int | None = None
    in_reply_to_id: int | None = None
    diff_hunk: str | None = None
    commit_id: str | None = None


class Label(GitHubModel):
    name: str


class CheckRun(GitHubModel):
    id: int
    status: str
    conclusion: str | None = None
    html_url: str | None = None
    external_id: str | None = None


class Reaction(GitHubModel):
    id: int
    content: str
    user: Account | None = None


class PullRef(GitHubModel):
    ref: str
    sha: str
    repo: RepoRef | None = None


class PullRequest(GitHubModel):
    number: int
    title: str
    body: str | None = None
    state: str
    draft: bool = False
    html_url: str
    user: Account | None = None
    head: PullRef
    base: PullRef
    changed_files: int | None = None
    labels: list[Label] = []

    @property
    def from_fork(self) -> bool:
        """Whether the head branch lives elsewhere (or its repository was deleted)."""
        if self.head.repo is None or self.base.repo is None:
            return True
        return self.head.repo.full_name.lower() != self.base.repo.full_name.lower()


class PullFile(GitHubModel):
    filename: str
    status: str
    additions: int = 0
    deletions: int = 0
    changes: int = 0
    patch: str | None = None
    previous_filename: str | None = None


class Comparison(GitHubModel):
    """`GET /compare/{base}...{head}`: `ahead` means base is an ancestor of head."""

    status: str
    ahead_by: int = 0
    behind_by: int = 0
    files: list[PullFile] = []


class Issue(GitHubModel):
    number: int
    title: str
    body: str | None = None
    state: str
    html_url: str
    user: Account | None = None
    pull_request: dict[str, Any] | None = None

    @property
    def is_pull_request(self) -> bool:
        return self.pull_request is not None


class Review(GitHubModel):
    id: int
    html_url: str
    state: str
    commit_id: str | None = None
    body: str | None = None


class InlineComment(GitHubModel):
    """One inline comment of a review, anchored on a line of the diff (`side` RIGHT = new file)."""

    path: str
    line: int
    body: str
    side: Literal["LEFT", "RIGHT"] = "RIGHT"
    start_line: int | None = None
    start_side: Literal["LEFT", "RIGHT"] | None = None


class ManifestConversion(GitHubModel):
    id: int
    slug: str
    name: str = ""
    html_url: str = ""
    client_id: str
    client_secret: SecretStr
    webhook_secret: SecretStr | None = None
    pem: SecretStr


class InstallationToken(GitHubModel):
    token: SecretStr
    expires_at: datetime
