"""What a held push would land in the base repository, and the rule for pull requests from forks.

A run on a fork's pull request builds on the fork's head, so the bot's `beam/...` branch carries
every commit of the fork that the base repository lacks; once pushed, the base repository's
push-triggered workflows run them with its secrets (issue 28, the `pull_request_target` class of
incident). So:

- `fork_refused`: by default `/beam author`, `/beam docs` and `/beam update` on a fork's pull
  request reply once (BEM-347) and run nothing; `fork_pushes: allow` in `.github/beam.yml` opens it.
- `landing_range`, at hold time: the commits that would become new (`git rev-list commit --not`
  the base and default branches, and the run's own start when that is already in the repository),
  each with author and subject for the approval comment, each checked against `blocked_paths`
  (BEM-334); for a fork, the diff and file list span the whole range (from the merge base).
- `check_landing`, at push time: the same range with the branches as GitHub has them now must hold
  no commit the comment did not list (BEM-348), so a branch moved or deleted since cannot slip one in.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio

from bot.app import markdown as md
from bot.app.approvals import render as render_push
from bot.app.approvals.held_push import CommitSummary, check_paths, summarize_commit
from bot.app.approvals.pushes import HeldPush
from bot.app.git.checkout import CheckoutError, Checkouts, RunTree
from bot.app.git.ranges import TooManyCommits
from bot.app.github.client import PullRequest
from bot.app.runs.context import JobContext
from bot.beam.errors import BeamError
from bot.beam.sandbox_policy import AllowedPaths

MAX_LISTED_COMMITS = 250  # an approval comment lists each one; past this nothing is held (BEM-349)
FORK_COMMANDS = ("author", "docs", "update")


async def fork_refused(ctx: JobContext) -> bool:
    """On a fork's pull request where `fork_pushes` is not `allow`: reply once (BEM-347), True."""
    if not ctx.event.on_pull_request or ctx.config.fork_pushes_allowed:
        return False
    repo = ctx.repository
    pull = await ctx.gh.get_pull(repo.owner.login, repo.name, ctx.event.number)
    return await refuse_fork(ctx, pull)


async def refuse_fork(ctx: JobContext, pull: PullRequest) -> bool:
    """`fork_refused` for a caller that has the pull request already."""
    if ctx.config.fork_pushes_allowed or not pull.from_fork:
        return False
    fork = pull.head.repo.full_name if pull.head.repo is not None else None
    await ctx.reply(render_push.fork_refused(ctx.command.name, fork, ctx.repository.full_name))
    return True


@dataclass(frozen=True)
class LandingRange:
    """The listing for the approval comment; `summary` spans the range when it differs from the run's
    own diff (a fork), else None."""

    commits: list[dict[str, Any]] = field(default_factory=list)
    summary: CommitSummary | None = None
    compare_url: str | None = None


async def _range(checkouts: Checkouts, repo: str, commit: str, known: list[str]) -> list[Any]:
    try:
        return await checkouts.landing_commits(repo, commit, known, MAX_LISTED_COMMITS)
    except TooManyCommits as error:
        detail = f"more than {error.limit} commits would become new in {repo}"
        raise BeamError("BEM-349", {"detail": detail}) from None


async def landing_range(
    checkouts: Checkouts, ctx: JobContext, run_tree: RunTree, commit: str, pull: PullRequest | None
) -> LandingRange:
    """The commits `commit` (pinned in the mirror) would make new in the base repository, checked."""
    repo = ctx.repository
    base_ref = pull.base.ref if pull is not None else repo.default_branch
    base_tips = await checkouts.branch_tips(repo.full_name, [base_ref])
    known = await checkouts.branch_tips(repo.full_name, [repo.default_branch, base_ref])
    fork = pull is not None and pull.from_fork
    if not fork:  # the run started from a commit the repository has (its branch, or the default)
        known.append(run_tree.base_commit)
    landing = await _range(checkouts, repo.full_name, commit, known)
    own = {c.sha for c in landing}
    if fork:
        own = {c.sha for c in await _range(checkouts, repo.full_name, commit, [*known, run_tree.base_commit])}
    for entry in landing:
        for path in entry.paths:
            if ctx.config.blocked(path):
                raise BeamError("BEM-334", {"detail": f"{md.visible(path)} (commit {entry.sha[:12]})"})
    summary: CommitSummary | None = None
    diff_base = run_tree.base_commit
    if fork:
        found = await checkouts.merge_base(repo.full_name, base_tips[0], commit) if base_tips else None
        if found is None:
            raise CheckoutError(f"The pull request's head shares no history with {base_ref}.")
        diff_base = found
        mirror = str(checkouts.mirror_path(repo.full_name))
        await checkouts.mirrors.fetch_diff_blobs(repo.full_name, diff_base, commit)  # a partial copy
        summary = await anyio.to_thread.run_sync(summarize_commit, mirror, diff_base, commit)
        check_paths(summary, ctx.config.blocked, AllowedPaths(None))
    compare = f"{repo.html_url}/compare/{diff_base}...{commit}" if repo.html_url else None
    commits = [{**c.to_json(), "own": c.sha in own} for c in landing]
    return LandingRange(commits, summary, compare)


Refresh = Callable[[], Awaitable[str]]


async def check_landing(
    checkouts: Checkouts, push: HeldPush, token: str, refresh: Refresh | None = None
) -> None:
    """Before the push: what would land now, with the branches as GitHub has them, must all have
    been listed in the approval comment (BEM-348). The commit must be in the mirror (restored)."""
    context = push.context
    branches = [context.default_branch, context.base_ref or context.default_branch]
    known: list[str] = []
    if (
        context.on_pull_request
        and not context.from_fork
        and context.expected_tip is None
        and context.head_ref
    ):
        branches.append(context.head_ref)  # the pull request's own branch, in this repository
    if context.expected_tip is not None:  # a follow-up: the push goes through only at this tip
        known.append(context.expected_tip)
    names = list(dict.fromkeys(branches))
    specs = [f"refs/heads/{name}:refs/heads/{name}" for name in names]
    await checkouts.update_mirror(push.repo, context.clone_url, token, specs, refresh=refresh)
    known += await checkouts.branch_tips(push.repo, names)
    listed = push.diffstat.get("commits")
    allowed = {str(c.get("sha")) for c in listed} if isinstance(listed, list) else {push.commit_sha}
    try:
        landing = await checkouts.landing_commits(push.repo, push.commit_sha, known, MAX_LISTED_COMMITS)
    except TooManyCommits:
        raise BeamError("BEM-348", {"detail": render_push.landing_changed(["(over 250)"])}) from None
    unlisted = [c.sha for c in landing if c.sha not in allowed]
    if unlisted:
        raise BeamError("BEM-348", {"detail": render_push.landing_changed(unlisted)})
