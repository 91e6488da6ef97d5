"""Follow-ups on the bot's own pull requests: which head branch is the bot's, and its review comments.

A branch is the bot's own only when all of these hold: it is the head of a pull request in the same
repository (never a fork), its name starts with `beam/`, and the bot has pushed it (a `pushed` held
push names it). Anyone can create a branch called `beam/...`; only the last check makes it ours, so a
follow-up can never move a branch the bot did not make.

Review comments come from REST, which does not say whether a thread is resolved (only GraphQL does):
every current comment counts as unresolved, and an outdated one (its line is gone from the diff,
`line` is null) is left out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from bot.app.approvals import render as render_push
from bot.app.approvals.held_push import CommitSummary
from bot.app.approvals.pushes import Pushes
from bot.app.context.prompt import ReviewNote
from bot.app.github.models import PullRequest
from bot.app.github.payloads import Repository
from bot.app.runs.context import JobContext
from bot.app.runs.plan import FindFollowUp, FollowUp

MAX_NOTES = 100
_ADDRESSES = re.compile(r"^\s*addresse[sd]\s*:?\s*(?P<ids>.+)$", re.IGNORECASE | re.MULTILINE)


async def own_branch(pushes: Pushes, repo: Repository, pull: PullRequest) -> str | None:
    """The pull request's head branch when it is the bot's own (see the module docstring), else None."""
    head = pull.head
    if pull.from_fork or head.repo is None or head.repo.full_name.lower() != repo.full_name.lower():
        return None
    if not head.ref.startswith("beam/"):
        return None
    return head.ref if await pushes.pushed_to(repo.full_name, head.ref) else None


def follow_up_finder(pushes: Pushes, ctx: JobContext) -> FindFollowUp:
    """For `/beam author`: continue the bot's own branch, with the pull request's review comments."""

    async def find(pull: PullRequest) -> FollowUp | None:
        repo = ctx.repository
        branch = await own_branch(pushes, repo, pull)
        if branch is None:
            return None
        comments = await ctx.gh.list_review_comments(repo.owner.login, repo.name, pull.number)
        notes = [
            ReviewNote(c.id, c.path, c.line, c.body or "", c.user.login, c.html_url)
            for c in comments
            if c.path and c.line is not None and c.user is not None
        ]
        return FollowUp(branch, tuple(notes[:MAX_NOTES]))

    return find


def addressed(notes: Iterable[ReviewNote], message: str, changed: Iterable[str]) -> list[ReviewNote]:
    """The review comments a commit addresses: those its message names on an `Addresses:` line (as
    the prompt asks); when it names none, those on the files it changes."""
    notes = list(notes)
    named: set[int] = set()
    for match in _ADDRESSES.finditer(message):
        named |= {int(n) for n in re.findall(r"\d+", match.group("ids"))}
    chosen = [n for n in notes if n.id in named]
    if chosen:
        return chosen
    paths = set(changed)
    return [n for n in notes if n.path in paths]


def addressed_note(follow_up: FollowUp | None, summary: CommitSummary) -> str:
    """Under a follow-up's answer: the review comments its commit addresses ("" without comments)."""
    if follow_up is None or not follow_up.notes:
        return ""
    changed = [f["path"] for f in summary.diffstat["files"]]
    return render_push.addressed(addressed(follow_up.notes, summary.message, changed))
