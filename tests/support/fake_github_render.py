"""JSON shapes of the fake GitHub's answers, built on GitHub's own examples from the OpenAPI subset.

Starting from the documented example and overwriting the fields the state knows keeps every other
field present with a plausible value, so the answers validate against GitHub's response schemas
(tests/app/test_fake_github.py checks that) and a client that reads an unexpected field still works.
"""

from __future__ import annotations

import base64
import copy
import hashlib
from dataclasses import dataclass
from typing import Any

from tests.support.fake_github_spec import RestSpec
from tests.support.fake_github_state import (
    Comment,
    FakeState,
    Installation,
    Issue,
    ManifestApp,
    Pull,
    PullFile,
    Reaction,
    Repo,
    Review,
    iso,
)


def _example(name: str) -> Any:
    return copy.deepcopy(RestSpec.load().document["components"]["examples"][name]["value"])


def example(name: str) -> dict[str, Any]:
    """A fresh copy of one of GitHub's documented example objects."""
    value = _example(name)
    assert isinstance(value, dict)
    return value


@dataclass(frozen=True)
class Urls:
    """Where the fake says things live: its own API root, the web UI and the git server."""

    api: str
    web: str
    git: str


class Render:
    def __init__(self, state: FakeState, urls: Urls) -> None:
        self.state = state
        self.urls = urls

    def user(self, login: str) -> dict[str, Any]:
        known = self.state.add_user(login)
        out: dict[str, Any] = example("issue-comment")["user"]
        out.update(
            login=known.login,
            id=known.id,
            type=known.type,
            url=f"{self.urls.api}/users/{known.login}",
            html_url=f"{self.urls.web}/{known.login}",
        )
        return out

    def repo(self, repo: Repo) -> dict[str, Any]:
        out = example("full-repository-default-response")
        out.update(
            id=repo.id,
            name=repo.name,
            full_name=repo.full_name,
            owner=self.user(repo.owner),
            private=repo.private,
            visibility="private" if repo.private else "public",
            html_url=f"{self.urls.web}/{repo.full_name}",
            url=f"{self.urls.api}/repos/{repo.full_name}",
            clone_url=f"{self.urls.git}/{repo.full_name}.git",
            git_url=f"{self.urls.git}/{repo.full_name}.git",
            default_branch=repo.default_branch,
            fork=False,
            language=None,  # required by the schema, absent from GitHub's own example
        )
        for key in ("parent", "source", "template_repository", "organization"):
            out.pop(key, None)
        return out

    def installation(self, installation: Installation, app_id: int, app_slug: str) -> dict[str, Any]:
        out = example("installation")
        out.update(
            id=installation.id,
            app_id=app_id,
            app_slug=app_slug,
            target_type=installation.account_type,
            account=self.user(installation.account),
            access_tokens_url=f"{self.urls.api}/app/installations/{installation.id}/access_tokens",
            suspended_at=None,
            suspended_by=None,
        )
        return out

    def app(self, app_id: int, slug: str, owner: str) -> dict[str, Any]:
        out = example("integration")
        out.update(
            id=app_id,
            slug=slug,
            name=slug.replace("-", " ").title(),
            owner=self.user(owner),
            html_url=f"{self.urls.web}/apps/{slug}",
        )
        return out

    def manifest(self, app: ManifestApp) -> dict[str, Any]:
        out = example("integration-from-manifest")
        out.update(
            id=app.id,
            slug=app.slug,
            name=app.name,
            owner=self.user(app.owner),
            html_url=f"{self.urls.web}/apps/{app.slug}",
            pem=app.pem,
            webhook_secret=app.webhook_secret,
            client_id=app.client_id,
            client_secret=app.client_secret,
        )
        return out

    def _issue_urls(self, repo: str, number: int, kind: str) -> dict[str, str]:
        return {
            "url": f"{self.urls.api}/repos/{repo}/issues/{number}",
            "html_url": f"{self.urls.web}/{repo}/{kind}/{number}",
            "repository_url": f"{self.urls.api}/repos/{repo}",
            "comments_url": f"{self.urls.api}/repos/{repo}/issues/{number}/comments",
        }

    def issue(self, repo: Repo, issue: Issue) -> dict[str, Any]:
        out = example("issue")
        is_pull = isinstance(issue, Pull)
        out.update(self._issue_urls(repo.full_name, issue.number, "pull" if is_pull else "issues"))
        out.update(
            id=issue.number * 1000 + repo.id,
            number=issue.number,
            title=issue.title,
            body=issue.body,
            state=issue.state,
            user=self.user(issue.user),
            locked=False,
            active_lock_reason=None,
            assignee=None,
            assignees=[],
            milestone=None,
            labels=[],
            closed_by=None,
            state_reason=None,
            comments=len(self.state.comments_on(repo.full_name, issue.number)),
            created_at=iso(issue.created_at),
            updated_at=iso(issue.created_at),
        )
        if is_pull:
            pull_url = f"{self.urls.api}/repos/{repo.full_name}/pulls/{issue.number}"
            out["pull_request"] = {
                "url": pull_url,
                "html_url": out["html_url"],
                "diff_url": out["html_url"] + ".diff",
                "patch_url": out["html_url"] + ".patch",
                "merged_at": None,
            }
        else:
            out.pop("pull_request", None)
        return out

    def pull(self, repo: Repo, pull: Pull) -> dict[str, Any]:
        out = example("pull-request")
        html = f"{self.urls.web}/{repo.full_name}/pull/{pull.number}"
        head_repo = self.state.repos.get((pull.head_repo or "").lower())
        out.update(
            id=pull.number * 1000 + repo.id,
            number=pull.number,
            url=f"{self.urls.api}/repos/{repo.full_name}/pulls/{pull.number}",
            html_url=html,
            issue_url=f"{self.urls.api}/repos/{repo.full_name}/issues/{pull.number}",
            title=pull.title,
            body=pull.body,
            state=pull.state,
            draft=pull.draft,
            user=self.user(pull.user),
            merged=False,
            merged_at=None,
            closed_at=None,
            merged_by=None,
            milestone=None,
            assignee=None,
            assignees=[],
            labels=[self.label(repo, name) for name in pull.labels],
            requested_reviewers=[],
            requested_teams=[],
            changed_files=len(pull.files),
            created_at=iso(pull.created_at),
            updated_at=iso(pull.created_at),
        )
        head_owner = (pull.head_repo or repo.full_name).split("/")[0]
        out["head"].update(
            ref=pull.head_ref,
            sha=pull.head_sha,
            label=f"{head_owner}:{pull.head_ref}",
            user=self.user(head_owner),
            repo=self.repo(head_repo) if head_repo else None,
        )
        out["base"].update(
            ref=pull.base_ref,
            sha=pull.base_sha,
            label=f"{repo.owner}:{pull.base_ref}",
            user=self.user(repo.owner),
            repo=self.repo(repo),
        )
        return out

    def pull_file(self, repo: Repo, pull: Pull, item: PullFile) -> dict[str, Any]:
        out: dict[str, Any] = _example("diff-entry-items")[0]
        out.update(
            filename=item.filename,
            status=item.status,
            additions=item.additions,
            deletions=item.deletions,
            changes=item.additions + item.deletions,
            blob_url=f"{self.urls.web}/{repo.full_name}/blob/{pull.head_sha}/{item.filename}",
            raw_url=f"{self.urls.web}/{repo.full_name}/raw/{pull.head_sha}/{item.filename}",
            contents_url=f"{self.urls.api}/repos/{repo.full_name}/contents/{item.filename}?ref={pull.head_sha}",
        )
        if item.patch is None:
            out.pop("patch", None)
        else:
            out["patch"] = item.patch
        if item.previous_filename:
            out["previous_filename"] = item.previous_filename
        return out

    def comment(self, comment: Comment) -> dict[str, Any]:
        if comment.review:
            return self.review_comment(comment)
        out = example("issue-comment")
        repo = self.state.repo(comment.repo)
        issue = repo.issues.get(comment.number)
        kind = "pull" if isinstance(issue, Pull) else "issues"
        out.update(
            id=comment.id,
            url=f"{self.urls.api}/repos/{comment.repo}/issues/comments/{comment.id}",
            html_url=f"{self.urls.web}/{comment.repo}/{kind}/{comment.number}#issuecomment-{comment.id}",
            issue_url=f"{self.urls.api}/repos/{comment.repo}/issues/{comment.number}",
            body=comment.body,
            user=self.user(comment.user),
            created_at=iso(comment.created_at),
            updated_at=iso(comment.updated_at),
            author_association=self._association(repo, comment.user),
        )
        return out

    def review_comment(self, comment: Comment) -> dict[str, Any]:
        out = example("pull-request-review-comment")
        repo = self.state.repo(comment.repo)
        html = f"{self.urls.web}/{comment.repo}/pull/{comment.number}#discussion_r{comment.id}"
        out.update(
            id=comment.id,
            url=f"{self.urls.api}/repos/{comment.repo}/pulls/comments/{comment.id}",
            html_url=html,
            pull_request_url=f"{self.urls.api}/repos/{comment.repo}/pulls/{comment.number}",
            pull_request_review_id=comment.review_id,
            body=comment.body,
            path=comment.path,
            line=comment.line,
            original_line=comment.line,
            side=comment.side,
            start_line=None,
            original_start_line=None,
            start_side=None,
            commit_id=comment.commit_id,
            original_commit_id=comment.commit_id,
            user=self.user(comment.user),
            created_at=iso(comment.created_at),
            updated_at=iso(comment.updated_at),
            author_association=self._association(repo, comment.user),
        )
        if comment.in_reply_to is None:
            out.pop("in_reply_to_id", None)
        else:
            out["in_reply_to_id"] = comment.in_reply_to
        return out

    def label(self, repo: Repo, name: str) -> dict[str, Any]:
        return {
            "id": abs(hash(name)) % 10**9,
            "node_id": f"LA_{name}",
            "url": f"{self.urls.api}/repos/{repo.full_name}/labels/{name}",
            "name": name,
            "description": None,
            "color": "ededed",
            "default": False,
        }

    def reaction(self, reaction: Reaction) -> dict[str, Any]:
        out = example("reaction")
        out.update(
            id=reaction.id,
            user=self.user(reaction.user),
            content=reaction.content,
            created_at=iso(reaction.created_at),
        )
        return out

    def review(self, repo: Repo, review: Review) -> dict[str, Any]:
        out = example("pull-request-review")
        html = f"{self.urls.web}/{repo.full_name}/pull/{review.number}#pullrequestreview-{review.id}"
        state = {"COMMENT": "COMMENTED", "APPROVE": "APPROVED", "REQUEST_CHANGES": "CHANGES_REQUESTED"}
        out.update(
            id=review.id,
            user=self.user(review.user),
            body=review.body,
            state=state.get(review.event or "", "PENDING"),
            html_url=html,
            pull_request_url=f"{self.urls.api}/repos/{repo.full_name}/pulls/{review.number}",
            commit_id=review.commit_id,
            submitted_at=iso(review.submitted_at),
        )
        out["_links"] = {"html": {"href": html}, "pull_request": {"href": out["pull_request_url"]}}
        return out

    def file(self, repo: Repo, ref: str, path: str, text: str) -> dict[str, Any]:
        out = example("content-file-response-if-content-is-a-file")
        raw = text.encode()
        encoded = base64.encodebytes(raw).decode("ascii")  # GitHub wraps base64 at 60-76 columns
        url = f"{self.urls.api}/repos/{repo.full_name}/contents/{path}?ref={ref}"
        out.update(
            size=len(raw),
            name=path.rsplit("/", 1)[-1],
            path=path,
            content=encoded,
            sha=hashlib.sha1(b"blob %d\0" % len(raw) + raw).hexdigest(),  # noqa: S324 - git's blob id
            url=url,
            html_url=f"{self.urls.web}/{repo.full_name}/blob/{ref}/{path}",
            download_url=f"{self.urls.web}/{repo.full_name}/raw/{ref}/{path}",
        )
        out["_links"] = {"self": url, "git": out["git_url"], "html": out["html_url"]}
        return out

    def permission(self, repo: Repo, login: str, permission: str) -> dict[str, Any]:
        out = example("repository-collaborator-permission-response-if-user-has-admin-permissions")
        legacy = {"maintain": "write", "triage": "read"}.get(permission, permission)
        user = self.user(login)
        user["role_name"] = permission
        out.update(permission=legacy, role_name=permission, user=user)
        return out

    def _association(self, repo: Repo, login: str) -> str:
        if login.lower() == repo.owner.lower():
            return "OWNER"
        return "COLLABORATOR" if login.lower() in repo.collaborators else "NONE"
