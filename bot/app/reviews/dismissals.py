"""Dismissing a finding from its thread: a reply saying "won't fix", "wontfix", "not a bug" or
`/beam dismiss`, or resolving the thread (the `pull_request_review_thread` webhook, action
`resolved`). Either counts only from someone with `trigger_permission`, never from a bot (the bot
resolves the threads of fixed findings itself), and only on a finding of the ledger. A 👎 is read
when the next review starts (reviews/finding_flow.py): GitHub sends no webhook for reactions.

A dismissing reply is acknowledged with a 👍 on it (through the effects journal); a refused one
gets the command refusal in the thread.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bot.app.effects.journal import Journal
from bot.app.effects.writer import GitHubEffects
from bot.app.github.client import InstallationClient
from bot.app.github.models import is_bot_login
from bot.app.github.payloads import CommentEvent
from bot.app.jobs.store import Store
from bot.app.permissions import permission_at_least
from bot.app.repo_config import load_repo_config
from bot.app.reviews.ledger import FindingsLedger
from bot.app.reviews.publish import publish_summary
from bot.app.reviews.state import ReviewStates
from bot.app.runs import render as run_render

log = logging.getLogger("beam.reviews")

_PHRASES = re.compile(r"(?<![\w-])(?:won[’']?t[ -]?fix|wontfix|not a bug)(?![\w-])", re.IGNORECASE)


def is_dismissal(body: str) -> bool:
    """A reply that dismisses: one of the phrases anywhere, or a first line `/beam dismiss`."""
    first = body.lstrip().split("\n", 1)[0].strip().lower()
    return first.split()[:2] == ["/beam", "dismiss"] or _PHRASES.search(body) is not None


def is_dismissing_reply(event: CommentEvent) -> bool:
    """Decided without I/O: a human's new reply in a review thread that dismisses."""
    comment = event.comment
    if event.action != "created" or not event.is_review_comment or comment.in_reply_to_id is None:
        return False
    if comment.user.is_bot or event.sender.is_bot:
        return False
    return is_dismissal(comment.body)


@dataclass(frozen=True, slots=True)
class ThreadResolved:
    """The fields of a `pull_request_review_thread` delivery this module reads."""

    repo: str
    default_branch: str
    number: int
    installation_id: int
    sender: str
    sender_is_bot: bool
    root_comment_id: int

    @classmethod
    def parse(cls, data: Mapping[str, Any]) -> ThreadResolved | None:
        try:
            repository, sender = data["repository"], data["sender"]
            comments = [c for c in data["thread"]["comments"] if isinstance(c, dict)]
            roots = [c for c in comments if c.get("in_reply_to_id") is None] or comments
            login = str(sender["login"])
            return cls(
                str(repository["full_name"]),
                str(repository.get("default_branch") or "main"),
                int(data["pull_request"]["number"]),
                int(data["installation"]["id"]),
                login,
                sender.get("type") == "Bot" or is_bot_login(login),
                min(int(c["id"]) for c in roots),
            )
        except (KeyError, TypeError, ValueError):
            return None


class Dismissals:
    def __init__(self, store: Store) -> None:
        self.ledger = FindingsLedger(store)
        self.states = ReviewStates(store)

    async def _recount(self, gh: InstallationClient, repo: str, number: int, bot_login: str | None) -> None:
        """The summary comment counts findings: say the new count now, not at the next review."""
        state = await self.states.get(repo, number)
        if state is not None and state.summary_comment_id is not None and bot_login is not None:
            await publish_summary(
                GitHubEffects(gh, Journal(self.states.store)), self.states, state, bot_login
            )

    async def _allowed(self, gh: InstallationClient, repo: str, branch: str, login: str) -> tuple[bool, str]:
        owner, name = repo.split("/", 1)
        needed = (await load_repo_config(gh.get_file, owner, name, branch)).config.trigger_permission
        return permission_at_least(await gh.get_permission(owner, name, login), needed), needed

    async def on_reply(
        self,
        gh: InstallationClient,
        effects: GitHubEffects,
        event: CommentEvent,
        key: str,
        bot_login: str | None = None,
    ) -> bool:
        """Dismiss the reply's finding; False when its thread holds none (the caller goes on)."""
        repo, comment = event.repository, event.comment
        assert comment.in_reply_to_id is not None
        finding = await self.ledger.by_comment(repo.full_name, event.number, comment.in_reply_to_id)
        if finding is None:  # a reply to a reply: GitHub names the thread's first comment
            parent = await gh.get_review_comment(repo.owner.login, repo.name, comment.in_reply_to_id)
            root = parent.in_reply_to_id
            finding = await self.ledger.by_comment(repo.full_name, event.number, root) if root else None
        if finding is None:
            return False
        login = comment.user.login
        allowed, needed = await self._allowed(gh, repo.full_name, repo.default_branch, login)
        owner, name = repo.owner.login, repo.name
        if not allowed:
            body = run_render.refusal(login, needed)
            await effects.reply(f"{key}:refusal", owner, name, event.number, finding.comment_id, body)
            return True
        if await self.ledger.dismiss(finding.id, "reply", login):
            log.info("%s#%s: finding %s dismissed by @%s", repo.full_name, event.number, finding.id, login)
        await effects.react(f"{key}:dismissed", owner, name, comment.id, "+1", review_comment=True)
        await self._recount(gh, repo.full_name, event.number, bot_login)
        return True

    async def on_resolved(
        self, gh: InstallationClient, event: ThreadResolved, bot_login: str | None = None
    ) -> bool:
        """Dismiss the resolved thread's finding; whether one was."""
        if event.sender_is_bot:
            return False  # the bot resolves the threads of fixed findings
        finding = await self.ledger.by_comment(event.repo, event.number, event.root_comment_id)
        if finding is None or finding.state != "open":
            return False
        allowed, _ = await self._allowed(gh, event.repo, event.default_branch, event.sender)
        if not allowed:
            log.info("%s#%s: @%s may not dismiss a finding", event.repo, event.number, event.sender)
            return False
        if not await self.ledger.dismiss(finding.id, "resolved", event.sender):
            return False
        await self._recount(gh, event.repo, event.number, bot_login)
        return True
