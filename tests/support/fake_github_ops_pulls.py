"""Fake GitHub endpoints for reactions and pull requests: files, reviews, replies, new pulls."""

from __future__ import annotations

from tests.support.fake_github_handlers import (
    MAX_PULL_FILES,
    Answer,
    Ctx,
    FakeHandlers,
    Reply,
    operation,
    paginate,
)
from tests.support.fake_github_state import Review

# --- reactions ----------------------------------------------------------------------------------


@operation("reactions/list-for-issue-comment")
def list_reactions(fake: FakeHandlers, ctx: Ctx) -> Reply:
    comment = fake.issue_comment(ctx, fake.visible_repo(ctx))
    found = [r for r in fake.reactions_on(comment.id) if ctx.query.get("content", r.content) == r.content]
    return paginate(ctx, [ctx.render.reaction(r) for r in found])


@operation("reactions/create-for-issue-comment")
def react_issue_comment(fake: FakeHandlers, ctx: Ctx) -> Reply:
    return fake.react(ctx, fake.issue_comment(ctx, fake.visible_repo(ctx)))


@operation("reactions/list-for-pull-request-review-comment")
def list_review_comment_reactions(fake: FakeHandlers, ctx: Ctx) -> Reply:
    comment = fake.review_comment(ctx, fake.visible_repo(ctx))
    found = [r for r in fake.reactions_on(comment.id) if ctx.query.get("content", r.content) == r.content]
    return paginate(ctx, [ctx.render.reaction(r) for r in found])


@operation("reactions/create-for-pull-request-review-comment")
def react_review_comment(fake: FakeHandlers, ctx: Ctx) -> Reply:
    return fake.react(ctx, fake.review_comment(ctx, fake.visible_repo(ctx)))


# --- pull requests ------------------------------------------------------------------------------


@operation("pulls/get")
def get_pull(fake: FakeHandlers, ctx: Ctx) -> Reply:
    repo = fake.visible_repo(ctx)
    return Reply(200, ctx.render.pull(repo, fake.pull_of(ctx, repo)))


@operation("pulls/list-files")
def list_pull_files(fake: FakeHandlers, ctx: Ctx) -> Reply:
    repo = fake.visible_repo(ctx)
    pull = fake.pull_of(ctx, repo)
    return paginate(ctx, [ctx.render.pull_file(repo, pull, f) for f in pull.files[:MAX_PULL_FILES]])


@operation("pulls/list-review-comments")
def list_review_comments(fake: FakeHandlers, ctx: Ctx) -> Reply:
    repo = fake.visible_repo(ctx)
    pull = fake.pull_of(ctx, repo)
    found = [c for c in fake.comments.values() if c.review and c.repo == repo.full_name]
    found = sorted((c for c in found if c.number == pull.number), key=lambda c: c.id)
    return paginate(ctx, [ctx.render.review_comment(c) for c in found])


@operation("pulls/create")
def create_pull(fake: FakeHandlers, ctx: Ctx) -> Reply:
    repo = fake.visible_repo(ctx)
    body = ctx.body
    head = body["head"].split(":", 1)[-1]
    head_owner = body["head"].split(":", 1)[0] if ":" in body["head"] else repo.owner
    if "title" not in body:
        raise Answer(
            422, "Validation Failed", [{"resource": "PullRequest", "field": "title", "code": "missing_field"}]
        )
    for open_pull in fake.pulls_of(repo.full_name):
        if open_pull.state == "open" and open_pull.head_ref == head and open_pull.base_ref == body["base"]:
            raise Answer(
                422,
                "Validation Failed",
                [
                    {
                        "resource": "PullRequest",
                        "code": "custom",
                        "message": f"A pull request already exists for {head_owner}:{head}.",
                    }
                ],
            )
    head_sha = "c" * 40
    if fake.ref_resolver is not None:
        resolved = fake.ref_resolver(repo.full_name, head)
        if resolved is None or fake.ref_resolver(repo.full_name, body["base"]) is None:
            raise Answer(
                422, "Validation Failed", [{"resource": "PullRequest", "field": "head", "code": "invalid"}]
            )
        head_sha = resolved
    pull = fake.add_pull(
        repo.full_name,
        title=body["title"],
        body=body.get("body"),
        user=fake.bot_login,
        head_ref=head,
        head_sha=head_sha,
        base_ref=body["base"],
        draft=bool(body.get("draft")),
    )
    return Reply(201, ctx.render.pull(repo, pull))


@operation("pulls/create-review")
def create_review(fake: FakeHandlers, ctx: Ctx) -> Reply:
    repo = fake.visible_repo(ctx)
    pull = fake.pull_of(ctx, repo)
    body = ctx.body or {}
    commit_id = body.get("commit_id", pull.head_sha)
    if commit_id not in pull.commits:
        raise Answer(422, "Unprocessable Entity", ["commit_id is not part of the pull request"])
    event = body.get("event")
    if event in ("COMMENT", "REQUEST_CHANGES") and not body.get("body") and not body.get("comments"):
        raise Answer(422, "Unprocessable Entity", ["Review body is required"])
    items = body.get("comments", [])
    for item in items:
        fake.check_review_comment(pull, item)
    review = Review(
        fake.new_id(),
        repo.full_name,
        pull.number,
        fake.bot_login,
        commit_id,
        body.get("body", ""),
        event,
        [],
        fake.clock(),
    )
    for item in items:
        comment = fake.add_review_comment(
            repo.full_name,
            pull.number,
            item["body"],
            user=fake.bot_login,
            path=item["path"],
            line=item.get("line", item.get("position", 1)),
            side=item.get("side", "RIGHT"),
        )
        comment.commit_id, comment.review_id = commit_id, review.id
        review.comment_ids.append(comment.id)
    fake.reviews[review.id] = review
    return Reply(200, ctx.render.review(repo, review))


@operation("pulls/create-reply-for-review-comment")
def reply_to_review_comment(fake: FakeHandlers, ctx: Ctx) -> Reply:
    repo = fake.visible_repo(ctx)
    pull = fake.pull_of(ctx, repo)
    parent = fake.review_comment(ctx, repo)
    if parent.number != pull.number:
        raise Answer(404, "Not Found")
    root = parent.in_reply_to or parent.id  # GitHub threads replies on the top-level comment
    reply = fake.add_review_comment(
        repo.full_name,
        pull.number,
        ctx.body["body"],
        user=fake.bot_login,
        path=parent.path or "",
        line=parent.line or 1,
        side=parent.side,
    )
    reply.in_reply_to, reply.review_id = root, parent.review_id
    return Reply(201, ctx.render.review_comment(reply))


# --- listings a retried job reads to find what an earlier attempt wrote ---------------------------


@operation("pulls/list")
def list_pulls(fake: FakeHandlers, ctx: Ctx) -> Reply:
    repo = fake.visible_repo(ctx)
    state = ctx.query.get("state", "open")
    head = ctx.query.get("head")
    found = []
    for pull in fake.pulls_of(repo.full_name):
        if state != "all" and pull.state != state:
            continue
        if head is not None and head.split(":", 1)[-1] != pull.head_ref:
            continue
        found.append(ctx.render.pull(repo, pull))
    return paginate(ctx, found)


@operation("pulls/list-reviews")
def list_reviews(fake: FakeHandlers, ctx: Ctx) -> Reply:
    repo = fake.visible_repo(ctx)
    pull = fake.pull_of(ctx, repo)
    reviews = sorted(fake.reviews_on(repo.full_name, pull.number), key=lambda r: r.id)
    return paginate(ctx, [ctx.render.review(repo, r) for r in reviews])
