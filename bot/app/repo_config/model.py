"""The model of `.github/beam.yml`: `RepoConfig` and its sections, with the value rules they check.

Parsing the file and wording its errors live in `parse.py`; this module holds only what a setting is.
May import permissions only: every layer of the app reads repository config.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema, field_validator

from bot.app.permissions import Permission
from bot.app.repo_config.checks import DEFAULT_CHECKS_TIMEOUT, Checks, ChecksTimeout, Command, check_seconds
from bot.app.repo_config.durations import duration_pattern, duration_seconds
from bot.app.repo_config.durations import short as _short
from bot.app.repo_config.review_config import AutoReviewConfig
from bot.app.repo_config.review_rules import ReviewRules
from bot.beam.globs import PathGlobs, glob_problem

CONFIG_PATH = ".github/beam.yml"
MAX_CONFIG_BYTES = 64 * 1024
# Aliases let a small file expand into a huge structure; count nodes as if every alias were copied.
MAX_CONFIG_NODES = 10_000

Skill = Literal["review", "summarize", "commit-notes", "ask", "author", "docs"]
SKILLS: tuple[Skill, ...] = get_args(Skill)

MIN_EXPIRY = timedelta(minutes=10)
MAX_EXPIRY = timedelta(days=90)
_EXPIRY_TEXT = duration_pattern("smhdw", 10)

_EXPIRY_SCHEMA: dict[str, Any] = {
    "anyOf": [
        {"type": "string", "pattern": _EXPIRY_TEXT.pattern},
        {
            "type": "integer",
            "minimum": int(MIN_EXPIRY.total_seconds()),
            "maximum": int(MAX_EXPIRY.total_seconds()),
        },
    ],
    "default": "7d",
    "description": "How long a held push waits for approval: '7d', '12h', '30m', '1d12h' (units s, m, "
    "h, d, w) or whole seconds; between 10 minutes and 90 days.",
    "title": "Expiry",
}


def expiry_seconds(value: str | int) -> int:
    """Seconds in an expiry setting; raises ValueError with a message fit for the config's author."""
    return duration_seconds(
        value,
        _EXPIRY_TEXT,
        examples="'7d', '12h', '30m', '1d12h' (units s, m, h, d, w)",
        bounds=(int(MIN_EXPIRY.total_seconds()), int(MAX_EXPIRY.total_seconds())),
        bound_words=("10 minutes", "90 days"),
    )


class RepoLimits(BaseModel):
    """The `limits:` section: each may only lower the server's limit of the same name."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, title="RepoLimits")

    max_tokens_per_run: int | None = Field(
        default=None, ge=1, description="Tokens (input + output) one run may use before it stops."
    )
    max_minutes_per_run: int | None = Field(
        default=None, ge=1, description="Minutes one run may take before it stops."
    )
    runs_per_user_per_day: int | None = Field(
        default=None, ge=1, description="Runs one person may start on this repository per UTC day."
    )
    runs_per_repo_per_day: int | None = Field(
        default=None, ge=1, description="Runs this repository may start per UTC day."
    )


DEFAULT_DOCS_PATHS = ("docs/**", "**/*.md", "**/*.rst", "**/*.txt", "mkdocs.yml", "docs/conf.py")


class DocsConfig(BaseModel):
    """`docs:`: what `/beam docs` may write."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, title="DocsConfig")

    paths: list[str] = Field(
        default=list(DEFAULT_DOCS_PATHS),
        min_length=1,
        description="Globs (from the repository root; `**` spans directories) `/beam docs` may write; "
        "every other path is refused.",
    )

    @field_validator("paths", mode="after")
    @classmethod
    def _check_globs(cls, value: list[str]) -> list[str]:
        for pattern in value:
            if not pattern.strip().strip("/"):
                raise ValueError(f"{_short(pattern)} is not a path glob")
            check_glob(pattern)
        return value


