"""Fake GitHub endpoints for automatic reviews: check runs, one review comment, and the comparison
of two commits (answered by `fake.compare_resolver`, e.g. from real git)."""

from __future__ import annotations

import copy
from typing import Any

from tests.support.fake_github_handlers import Answer, Ctx, FakeHandlers, Reply, operation
from tests.support.fake_github_render import example
from tests.support.fake_github_spec import RestSpec
from tests.support.fake_github_state import CheckRun, PullFile, Repo, iso

CHECK_STATUSES = ("queued", "in_progress", "completed")


def _check_run(fake: FakeHandlers, ctx: Ctx, repo: Repo, run: CheckRun) -> dict[str, Any]:
    out = example("check-run")
    url = f"{ctx.render.urls.web}/{repo.full_name}/runs/{run.id}"
    out.update(
        id=run.id,
        name=run.name,
        head_sha=run.head_sha,
        external_id=run.external_id,
        status=run.status,
        conclusion=run.conclusion,
        html_url=url,
        details_url=run.details_url or url,
        url=f"{ctx.render.urls.api}/repos/{repo.full_name}/check-runs/{run.id}",
        started_at=iso(fake.clock()),
        completed_at=iso(fake.clock()) if run.status == "completed" else None,
        pull_requests=[],
    )
    out["output"] = {
        **out["output"],
        "title": (run.output or {}).get("title"),
        "summary": (run.output or {}).get("summary"),
        "text": None,
        "annotations_count": 0,
    }
    return out


def _apply(run: CheckRun, body: dict[str, Any]) -> None:
    status = body.get("status")
    if "conclusion" in body and status is None:
        status = "completed"  # GitHub: giving a conclusion completes the run
    if status is not None:
        if run.status == "completed":
            raise Answer(422, "Unprocessable Entity", ["a completed check run cannot change its status"])
        run.status = status
        run.history.append(status)
    if run.status == "completed" and body.get("conclusion") is None and run.conclusion is None:
        raise Answer(422, "Unprocessable Entity", ["conclusion is required to complete a check run"])
    if body.get("conclusion") is not None:
        run.conclusion = body["conclusion"]
    if "output" in body:
        run.output = body["output"]
    if "details_url" in body:
        run.details_url = body["details_url"]


@operation("checks/create")
def create_check_run(fake: FakeHandlers, ctx: Ctx) -> Reply:
    repo = fake.visible_repo(ctx)
    body = ctx.body
    run = CheckRun(fake.new_id(), repo.full_name, body["name"], body["head_sha"], "queued")
    run.history.append("queued")
    run.external_id = body.get("external_id")
    _apply(run, {k: v for k, v in body.items() if k != "external_id" and (k != "status" or v != "queued")})
    fake.check_runs[run.id] = run
    return Reply(201, _check_run(fake, ctx, repo, run))


@operation("checks/update")
def update_check_run(fake: FakeHandlers, ctx: Ctx) -> Reply:
    repo = fake.visible_repo(ctx)
    run = fake.check_runs.get(ctx.params["check_run_id"])
    if run is None or run.repo != repo.full_name:
        raise Answer(404, "Not Found")
    _apply(run, ctx.body)
    return Reply(200, _check_run(fake, ctx, repo, run))


@operation("checks/list-for-ref")
def list_check_runs_for_ref(fake: FakeHandlers, ctx: Ctx) -> Reply:
    """The check runs of a commit (by sha), optionally of one `check_name`, newest first."""
    repo = fake.visible_repo(ctx)
    name = ctx.query.get("check_name")
    found = [
        _check_run(fake, ctx, repo, run)
        for run in sorted(fake.check_runs.values(), key=lambda r: r.id, reverse=True)
        if run.repo == repo.full_name and run.head_sha == ctx.params["ref"] and name in (None, run.name)
    ]
    per_page = min(int(ctx.query.get("per_page", 30)), 100)
    return Reply(200, {"total_count": len(found), "check_runs": found[:per_page]})


@operation("pulls/get-review-comment")
def get_review_comment(fake: FakeHandlers, ctx: Ctx) -> Reply:
    repo = fake.visible_repo(ctx)
    return Reply(200, ctx.render.review_comment(fake.review_comment(ctx, repo)))


def _file(item: PullFile) -> dict[str, Any]:
    out: dict[str, Any] = example_list("diff-entry-items")[0]
    out.update(
        filename=item.filename,
        status=item.status,
        additions=item.additions,
        deletions=item.deletions,
        changes=item.additions + item.deletions,
    )
    if item.patch is None:
        out.pop("patch", None)
    else:
        out["patch"] = item.patch
    return out


def example_list(name: str) -> list[Any]:
    value = copy.deepcopy(RestSpec.load().document["components"]["examples"][name]["value"])
    assert isinstance(value, list)
    return value


@operation("repos/compare-commits-with-basehead")
def compare(fake: FakeHandlers, ctx: Ctx) -> Reply:
    repo = fake.visible_repo(ctx)
    base, _, head = ctx.params["basehead"].partition("...")
    found = fake.compare_resolver(repo.full_name, base, head) if fake.compare_resolver and head else None
    if found is None:
        raise Answer(404, "Not Found")
    status, ahead, behind, files = found
    out = example("commit-comparison")
    out.update(
        status=status, ahead_by=ahead, behind_by=behind, total_commits=ahead, files=[_file(f) for f in files]
    )
    return Reply(200, out)
