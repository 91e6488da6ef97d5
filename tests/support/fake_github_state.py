"""In-memory state of the fake GitHub and the helpers tests use to seed it.

Owner and repository names are case-insensitive on GitHub, so repositories are keyed by the
lower-cased full name. Issue comments and review comments share one id counter: ids stay unique,
which lets `add_reaction(comment_id, ...)` work without naming the repository.
"""

from __future__ import annotations

import itertools
import secrets
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

PERMISSIONS = ("admin", "maintain", "write", "triage", "read", "none")
REACTIONS = ("+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes")


def iso(moment: float) -> str:
    return datetime.fromtimestamp(moment, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class User:
    login: str
    id: int
    type: str = "User"


@dataclass
class Installation:
    id: int
    account: str
    account_type: str = "Organization"
    suspended: bool = False


@dataclass
class PullFile:
    filename: str
    status: str = "modified"
    additions: int = 1
    deletions: int = 0
    patch: str | None = None
    previous_filename: str | None = None


@dataclass
class Issue:
    number: int
    title: str
    body: str | None
    user: str
    state: str = "open"
    created_at: float = 0.0


@dataclass
class Pull(Issue):
    head_ref: str = "feature"
    head_sha: str = "0" * 40
    head_repo: str | None = None
    base_ref: str = "main"
    base_sha: str = "1" * 40
    draft: bool = False
    files: list[PullFile] = field(default_factory=list)
    commits: list[str] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)


@dataclass
class Comment:
    id: int
    repo: str
    number: int
    body: str
    user: str
    created_at: float
    updated_at: float
    review: bool = False
    path: str | None = None
    line: int | None = None
    side: str = "RIGHT"
    commit_id: str | None = None
    review_id: int | None = None
    in_reply_to: int | None = None


@dataclass
class Reaction:
    id: int
    comment_id: int
    user: str
    content: str
    created_at: float


@dataclass
class CheckRun:
    id: int
    repo: str
    name: str
    head_sha: str
    status: str
    conclusion: str | None = None
    output: dict[str, Any] | None = None
    details_url: str | None = None
    history: list[str] = field(default_factory=list)  # every status it went through, in order
    external_id: str | None = None


@dataclass
class Review:
    id: int
    repo: str
    number: int
    user: str
    commit_id: str
    body: str
    event: str | None
    comment_ids: list[int]
    submitted_at: float


@dataclass
class Repo:
    owner: str
    name: str
    id: int
    installation_id: int
    default_branch: str = "main"
    private: bool = False
    collaborators: dict[str, str] = field(default_factory=dict)
    files: dict[tuple[str, str], str] = field(default_factory=dict)
    issues: dict[int, Issue] = field(default_factory=dict)

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.name}"

    def next_number(self) -> int:
        return max(self.issues, default=0) + 1


@dataclass
class ManifestApp:
    id: int
    slug: str
    name: str
    pem: str
    webhook_secret: str
    client_id: str
    client_secret: str
    owner: str


@dataclass
class Grant:
    """A code the authorize page handed out: one exchange, for this client, redirect and challenge."""

    login: str
    client_id: str
    redirect_uri: str
    challenge: str | None
    method: str | None


@dataclass
class OAuthState:
    """The fake github.com's side of sign-in: who is signed in there, codes, clients, user tokens."""

    signed_in: str = "octocat"
    clients: dict[str, str] = field(default_factory=dict)  # client id -> client secret
    grants: dict[str, Grant] = field(default_factory=dict)
    tokens: dict[str, str] = field(default_factory=dict)  # user token -> login
    org_roles: dict[tuple[str, str], str] = field(default_factory=dict)  # (org, login) -> admin|member
    authorized: list[str] = field(default_factory=list)  # logins that pressed "Authorize"
    refused: list[str] = field(default_factory=list)  # why exchanges were refused

    def mint(self, login: str) -> str:
        token = "ghu_" + secrets.token_urlsafe(27)
        self.tokens[token] = login
        return token

    def revoke(self, login: str) -> None:
        for token, owner in list(self.tokens.items()):
            if owner == login:
                del self.tokens[token]


