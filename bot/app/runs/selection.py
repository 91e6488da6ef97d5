"""Which of a review's findings are posted under the repository's `review:` rules (issue 21): none
below `review.severity`, at most `review.max_comments`, highest severity first (in the model's order
within one severity). What is left out is counted in the review's body, never silently lost."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bot.app.repo_config.review_rules import ReviewRules, severity_rank


@dataclass
class Selection:
    kept: list[dict[str, Any]] = field(default_factory=list)
    below: int = 0  # under the severity threshold
    over: int = 0  # past max_comments


def select_findings(comments: list[dict[str, Any]], rules: ReviewRules) -> Selection:
    posted = [c for c in comments if rules.posts(str(c.get("severity", "minor")))]
    ranked = sorted(posted, key=lambda c: -severity_rank(str(c.get("severity", "minor"))))
    kept = ranked[: rules.max_comments]
    return Selection(kept, len(comments) - len(posted), len(ranked) - len(kept))
