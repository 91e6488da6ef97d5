"""The type of `RunDeps.review_findings`: the findings ledger a `/beam review` keeps.

Only the interface is here, because `RunDeps` (runs/deps.py) carries the factory and `runs` may not
import `reviews` (tests/app/test_layers.py). The ledger and its use in a run are the review's
(reviews/command_findings.py, reviews/command.py); the app's assembly hands `RunDeps` the factory. A
run without it (a test's bare `RunDeps`) keeps no ledger, as `/beam review` did before issue 21.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from bot.app.context.review_context import UntrustedSection
from bot.app.effects.writer import GitHubEffects
from bot.app.github.client import InstallationClient
from bot.app.jobs.store import Store
from bot.app.permissions import Permission
from bot.app.repo_config.review_rules import ReviewRules


class ReviewFindings(Protocol):
    """The ledger around one review of one pull request, in the order a run calls it."""

    async def before(self, rules: ReviewRules, paths: Sequence[str]) -> list[UntrustedSection]:
        """Read the 👎s since the last review; the sections every call gets (path instructions, the
        findings already dismissed)."""
        ...

    async def screen(self, comments: list[dict[str, Any]], tree: Path, head: str) -> list[dict[str, Any]]:
        """The comments to post: without those that repeat a dismissed finding, each marked so that
        `record` finds it among the pull request's review comments."""
        ...

    async def record(self, posted: list[dict[str, Any]], head: str, bot_login: str) -> None:
        """Record the comments just posted (as `screen` returned them) as open findings."""
        ...

    async def after(self, reported: list[dict[str, Any]], tree: Path, head: str, bot_login: str) -> str:
        """Fix the open findings the new head changed and `reported` (all the review said) does not
        repeat: a reply naming the commit, the thread resolved. The line counting the findings."""
        ...


# (store, client, effects, "owner/name", number, trigger_permission) -> the ledger of that pull request
# The last argument fetches what a line map between two heads reads (git/mirrors.py `fetch_diff_blobs`).
FetchDiff = Callable[[str, str], Awaitable[object]]
FindingsFor = Callable[
    [Store, InstallationClient, GitHubEffects, str, int, Permission, FetchDiff | None], ReviewFindings
]