class FakeState:
    """Everything the fake GitHub knows; seed it directly from tests, before or between requests."""

    def __init__(self, *, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self._ids = itertools.count(1000)
        self.users: dict[str, User] = {}
        self.installations: dict[int, Installation] = {}
        self.repos: dict[str, Repo] = {}
        self.comments: dict[int, Comment] = {}
        self.reactions: dict[int, Reaction] = {}
        self.reviews: dict[int, Review] = {}
        self.check_runs: dict[int, CheckRun] = {}
        self.manifest_codes: dict[str, ManifestApp] = {}
        self.oauth = OAuthState()  # the user-authorization flow (fake_github_oauth.py)

    def new_id(self) -> int:
        return next(self._ids)

    # --- seeding helpers -------------------------------------------------------------------------

    def add_user(self, login: str, *, type: str = "User") -> User:
        user = self.users.get(login.lower())
        if user is None:
            user = User(login, self.new_id(), type)
            self.users[login.lower()] = user
        return user

    def add_bot(self, login: str) -> User:
        return self.add_user(login, type="Bot")

    def add_installation(
        self, installation_id: int, account: str, *, account_type: str = "Organization"
    ) -> Installation:
        self.add_user(account)
        installation = Installation(installation_id, account, account_type)
        self.installations[installation_id] = installation
        return installation

    def add_repo(
        self,
        full_name: str,
        *,
        installation_id: int = 1,
        default_branch: str = "main",
        private: bool = False,
    ) -> Repo:
        owner, name = full_name.split("/")
        if installation_id not in self.installations:
            self.add_installation(installation_id, owner)
        self.add_user(owner)
        repo = Repo(owner, name, self.new_id(), installation_id, default_branch, private)
        self.repos[full_name.lower()] = repo
        return repo

    def repo(self, full_name: str) -> Repo:
        return self.repos[full_name.lower()]

    def add_collaborator(self, full_name: str, login: str, permission: str = "write") -> None:
        if permission not in PERMISSIONS:
            raise ValueError(f"unknown permission {permission!r}")
        self.add_user(login)
        self.repo(full_name).collaborators[login.lower()] = permission

    def add_issue(
        self,
        full_name: str,
        *,
        number: int | None = None,
        title: str = "An issue",
        body: str | None = "",
        user: str = "octocat",
        state: str = "open",
    ) -> Issue:
        repo = self.repo(full_name)
        self.add_user(user)
        issue = Issue(number or repo.next_number(), title, body, user, state, self.clock())
        repo.issues[issue.number] = issue
        return issue

    def add_pull(
        self,
        full_name: str,
        *,
        number: int | None = None,
        title: str = "A change",
        body: str | None = "",
        user: str = "octocat",
        head_ref: str = "feature",
        head_sha: str = "a" * 40,
        head_repo: str | None = None,
        base_ref: str | None = None,
        base_sha: str = "b" * 40,
        state: str = "open",
        draft: bool = False,
        files: Iterable[PullFile | str] = (),
    ) -> Pull:
        repo = self.repo(full_name)
        self.add_user(user)
        pull = Pull(
            number or repo.next_number(),
            title,
            body,
            user,
            state,
            self.clock(),
            head_ref=head_ref,
            head_sha=head_sha,
            head_repo=head_repo or repo.full_name,
            base_ref=base_ref or repo.default_branch,
            base_sha=base_sha,
            draft=draft,
            files=[f if isinstance(f, PullFile) else PullFile(f) for f in files],
            commits=[head_sha],
        )
        repo.issues[pull.number] = pull
        return pull

    def pull(self, full_name: str, number: int) -> Pull:
        issue = self.repo(full_name).issues[number]
        if not isinstance(issue, Pull):
            raise KeyError(f"{full_name}#{number} is an issue, not a pull request")
        return issue

    def add_comment(self, full_name: str, number: int, body: str, *, user: str = "octocat") -> Comment:
        self.add_user(user)
        now = self.clock()
        comment = Comment(self.new_id(), self.repo(full_name).full_name, number, body, user, now, now)
        self.comments[comment.id] = comment
        return comment

    def add_review_comment(
        self,
        full_name: str,
        number: int,
        body: str,
        *,
        user: str = "octocat",
        path: str = "README.md",
        line: int = 1,
        side: str = "RIGHT",
    ) -> Comment:
        comment = self.add_comment(full_name, number, body, user=user)
        comment.review, comment.path, comment.line, comment.side = True, path, line, side
        comment.commit_id = self.pull(full_name, number).head_sha
        return comment

    def add_reaction(self, comment_id: int, user: str, content: str) -> Reaction:
        if content not in REACTIONS:
            raise ValueError(f"unknown reaction {content!r}")
        self.add_user(user)
        reaction = Reaction(self.new_id(), comment_id, user, content, self.clock())
        self.reactions[reaction.id] = reaction
        return reaction

    def remove_reaction(self, reaction_id: int) -> None:
        del self.reactions[reaction_id]

    def set_file(self, full_name: str, ref: str, path: str, text: str) -> None:
        self.repo(full_name).files[(ref, path.strip("/"))] = text

    def register_manifest_code(
        self,
        code: str,
        *,
        app_id: int,
        slug: str,
        pem: str,
        webhook_secret: str = "whsec-test",  # noqa: S107 - a fake
        owner: str = "octo-org",
    ) -> ManifestApp:
        app = ManifestApp(
            app_id,
            slug,
            slug.replace("-", " ").title(),
            pem,
            webhook_secret,
            f"Iv1.{slug[:8]}{app_id}",
            f"secret-{app_id}-{slug}",
            owner,
        )
        self.manifest_codes[code] = app
        self.oauth.clients[app.client_id] = app.client_secret  # its user-authorization flow
        return app

    # --- queries tests use ----------------------------------------------------------------------

    def comments_on(self, full_name: str, number: int) -> list[Comment]:
        key = self.repo(full_name).full_name
        return [c for c in self.comments.values() if c.repo == key and c.number == number and not c.review]

    def reactions_on(self, comment_id: int) -> list[Reaction]:
        return [r for r in self.reactions.values() if r.comment_id == comment_id]

    def reviews_on(self, full_name: str, number: int) -> list[Review]:
        key = self.repo(full_name).full_name
        return [r for r in self.reviews.values() if r.repo == key and r.number == number]

    def pulls_of(self, full_name: str) -> list[Pull]:
        return [i for i in self.repo(full_name).issues.values() if isinstance(i, Pull)]

    def snapshot(self) -> dict[str, Any]:
        """A plain summary for assertion messages."""
        return {
            "repos": sorted(r.full_name for r in self.repos.values()),
            "comments": {c.id: (c.repo, c.number, c.user, c.body[:60]) for c in self.comments.values()},
            "reactions": {r.id: (r.comment_id, r.user, r.content) for r in self.reactions.values()},
        }
