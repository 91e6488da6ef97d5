"""The `auto_review` section of `.github/beam.yml`: when the bot reviews a pull request on its own.

Kept apart from `repo_config.py` (which embeds it as `RepoConfig.auto_review`) so the section's rules
and its duration setting read in one place. Every key is optional; `enabled: null` (the default)
means "whatever the server's BEAM_AUTO_REVIEW says".
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema, field_validator

from bot.beam.globs import glob_problem

ReviewEvent = Literal["opened", "reopened", "ready_for_review", "synchronize"]
REVIEW_EVENTS: tuple[ReviewEvent, ...] = get_args(ReviewEvent)

MAX_DEBOUNCE = 3600
_DURATION = re.compile(r"^(?:[0-9]{1,6}|(?:[0-9]{1,6}[smh])+)$")
_PART = re.compile(r"([0-9]+)([smh])")
_UNIT = {"s": 1, "m": 60, "h": 3600}

_DEBOUNCE_SCHEMA: dict[str, Any] = {
    "anyOf": [
        {"type": "string", "pattern": _DURATION.pattern},
        {"type": "integer", "minimum": 0, "maximum": MAX_DEBOUNCE},
    ],
    "default": "60s",
    "description": "How long to wait after a push for more pushes before reviewing: '60s', '2m', "
    "'1m30s' (units s, m, h) or whole seconds; from 0 to 1 hour.",
    "title": "Debounce",
}


def debounce_seconds(value: str | int) -> int:
    """Seconds in a debounce setting; raises ValueError with a message fit for the config's author."""
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise ValueError("expected a duration such as '60s', '2m' or a number of seconds")
    if isinstance(value, int):
        seconds = value
    else:
        text = value.strip()
        if not _DURATION.fullmatch(text):
            raise ValueError(f"{value[:40]!r} is not a duration; write e.g. '60s', '2m', '1m30s' or seconds")
        parts = _PART.findall(text)
        seconds = sum(int(n) * _UNIT[u] for n, u in parts) if parts else int(text)
    if not 0 <= seconds <= MAX_DEBOUNCE:
        raise ValueError(f"{value!r} is outside the allowed range of 0 seconds to 1 hour")
    return seconds


class AutoReviewConfig(BaseModel):
    """`auto_review:` in `.github/beam.yml`."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, title="AutoReviewConfig")

    enabled: bool | None = Field(
        default=None,
        description="Review pull requests automatically; default: the server's BEAM_AUTO_REVIEW (false).",
    )
    events: list[ReviewEvent] = Field(
        default=list(REVIEW_EVENTS), description="Pull request actions that start a review."
    )
    drafts: bool = Field(default=False, description="Review draft pull requests too?")
    ignore_authors: list[str] = Field(
        default=[], description="Logins whose pull requests are never reviewed."
    )
    ignore_labels: list[str] = Field(
        default=[], description="A pull request with any of these labels is skipped."
    )
    paths: list[str] = Field(
        default=[], description="Review only pull requests that touch these globs (default: all paths)."
    )
    ignore_paths: list[str] = Field(
        default=[], description="Globs never reviewed and never given to the model as diff."
    )
    max_changed_lines: int = Field(
        default=3000, ge=1, description="Larger pull requests get one note saying why they were skipped."
    )
    debounce: Annotated[str | int, WithJsonSchema(_DEBOUNCE_SCHEMA)] = "60s"

    @field_validator("events", "ignore_authors", "ignore_labels", mode="after")
    @classmethod
    def _dedupe(cls, value: list[Any]) -> list[Any]:
        return list(dict.fromkeys(value))

    @field_validator("paths", "ignore_paths", "ignore_authors", "ignore_labels", mode="after")
    @classmethod
    def _not_blank(cls, value: list[str]) -> list[str]:
        for item in value:
            if not item.strip() or "\x00" in item:
                raise ValueError(f"{item[:40]!r} is empty or not text")
        return value

    @field_validator("paths", "ignore_paths", mode="after")
    @classmethod
    def _globs(cls, value: list[str]) -> list[str]:
        for item in value:
            problem = glob_problem(item)
            if problem is not None:
                raise ValueError(f"{item[:40]!r} is not a path glob ({problem})")
        return value

    @field_validator("debounce", mode="before")
    @classmethod
    def _check_debounce(cls, value: Any) -> Any:
        debounce_seconds(value)
        return value

    @property
    def debounce_s(self) -> int:
        return debounce_seconds(self.debounce)

    def is_enabled(self, server_default: bool) -> bool:
        return server_default if self.enabled is None else self.enabled
