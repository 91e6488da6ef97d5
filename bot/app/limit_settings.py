"""The server's costs and limits (docs/costs-and-limits.md), a base of `bot.app.settings.Settings`.

Kept apart so every cap reads in one place; `Settings` inherits them, so each is still the variable
`BEAM_<FIELD NAME>`, validated at start with every other setting.
"""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings


class LimitSettings(BaseSettings):
    """Prices and caps; `limits/policy.py` turns them into a `Policy`."""

    # Costs and limits (issue 11). A repository's `.github/beam.yml` may lower the per-run and daily
    # limits, never raise them. 0 means no limit.
    price_input_per_mtok: float | None = Field(default=None, ge=0)
    price_output_per_mtok: float | None = Field(default=None, ge=0)
    max_tokens_per_run: int = Field(default=400_000, ge=0)
    max_minutes_per_run: float = Field(default=20.0, ge=0)
    runs_per_user_per_day: int = Field(default=50, ge=0)
    runs_per_repo_per_day: int = Field(default=500, ge=0)
    tokens_per_installation_per_month: int = Field(default=50_000_000, ge=0)
    max_concurrency_per_installation: int = Field(default=2, ge=0)
    # A review's diff context (reviews/budget.py): tokens per model call, and how many calls one review
    # may make when its pull request does not fit in one; `review.max_calls` in a repository lowers it.
    review_tokens_per_call: int = Field(default=24_000, ge=2_000)
    review_max_calls: int = Field(default=3, ge=1, le=20)
    # Issue 23: the largest held commit (its git bundle, kept in the database until the push row goes);
    # a bigger one is refused when it would be held (BEM-370).
    max_held_push_bytes: int = Field(default=50 * 1024 * 1024, ge=1024)