class RepoConfig(BaseModel):
    """Version 1 of `.github/beam.yml`; every field has a default, so an absent file is valid."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, title="RepoConfig")

    version: Literal[1] = Field(default=1, description="Format version of this file; only 1 exists.")
    skills: list[Skill] = Field(
        default=list(SKILLS), description="Commands enabled on this repository (`/beam <skill>`)."
    )
    trigger_permission: Permission = Field(
        default="write", description="Lowest repository permission a commenter needs to run a command."
    )
    approve_permission: Permission = Field(
        default="write", description="Lowest repository permission needed to approve or reject a held push."
    )
    self_approval: bool = Field(default=True, description="May the requester approve their own held push?")
    approvals_required: int = Field(
        default=1, ge=1, le=10, description="Distinct approvals needed before a held push is pushed."
    )
    blocked_paths: list[str] = Field(
        default=[".github/workflows/**"],
        description="Globs (from the repository root; `**` spans directories) the author skill may "
        "not change.",
    )
    fork_pushes: Literal["refuse", "allow"] = Field(
        default="refuse",
        description="`allow` lets `/beam author`, `/beam docs` and `/beam update` on a pull request from a "
        "fork hold a push into this repository: its `beam/...` branch then carries the fork's commits "
        "too, and the approval comment lists every one of them. `refuse` (the default): the bot says "
        "why, and runs nothing.",
    )
    expiry: Annotated[str | int, WithJsonSchema(_EXPIRY_SCHEMA)] = "7d"
    limits: RepoLimits = Field(
        default_factory=RepoLimits,
        description="Lower the server's limits for this repository (a higher value is ignored).",
    )
    docs: DocsConfig = Field(default_factory=DocsConfig, description="Settings of `/beam docs`.")
    auto_review: AutoReviewConfig = Field(
        default_factory=AutoReviewConfig, description="Automatic reviews of pull requests (optional)."
    )
    checks: Checks = Field(
        default_factory=list,
        description="The repository's own checks, run in a jail on every commit offered for approval "
        "(docs/checks.md).",
    )
    checks_timeout: ChecksTimeout = DEFAULT_CHECKS_TIMEOUT
    checks_required: bool = Field(
        default=False,
        description="A held push whose checks fail (or cannot run) is not offered for approval.",
    )
    checks_setup: Command | None = Field(
        default=None,
        description="A command run before the checks in the same jail, whose only network is a proxy "
        "to the package registries the server allows (e.g. `pip install -e .`).",
    )
    review: ReviewRules = Field(
        default_factory=ReviewRules,
        description="What every review (`/beam review` and automatic) says: path instructions, at most "
        "how many comments, the lowest severity, tone, linters, chunked calls.",
    )

    @field_validator("skills", mode="after")
    @classmethod
    def _dedupe_skills(cls, value: list[Skill]) -> list[Skill]:
        return list(dict.fromkeys(value))

    @field_validator("blocked_paths", mode="after")
    @classmethod
    def _check_globs(cls, value: list[str]) -> list[str]:
        for pattern in value:
            check_glob(pattern)
        return value

    @field_validator("expiry", mode="before")
    @classmethod
    def _check_expiry(cls, value: Any) -> Any:
        expiry_seconds(value)
        return value

    @property
    def expiry_delta(self) -> timedelta:
        """How long a held push stays approvable."""
        return timedelta(seconds=expiry_seconds(self.expiry))

    @property
    def checks_seconds(self) -> int:
        """Each check's timeout as the file sets it (the server may lower it)."""
        return check_seconds(self.checks_timeout)

    def skill_enabled(self, skill: str) -> bool:
        return skill in self.skills

    @property
    def fork_pushes_allowed(self) -> bool:
        """Whether a fork's commits may be pushed into this repository (after approval)."""
        return self.fork_pushes == "allow"

    def blocked(self, path: str) -> bool:
        """True when the author skill may not change `path` (repository-relative, `/`-separated)."""
        return matches_any(self.blocked_paths, path)


def matches_any(patterns: list[str], path: str) -> bool:
    """Whether a repository path matches one of the globs, read as a rule by the one path matcher
    the sandbox uses too (bot/beam/globs.py): anchored at the root, covering what is below a match,
    case-insensitive. `blocked_paths` here and in the worktree can never disagree (issue 28)."""
    return PathGlobs(patterns).matches(path)


def check_glob(pattern: str) -> str:
    """A path glob of the config, or ValueError with what is wrong with it (git's rules)."""
    problem = glob_problem(pattern)
    if problem is not None:
        raise ValueError(f"{_short(pattern)} is not a path glob ({problem})")
    return pattern
