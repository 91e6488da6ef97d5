"""An automatic review an earlier attempt finished but did not see posted (drafts.py
`finish_kept_review`): the next attempt posts the kept draft through its door, or finds that GitHub
made it after all and posts nothing; either way the draft is done with, and the model is not asked."""

from __future__ import annotations

from typing import Any

import pytest

from bot.app.effects.journal import Journal
from bot.app.github.models import Account, ReviewComment
from bot.app.jobs.store import Store
from bot.app.reviews.drafts import KeptReview, finish_kept_review, keep_body, note_posted
from bot.app.reviews.findings import fresh_findings
from tests.support.db import db_url_fixture, pg_database_url_fixture, store_fixture  # noqa: F401

pytestmark = pytest.mark.anyio

BOT = "beam-bot[bot]"
FINDING = {
    "path": "src/calc.py",
    "line": 5,
    "side": "RIGHT",
    "body": "f2 subtracts 2 where its callers add it.",
    "finding": "f2 subtracts 2 where its callers add it.",
    "line_text": "    return x - 2",
}


class Door:
    """A door that records what it was given and notes the draft posted, as the writer's does."""

    def __init__(self, journal: Journal, run_id: str) -> None:
        self.journal, self.run_id = journal, run_id
        self.posted: list[tuple[str, list[dict[str, Any]]]] = []

    async def __call__(self, body: str, comments: list[dict[str, Any]]) -> int:
        self.posted.append((body, comments))
        await note_posted(self.journal, self.run_id, 77)
        return 77


def on_github(review_id: int, login: str) -> ReviewComment:
    """The finding as a posted inline comment of `login`, its marker on its last line."""
    [marked] = fresh_findings([dict(FINDING)], None, set())
    return ReviewComment(
        id=5,
        body=marked["body"],
        html_url="https://github.com/octo/demo/pull/7#discussion_r5",
        user=Account(login=login, id=1, type="Bot"),
        pull_request_review_id=review_id,
        path="src/calc.py",
        line=5,
    )


async def test_a_kept_draft_is_posted_once_through_the_door(store: Store) -> None:
    journal = Journal(store)
    door = Door(journal, "run-1")
    assert await finish_kept_review(journal, "run-1", [], BOT, door) is None  # nothing was kept

    await keep_body(journal, "run-1", "Two problems in calc.", [FINDING])
    # A comment of someone else's holding the same finding is not the bot's review.
    kept = await finish_kept_review(journal, "run-1", [on_github(41, "someone")], BOT, door)

    assert kept == KeptReview("Two problems in calc.", [FINDING], None)
    assert door.posted == [("Two problems in calc.", [FINDING])]
    assert await finish_kept_review(journal, "run-1", [], BOT, door) is None  # posted: done with


async def test_a_draft_github_made_after_all_is_noted_and_not_posted_again(store: Store) -> None:
    journal = Journal(store)
    door = Door(journal, "run-2")
    await keep_body(journal, "run-2", "Two problems in calc.", [FINDING])

    kept = await finish_kept_review(journal, "run-2", [on_github(41, BOT)], BOT, door)

    assert kept is not None and kept.made == (41, 1) and kept.comments == [FINDING]
    assert door.posted == []
    entry = await journal.lookup("run-2:review-draft")
    assert entry is not None and entry.result == {"posted": 41}
    assert await finish_kept_review(journal, "run-2", [], BOT, door) is None
