"""Fake GitHub endpoints for the App, repositories, issues and issue comments (see fake_github_handlers)."""

from __future__ import annotations

from datetime import UTC, datetime

from tests.support.fake_github_handlers import Answer, Ctx, FakeHandlers, Reply, operation, paginate
from tests.support.fake_github_state import iso

# --- the App ------------------------------------------------------------------------------------


@operation("apps/get-authenticated")
def get_app(fake: FakeHandlers, ctx: Ctx) -> Reply:
    return Reply(200, ctx.render.app(fake.app_id, fake.app_slug, fake.app_owner))


@operation("apps/create-installation-access-token")
def create_token(fake: FakeHandlers, ctx: Ctx) -> Reply:
    installation = fake.installations.get(ctx.params["installation_id"])
    if installation is None:
        raise Answer(404, "Not Found")
    if installation.suspended:
        raise Answer(403, "This installation has been suspended")
    token, expires_at = fake.mint_token(installation.id)
    return Reply(
        201,
        {
            "token": token,
            "expires_at": iso(expires_at),
            "permissions": {
                "contents": "write",
                "issues": "write",
                "pull_requests": "write",
                "metadata": "read",
            },
            "repository_selection": "all",
        },
    )


@operation("apps/get-repo-installation")
def get_repo_installation(fake: FakeHandlers, ctx: Ctx) -> Reply:
    repo = fake.visible_repo(ctx)
    installation = fake.installations[repo.installation_id]
    return Reply(200, ctx.render.installation(installation, fake.app_id, fake.app_slug))


@operation("apps/create-from-manifest")
def convert_manifest(fake: FakeHandlers, ctx: Ctx) -> Reply:
    app = fake.manifest_codes.pop(ctx.params["code"], None)  # a code converts once
    if app is None:
        raise Answer(404, "Not Found")
    return Reply(201, ctx.render.manifest(app))


# --- repositories -------------------------------------------------------------------------------


@operation("repos/get")
def get_repo(fake: FakeHandlers, ctx: Ctx) -> Reply:
    return Reply(200, ctx.render.repo(fake.visible_repo(ctx)))


@operation("repos/get-collaborator-permission-level")
def get_permission(fake: FakeHandlers, ctx: Ctx) -> Reply:
    repo = fake.visible_repo(ctx)
    login = ctx.params["username"]
    permission = repo.collaborators.get(login.lower())
    if permission is None:
        if login.lower() not in fake.users:
            raise Answer(404, f"{login} is not a user")
        # Anyone can read a public repository, and GitHub reports it that way.
        permission = "none" if repo.private else "read"
    return Reply(200, ctx.render.permission(repo, login, permission))


@operation("repos/get-content")
def get_content(fake: FakeHandlers, ctx: Ctx) -> Reply:
    repo = fake.visible_repo(ctx)
    ref = ctx.query.get("ref", repo.default_branch)
    path = ctx.params["path"].strip("/")
    text = repo.files.get((ref, path))
    if text is None:
        raise Answer(404, "Not Found")
    return Reply(200, ctx.render.file(repo, ref, path, text))


# --- issues and comments ------------------------------------------------------------------------


@operation("issues/get")
def get_issue(fake: FakeHandlers, ctx: Ctx) -> Reply:
    repo = fake.visible_repo(ctx)
    issue = repo.issues.get(ctx.params["issue_number"])
    if issue is None:
        raise Answer(404, "Not Found")
    return Reply(200, ctx.render.issue(repo, issue))


@operation("issues/list-comments")
def list_comments(fake: FakeHandlers, ctx: Ctx) -> Reply:
    repo = fake.visible_repo(ctx)
    if ctx.params["issue_number"] not in repo.issues:
        raise Answer(404, "Not Found")
    comments = fake.comments_on(repo.full_name, ctx.params["issue_number"])
    if "since" in ctx.query:  # "only comments updated at or after this time"
        since = datetime.strptime(ctx.query["since"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
        comments = [c for c in comments if c.updated_at >= since]
    return paginate(ctx, [ctx.render.comment(c) for c in comments])


@operation("issues/create-comment")
def create_comment(fake: FakeHandlers, ctx: Ctx) -> Reply:
    repo = fake.visible_repo(ctx)
    if ctx.params["issue_number"] not in repo.issues:
        raise Answer(404, "Not Found")
    if len(ctx.body["body"]) > 65536:
        raise Answer(
            422,
            "Validation Failed",
            [
                {
                    "resource": "IssueComment",
                    "code": "custom",
                    "field": "body",
                    "message": "body is too long (maximum is 65536 characters)",
                }
            ],
        )
    comment = fake.add_comment(
        repo.full_name, ctx.params["issue_number"], ctx.body["body"], user=fake.bot_login
    )
    return Reply(201, ctx.render.comment(comment))


@operation("issues/get-comment")
def get_comment(fake: FakeHandlers, ctx: Ctx) -> Reply:
    return Reply(200, ctx.render.comment(fake.issue_comment(ctx, fake.visible_repo(ctx))))


@operation("issues/update-comment")
def update_comment(fake: FakeHandlers, ctx: Ctx) -> Reply:
    comment = fake.issue_comment(ctx, fake.visible_repo(ctx))
    if comment.user != fake.bot_login:
        raise Answer(403, "Resource not accessible by integration")
    if len(ctx.body["body"]) > 65536:
        raise Answer(
            422, "Validation Failed", [{"resource": "IssueComment", "code": "custom", "field": "body"}]
        )
    comment.body = ctx.body["body"]
    comment.updated_at = fake.clock()
    return Reply(200, ctx.render.comment(comment))
