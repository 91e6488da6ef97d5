"""A finished review that GitHub could not take yet, kept in the effects journal
(`<run id>:review-draft`): the next attempt posts it from there, without asking the model again.
`/beam review` (command.py) keeps a `ReviewDraft`; an automatic review (auto_review_run.py) keeps its body and
comments under the same key."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bot.app.effects.journal import Journal
from bot.app.github.client import InlineComment


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
