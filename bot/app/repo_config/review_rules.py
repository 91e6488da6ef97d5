"""The `review:` section of `.github/beam.yml`: the maintainers' rules for what a review says.

It governs every review, `/beam review` and automatic ones alike; `auto_review:` (review_config.py)
only says *when* the bot reviews on its own. A rule here never widens what a review may do: it
steers the prompt (`path_instructions`, `tone`), filters what is posted (`severity`, `max_comments`),
and may only lower the server's limit on chunked calls (`max_calls`).
"""

from __future__ import annotations

import re
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator

from bot.beam.globs import glob_problem

Severity = Literal["nit", "minor", "major", "critical"]
SEVERITIES: tuple[Severity, ...] = get_args(Severity)  # lowest first
Tone = Literal["concise", "detailed"]

DEFAULT_MAX_COMMENTS = 10
MAX_MAX_COMMENTS = 50
MAX_INSTRUCTION_CHARS = 2000
MAX_PATH_INSTRUCTIONS = 50
_LINTER_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,39}$")


def severity_rank(severity: str) -> int:
    """0 for `nit` up to 3 for `critical`; an unknown word ranks as `minor` (what the model omitted)."""
    return SEVERITIES.index(severity) if severity in SEVERITIES else 1


class ReviewRules(BaseModel):
    """`review:` in `.github/beam.yml`."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, title="ReviewRules")

    path_instructions: dict[str, str] = Field(
        default={},
        description="Glob (from the repository root; `**` spans directories) -> what reviewers should "
        "look for in matching files. Given to the model, as the maintainers' words, for changed files.",
    )
    max_comments: int = Field(
        default=DEFAULT_MAX_COMMENTS,
        ge=1,
        le=MAX_MAX_COMMENTS,
        description="Inline comments one review posts at most, highest severity first; the rest are "
        "counted in the review's body.",
    )
    severity: Severity = Field(
        default="nit",
        description="Lowest severity posted (nit < minor < major < critical); findings below it are "
        "counted in the review's body, not posted.",
    )
    tone: Tone = Field(
        default="concise", description="How the model writes: `concise` (one or two sentences) or `detailed`."
    )
    linters: bool | dict[str, bool] = Field(
        default=True,
        description="Run linters on the changed files and give their findings to the model: true, "
        "false, or per linter name (e.g. {ruff: true, shellcheck: false}; unnamed ones stay on).",
    )
    max_calls: int | None = Field(
        default=None,
        ge=1,
        description="Model calls one review of a large pull request may be split into; may only lower "
        "the server's limit (default: the server's, 3).",
    )

    focus: bool = Field(
        default=False,
        description="Show the model each changed hunk widened to its enclosing function or class "
        "(tree-sitter), in calls of about 2,500 tokens, instead of whole files' hunks in calls as "
        "large as the budget allows.",
    )
    passes: int = Field(
        default=1,
        ge=1,
        le=9,
        description="Reviews run, each with the hunks in a different order; a finding is posted when a "
        "majority of them report it. May only lower the server's cap (`BEAM_REVIEW_MAX_PASSES`, 3).",
    )
    verify: bool = Field(
        default=False,
        description="Before a finding is posted, ask the model whether the bug is real and which line "
        "of the change shows it; a finding it cannot back is dropped, and the review's footer counts it.",
    )

    @field_validator("path_instructions", mode="after")
    @classmethod
    def _check_instructions(cls, value: dict[str, str]) -> dict[str, str]:
        if len(value) > MAX_PATH_INSTRUCTIONS:
            raise ValueError(f"{len(value)} globs; at most {MAX_PATH_INSTRUCTIONS}")
        for pattern, text in value.items():
            problem = glob_problem(pattern) if pattern.strip().strip("/") else "an empty pattern"
            if problem is not None:
                raise ValueError(f"{pattern[:40]!r} is not a path glob ({problem})")
            if not text.strip():
                raise ValueError(f"the instruction for {pattern[:40]!r} is empty")
            if len(text) > MAX_INSTRUCTION_CHARS:
                raise ValueError(
                    f"the instruction for {pattern[:40]!r} is {len(text):,} characters; "
                    f"at most {MAX_INSTRUCTION_CHARS:,}"
                )
        return value

    @field_validator("linters", mode="after")
    @classmethod
    def _check_linters(cls, value: bool | dict[str, bool]) -> bool | dict[str, bool]:
        if isinstance(value, dict):
            for name in value:
                if not _LINTER_NAME.fullmatch(name):
                    words = "lower-case letters, digits, - and _"
                    raise ValueError(f"{name[:40]!r} is not a linter name ({words})")
        return value

    def linter_enabled(self, name: str) -> bool:
        """Whether linter `name` runs: `linters: false` turns all off; a mapping names exceptions."""
        if isinstance(self.linters, bool):
            return self.linters
        return self.linters.get(name, True)

    def calls_limit(self, server_limit: int) -> int:
        """The chunked calls a review may make: the server's limit, or this file's if lower."""
        return server_limit if self.max_calls is None else min(self.max_calls, server_limit)

    def passes_limit(self, server_limit: int) -> int:
        """The votes one review runs: the repository's `passes`, never over the server's cap."""
        return max(1, min(self.passes, server_limit))

    def posts(self, severity: str) -> bool:
        """Whether a finding of `severity` is at or above the threshold."""
        return severity_rank(severity) >= severity_rank(self.severity)
