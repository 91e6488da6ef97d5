"""The one poster (reviews/posting.py, issue 41): every door gets the same draft from the pass's
review, built in one order (the screens, `review.severity` and `max_comments`, the held-back line,
the door's frame, the usage footer last) and says only how it posts it."""

from __future__ import annotations

from typing import Any

import pytest

from bot.app.repo_config.review_rules import ReviewRules
from bot.app.reviews.posting import Draft, Poster
from bot.app.runs.render import Usage

pytestmark = pytest.mark.anyio

USAGE = Usage("fake-model", 10, 2, 1, 3, 0.5)


def comment(line: int, severity: str, body: str = "It is wrong.") -> dict[str, Any]:
    return {"path": "src/a.py", "line": line, "body": body, "severity": severity}


async def test_the_draft_is_screened_selected_framed_and_signed_once_for_the_door() -> None:
    doors: list[Draft] = []
    screened: list[list[int]] = []

    async def door(draft: Draft) -> int:
        doors.append(draft)
        return 41

    async def without_line_3(comments: list[dict[str, Any]]) -> list[dict[str, Any]]:
        screened.append([c["line"] for c in comments])
        return [c for c in comments if c["line"] != 3]

    async def marked(comments: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{**c, "body": f"{c['body']}\n<!-- mark -->"} for c in comments]

    rules = ReviewRules(severity="minor", max_comments=1)
    poster = Poster(rules, door, lambda: USAGE, [without_line_3, marked], lambda body: f"{body}\n\n(range)")
    reported = [comment(1, "nit"), comment(2, "minor"), comment(3, "critical"), comment(4, "major")]

    assert await poster("Body.", reported) == 41

    assert screened == [[1, 2, 3, 4]] and poster.reported == reported  # all it said, before any screen
    [draft] = doors
    assert [(c["line"], c["body"]) for c in draft.comments] == [(4, "It is wrong.\n<!-- mark -->")]
    body, held, frame, footer = draft.body.split("\n\n")
    assert body == "Body."
    assert held == (
        "1 more finding not posted (`review.max_comments` is 1); "
        "1 finding below `review.severity: minor` not posted."
    )
    assert frame == "(range)"
    assert (
        footer
        == "<sub>model `fake-model` · 10 input / 2 output tokens · 1 model call · 3 tool steps · 0.5 s</sub>"
    )
    [inline] = draft.inline()
    assert (inline.path, inline.line) == ("src/a.py", 4) and "severity" not in inline.model_dump()


async def test_a_door_that_posts_nothing_says_so_with_none() -> None:
    async def nothing_new(draft: Draft) -> int | None:
        return None if not draft.comments else 1

    async def all_known(comments: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return []

    poster = Poster(ReviewRules(), nothing_new, lambda: USAGE, [all_known])
    assert await poster("Body.", [comment(1, "major")]) is None
    assert poster.posted is not None and poster.posted.comments == []
