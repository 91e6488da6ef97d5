"""The `auto_review` settings a pull request is reviewed under, read from the default branch, and
whether automatic reviews are on even when `.github/beam.yml` is invalid.

Commands go on with the defaults when the file is invalid (ARCHITECTURE.md section 7). An automatic
review does not: nobody asked for it, and the broken file may hold the rules that would have skipped
it (`ignore_paths`, `ignore_authors`, `max_changed_lines`), so it waits and the summary says why. It
says so only where automatic reviews would run: the file still reads `auto_review.enabled: true`, or
it does not say (or cannot be read as YAML) and the server's BEAM_AUTO_REVIEW is on. A file that
still says `enabled: false` keeps the repository quiet.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import yaml

from bot.app.github.client import InstallationClient
from bot.app.permissions import Permission
from bot.app.repo_config import CONFIG_PATH, MAX_CONFIG_BYTES, RepoLimits, parse_repo_config
from bot.app.repo_config.review_config import AutoReviewConfig
from bot.app.repo_config.review_rules import ReviewRules
from bot.app.reviews import render
from bot.app.reviews.state import Entry


@dataclass(frozen=True, slots=True)
class ReviewSettings:
    config: AutoReviewConfig = field(default_factory=AutoReviewConfig)  # the defaults when invalid
    enabled: bool = False
    errors: tuple[str, ...] = ()  # why the file is invalid; then no review runs
    limits: RepoLimits = field(default_factory=RepoLimits)  # the repository's `limits:` (issue 11)
    rules: ReviewRules = field(default_factory=ReviewRules)  # the repository's `review:` (issue 21)
    # Who may dismiss a finding (a 👎, a reply): whoever may trigger a command (issue 21).
    trigger_permission: Permission = "write"

    @property
    def invalid(self) -> bool:
        return bool(self.errors)

    def invalid_entry(self, head: str) -> Entry:
        """The summary's line for `head` under this invalid file (the same line for the same file)."""
        return Entry("invalid_config", head, note=render.invalid_config(self.errors))


def declared_enabled(text: str | None) -> bool | None:
    """`auto_review.enabled` as an invalid file still states it (None: it does not, or cannot)."""
    if text is None or len(text.encode("utf-8", "surrogatepass")) > MAX_CONFIG_BYTES:
        return None
    try:
        data = yaml.safe_load(text)
    except (yaml.YAMLError, RecursionError):
        return None
    section = data.get("auto_review") if isinstance(data, dict) else None
    enabled = section.get("enabled") if isinstance(section, dict) else None
    return enabled if isinstance(enabled, bool) else None


def settings_of(text: str | None, server_default: bool) -> ReviewSettings:
    result = parse_repo_config(text)
    config, limits, rules = result.config.auto_review, result.config.limits, result.config.review
    if result.ok:
        return ReviewSettings(config, config.is_enabled(server_default), limits=limits, rules=rules)
    declared = declared_enabled(text)
    enabled = server_default if declared is None else declared
    return ReviewSettings(config, enabled, tuple(result.errors), limits, rules)


async def load_review_settings(
    gh: InstallationClient, repo: str, default_branch: str, server_default: bool
) -> ReviewSettings:
    """Read the file at the default branch (never the head: see repo_config); GitHub's errors propagate."""
    owner, name = repo.split("/", 1)
    return settings_of(await gh.get_file(owner, name, CONFIG_PATH, default_branch), server_default)
