"""A finished review that GitHub could not take yet, kept in the effects journal
(`<run id>:review-draft`): the next attempt posts it from there, without asking the model again.
`/beam review` (command.py) keeps a `ReviewDraft`; an automatic review (auto_review_run.py) keeps its body and
comments under the same key (`keep_body`, `note_posted`), with the lines its poster frames them with
(`FrameLines`), and its next attempt finishes it (`finish_kept_review`)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from bot.app.effects.journal import Journal
from bot.app.github.client import InlineComment
from bot.app.github.models import ReviewComment
from bot.app.reviews.findings import review_holding
from bot.app.runs.render import Usage

log = logging.getLogger("beam.reviews")


@dataclass(frozen=True, slots=True)
class ReviewDraft:
    """A finished review as it is to be posted: what the model wrote, after selection and usage."""

    commit_id: str
    body: str
    comments: list[InlineComment]
    # The inline comments as the findings ledger screened them (their markers), recorded once posted.
    findings: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "commit_id": self.commit_id,
            "body": self.body,
            "comments": [c.model_dump(mode="json", exclude_none=True) for c in self.comments],
            "findings": self.findings,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ReviewDraft:
        comments = [InlineComment.model_validate(c) for c in data.get("comments") or []]
        findings = [dict(f) for f in data.get("findings") or []]
        return cls(str(data["commit_id"]), str(data["body"]), comments, findings)


def draft_key(run_id: str) -> str:
    """Where a review the model finished waits to be posted (an automatic review's too,
    reviews/auto_review_run.py)."""
    return f"{run_id}:review-draft"


async def keep_draft(journal: Journal, run_id: str, draft: ReviewDraft) -> None:
    """Keep the review before it is posted, so no outage makes the model's work be done again."""
    await journal.note(draft_key(run_id), "review_draft", draft.to_json())


async def kept_draft(journal: Journal, run_id: str) -> ReviewDraft | None:
    entry = await journal.lookup(draft_key(run_id))
    return None if entry is None else ReviewDraft.from_json(entry.result)


# -- an automatic review's draft: its body and comments, then the review GitHub made of them ---------


@dataclass(frozen=True, slots=True)
class FrameLines:
    """What an automatic review's poster says around the model's body (reviews/posting.py `Poster`,
    its `frame` and `footer`) that only the attempt which ran the pass knows: the files no call read,
    the linters that could not run, and what the calls used; and the partial line the body carries,
    for the summary. The attempt that posts a kept draft builds no prompt and asks no model, so these
    are kept with the draft: without them, the review it posts would say it left nothing out and took
    no model call, and a partial review would mark its head reviewed."""

    left_out: list[str]
    lint_skipped: list[str]
    usage: Usage
    partial: str = ""  # the review's partial line (review_pass.py `ReviewPass.partial`); "": it finished

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FrameLines:
        usage = Usage(**data["usage"])
        return cls(list(data["left_out"]), list(data["lint_skipped"]), usage, str(data.get("partial", "")))


async def keep_body(
    journal: Journal, run_id: str, body: str, comments: list[dict[str, Any]], lines: FrameLines
) -> None:
    """Kept before anything is posted: if GitHub cannot take it now, the job waits for GitHub
    (auto_review_job.py) and the next attempt posts this, without asking the model again."""
    kept = {"body": body, "comments": comments, "lines": lines.to_json()}
    await journal.note(draft_key(run_id), "review_draft", kept)


async def note_posted(journal: Journal, run_id: str, review_id: int | None) -> None:
    """The draft is done with: posted as `review_id`, or nothing to post (None)."""
    await journal.note(draft_key(run_id), "review_draft", {"posted": review_id})


@dataclass(frozen=True, slots=True)
class KeptReview:
    """An automatic review an earlier attempt finished but did not see posted: its body and comments,
    and `made` (the review's id, the findings it holds) when GitHub made it after all."""

    body: str
    comments: list[dict[str, Any]]
    lines: FrameLines | None = None  # None: kept by a version that did not keep them
    made: tuple[int, int] | None = None


async def finish_kept_review(
    journal: Journal,
    run_id: str,
    existing: Iterable[ReviewComment],
    bot_login: str,
    post: Callable[[KeptReview], Awaitable[int | None]],
) -> KeptReview | None:
    """Finished, not posted: post it now, through the door's `post` (which frames it with the kept
    `lines`, as the attempt that finished it would have), and the model is not asked again. A review
    GitHub made although its answer was lost (the bot's comments on the pull request, `existing`,
    hold its findings) is not posted twice: it is noted as posted. None: no draft waits (none was
    kept, or it was posted)."""
    entry = await journal.lookup(draft_key(run_id))
    if entry is None or "body" not in entry.result:
        return None
    log.info("auto-review %s: posting the review an earlier attempt could not", run_id)
    lines = entry.result.get("lines")
    kept = KeptReview(
        str(entry.result["body"]),
        list(entry.result.get("comments") or []),
        FrameLines.from_json(lines) if isinstance(lines, dict) else None,
    )
    made = review_holding(kept.comments, existing, bot_login)
    if made is None:
        await post(kept)
        return kept
    await note_posted(journal, run_id, made[0])
    return replace(kept, made=made)
