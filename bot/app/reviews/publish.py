"""The two things an automatic review shows besides the review itself: the summary comment (one per
pull request, edited, never posted twice) and the `beam / review` check run (always neutral). Both
are written through effects/writer.py, the one path of a job's GitHub writes, as the review is: the
summary comment is created under a journal key, so a retry adopts the one an attempt began."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from bot.app.effects.writer import GitHubEffects
from bot.app.github.api import GitHubError
from bot.app.reviews import render
from bot.app.reviews.ledger import FindingsLedger
from bot.app.reviews.state import Entry, ReviewState, ReviewStates

log = logging.getLogger("beam.reviews")


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def summary_key(repo: str, number: int, replacing: int | None = None) -> str:
    """The journal key of a pull request's summary comment; another once the first was deleted."""
    return f"{repo}#{number}/review:summary" + (f":after-{replacing}" if replacing is not None else "")


async def start_check(effects: GitHubEffects, repo: str, check_id: int) -> None:
    owner, name = repo.split("/", 1)
    await effects.update_check_run(owner, name, check_id, status="in_progress", started_at=_now())


async def finish_check(
    effects: GitHubEffects, repo: str, check_id: int | None, entry: Entry, *, quiet: bool = False
) -> None:
    """Complete a check run, conclusion neutral: the bot advises, it never gates a merge."""
    if check_id is None:
        return
    owner, name = repo.split("/", 1)
    fields: dict[str, object] = {
        "status": "completed",
        "conclusion": "neutral",
        "completed_at": _now(),
        "output": render.check_output(entry),
    }
    if entry.url:
        fields["details_url"] = entry.url
    try:
        await effects.update_check_run(owner, name, check_id, **fields)
    except GitHubError as error:
        if not quiet:
            raise
        log.warning("%s: could not complete check run %s: %s", repo, check_id, error)


async def publish_summary(
    effects: GitHubEffects, states: ReviewStates, state: ReviewState, bot_login: str
) -> None:
    """Edit the pull request's summary comment to list `state.entries` and count the findings (the
    ledger's open, fixed and dismissed); create it the first time."""
    owner, name = state.repo.split("/", 1)
    gh = effects.gh
    counts = await FindingsLedger(states.store).counts(state.repo, state.number)
    body = render.summary(state.entries, {str(k): v for k, v in counts.items()})
    comment_id = state.summary_comment_id
    if comment_id is None:
        # An earlier attempt may have posted it and died before recording its id: adopt that one.
        for comment in await gh.list_comments(owner, name, state.number):
            author = comment.user.login.lower() if comment.user else ""
            # The marker counts where `render.summary` puts it, first: a tracking comment quoting
            # a model that wrote one is not the summary (issue 40).
            if author == bot_login.lower() and (comment.body or "").startswith(render.SUMMARY_MARKER):
                comment_id = comment.id
                await states.set_summary_comment(state.repo, state.number, comment_id)
                break
    replacing = None
    if comment_id is not None:
        try:
            await effects.edit(None, owner, name, comment_id, body, kind="summary")
            return
        except GitHubError as error:
            if error.status != 404:
                raise
            log.info("%s#%s: the summary comment was deleted; posting it again", state.repo, state.number)
            replacing = comment_id
    key = summary_key(state.repo, state.number, replacing)
    made = await effects.comment(key, owner, name, state.number, body, kind="summary")
    await states.set_summary_comment(state.repo, state.number, made.id)
