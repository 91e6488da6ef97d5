"""What the `review:` rules do to a review (issue 21): the sections its prompt gets (tone, path
instructions for the changed files), and which of its findings are posted: none below
`review.severity`, at most `review.max_comments`, highest severity first (in the model's order within
one severity). What is left out is counted in the review's body, never silently lost."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from bot.app.context.review_context import UntrustedSection
from bot.app.repo_config import matches_any
from bot.app.repo_config.review_rules import ReviewRules, severity_rank
from bot.app.runs import render


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


def instructions_for(rules: ReviewRules, paths: Sequence[str]) -> list[tuple[str, str, list[str]]]:
    """(glob, text, the changed paths it matches) for every glob that matches a changed path."""
    out: list[tuple[str, str, list[str]]] = []
    for pattern, text in rules.path_instructions.items():
        matched = [p for p in paths if matches_any([pattern], p)]
        if matched:
            out.append((pattern, text, matched))
    return out


def rules_sections(rules: ReviewRules, paths: Sequence[str]) -> list[UntrustedSection]:
    """The maintainers' tone and path instructions, as data for every call of a review."""
    out = [UntrustedSection(render.TONE_TITLE, render.TONES[rules.tone])]
    instructions = instructions_for(rules, paths)
    if instructions:
        lines = [render.path_instruction(glob, text, matched) for glob, text, matched in instructions]
        out.append(UntrustedSection(render.INSTRUCTIONS_TITLE, "\n".join(lines)))
    return out
