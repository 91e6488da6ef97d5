"""One poster for every door a review leaves by (issue 41): the draft is built here once, and a door
says only *how* it is posted.

The doors: `/beam review` on the App and in the Action (reviews/command.py, a review through
effects/writer.py, kept as a draft first), automatic reviews (reviews/auto_review_run.py, through
effects/writer.py too), `beam-bot review <URL> --post` (bot/local/pull_request.py, the same typed call
with a token) and `beam-bot run review` (bot/local/change_run.py, printed). Whatever the door, a
review says the same thing: the findings that survive the screens (the findings ledger's dismissed
ones, those already on the pull request), then `review.severity` and `max_comments`, the line for
what those held back, the door's frame around the body, and the usage footer last. After the pass,
`pass_notes` is what every door says about it (partial, stopped, plain text, the overflow cut, what
no call read), so a maintainer reads the same review and the same notes from every door.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from bot.app.context.linters import LintReport, lint_skipped
from bot.app.context.prompt import Coverage
from bot.app.github.models import InlineComment
from bot.app.repo_config.review_rules import ReviewRules
from bot.app.reviews.pass_end import PassEnd
from bot.app.reviews.selection import select_findings
from bot.app.runs import render
from bot.app.runs.skill_agent import answered_in_text_note
from bot.app.runs.usage import stopped_outcome

# A step between the pass and the selection: the comments it keeps (a finding dismissed on this pull
# request, one already posted there, a comment outside the lines an incremental review may touch).
Screen = Callable[[list[dict[str, Any]]], Awaitable[list[dict[str, Any]]]]


@dataclass(frozen=True, slots=True)
class Draft:
    """A review as every door posts it: the body with its footer, and the findings kept."""

    body: str
    comments: list[dict[str, Any]] = field(default_factory=list)

    def inline(self) -> list[InlineComment]:
        """The kept findings as GitHub's review comments (only the fields GitHub takes)."""
        fields = InlineComment.model_fields
        return [
            InlineComment.model_validate({k: v for k, v in c.items() if k in fields}) for c in self.comments
        ]


# How a door posts a draft: the review's id, or None when it posted nothing.
Door = Callable[[Draft], Awaitable[int | None]]


def _same(body: str) -> str:
    return body


@dataclass
class Poster:
    """The review pass's `post` (reviews/review_tool.py `PostReview`) for one door: screens,
    selection, the held-back line, the door's `frame`, the usage footer, then `door`."""

    rules: ReviewRules
    door: Door
    footer: Callable[[], render.Usage]  # read when the review is posted: the calls so far
    screens: Sequence[Screen] = ()
    # Around the model's body, before the footer (an automatic review's range and coverage lines).
    frame: Callable[[str], str] = _same
    # Every comment the pass reported, before any screen: what decides which open findings are fixed.
    reported: list[dict[str, Any]] = field(default_factory=list)
    posted: Draft | None = None

    async def __call__(self, body: str, comments: list[dict[str, Any]]) -> int | None:
        self.reported.extend(comments)
        for screen in self.screens:
            comments = await screen(comments)
        chosen = select_findings(comments, self.rules)
        rules = self.rules
        held = render.not_posted(chosen.below, chosen.over, rules.severity, rules.max_comments)
        text = self.frame(f"{body}\n\n{held}" if held else body)
        self.posted = Draft(render.with_usage(text, self.footer()), chosen.kept)
        return await self.door(self.posted)


def pass_notes(
    end: PassEnd,
    coverage: Coverage,
    lint: LintReport | None,
    total: int,
    shown: int,
    *,
    refused: Sequence[str] = (),
    truncated: Sequence[str] = (),
) -> list[str]:
    """What every door says after a pass that posted: partial, stopped (and by whom), a plain-text
    review, why the model was asked for plain text, the overflow cut, the files past the fetch cap,
    what no call read, what the budget left out and the linters that could not run."""
    notes: list[str] = []
    if end.kind == "partial":
        notes.append(end.reason)
    if end.stop is not None:
        notes += stopped_outcome(end.stop, "").get("notes", [])
    if end.posted_with == "text":
        notes.append(render.PLAIN_TEXT_REVIEW)
    if end.result is not None and end.posted_with != "review_change":
        notes += answered_in_text_note(end.result)
    if end.cut is not None:
        notes.append(end.cut.named())
    notes += render.fetch_cap_note(refused)
    notes += render.not_read_note(coverage.skipped, [*coverage.cut, *truncated, *end.truncated], total, shown)
    notes += render.coverage_lines(coverage.left_out, lint_skipped(lint))
    return notes
