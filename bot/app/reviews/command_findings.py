"""The findings ledger for `/beam review`: the same flow as an automatic review's (finding_flow.py),
behind the interface a run depends on (runs/findings_hook.py), which `runs` cannot import from here.

Before the run, the 👎s are read and the model is told what was dismissed. While it posts, a new
finding that repeats a dismissed one is dropped, and each one left gets the hidden marker by which
the ledger finds the posted comment. After it, the open findings the new commits fixed are answered
and their threads resolved. Unlike an automatic review, `/beam review` posts a finding again when it
is still open: the maintainer asked for a whole review.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot.app.context.review_context import UntrustedSection
from bot.app.effects.writer import GitHubEffects
from bot.app.github.client import InstallationClient
from bot.app.jobs.store import Store
from bot.app.permissions import Permission
from bot.app.repo_config.review_rules import ReviewRules
from bot.app.reviews import render
from bot.app.reviews.finding_flow import FindingFlow
from bot.app.reviews.findings import finding_key, marker
from bot.app.reviews.publish import publish_summary
from bot.app.reviews.state import ReviewStates
from bot.app.runs.findings_hook import FetchDiff


@dataclass
class CommandFindings:
    flow: FindingFlow

    async def before(self, rules: ReviewRules, paths: Sequence[str]) -> list[UntrustedSection]:
        await self.flow.read_reactions()
        return await self.flow.sections(rules, paths)

    async def screen(self, comments: list[dict[str, Any]], tree: Path, head: str) -> list[dict[str, Any]]:
        kept = await self.flow.screen(comments, tree, head)
        out = []
        for comment in kept:
            text = comment.get("finding", comment["body"])
            key = finding_key(comment["path"], comment.get("line_text", ""), text)
            out.append({**comment, "body": f"{comment['body']}\n\n{marker(key)}"})
        return out

    async def record(self, posted: list[dict[str, Any]], head: str, bot_login: str) -> None:
        await self.flow.record(posted, head, bot_login)

    async def after(self, reported: list[dict[str, Any]], tree: Path, head: str, bot_login: str) -> str:
        await self.flow.settle_fixed(reported, tree, head)
        flow = self.flow
        counts = await flow.ledger.counts(flow.repo, flow.number)
        # The automatic reviews' summary comment, where the pull request has one, counts them too.
        states = ReviewStates(flow.store)
        state = await states.get(flow.repo, flow.number)
        if state is not None and state.summary_comment_id is not None:
            await publish_summary(flow.gh, states, state, bot_login)
        return render.findings_line({str(k): v for k, v in counts.items()})


def command_findings(
    store: Store,
    gh: InstallationClient,
    effects: GitHubEffects,
    repo: str,
    number: int,
    trigger_permission: Permission,
    fetch_diff: FetchDiff | None = None,
) -> CommandFindings:
    """The `FindingsFor` the app's assembly gives `RunDeps`."""
    return CommandFindings(FindingFlow(store, gh, effects, repo, number, trigger_permission, fetch_diff))
