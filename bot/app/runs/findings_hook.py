"""What a `/beam review` run asks of the findings ledger, as an interface the run depends on.

The ledger lives in `bot/app/reviews` (its table, the matching of a new finding to a dismissed one,
the replies to fixed findings), and `runs` may not import `reviews`: the package graph points down
(tests/app/test_layers.py). So `runs` names here the four steps it needs, and the app's assembly
hands `RunDeps` a factory that builds the real one (`reviews.command_findings.CommandFindings`). A
run without it (a test's bare `RunDeps`) keeps no ledger, as `/beam review` did before issue 21.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from bot.app.effects.writer import GitHubEffects
from bot.app.github.client import InstallationClient
from bot.app.jobs.store import Store
from bot.app.permissions import Permission
from bot.app.repo_config.review_rules import ReviewRules
from bot.app.runs.review_context import UntrustedSection


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
FindingsFor = Callable[[Store, InstallationClient, GitHubEffects, str, int, Permission], ReviewFindings]


@dataclass
class RunFindings:
    """The ledger's steps within one run, with what the run needs to call them: its tree, the head,
    the bot's login, and every comment the model reported (before any filter), which decides which
    open findings are fixed. Without a ledger (`findings` None) each step passes through."""

    findings: ReviewFindings | None
    tree: Path
    head: str
    bot_login: str
    reported: list[dict[str, Any]] = field(default_factory=list)

    async def before(self, rules: ReviewRules, paths: Sequence[str]) -> list[UntrustedSection] | None:
        return await self.findings.before(rules, paths) if self.findings is not None else None

    async def screen(self, comments: list[dict[str, Any]]) -> list[dict[str, Any]]:
        self.reported.extend(comments)
        if self.findings is None:
            return comments
        return await self.findings.screen(comments, self.tree, self.head)

    async def after(self) -> list[str]:
        """The notes for the run's answer: the count of the pull request's findings, if any."""
        if self.findings is None:
            return []
        line = await self.findings.after(self.reported, self.tree, self.head, self.bot_login)
        return [line] if line else []
