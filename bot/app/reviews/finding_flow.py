"""The findings ledger around one automatic review: before it, the 👎s on open findings and what the
model is told (path instructions, findings already dismissed, tone); while it posts, new findings
that repeat a dismissed one are dropped and the rest recorded; after it, open findings whose lines
the new commits changed and that the review did not report again are fixed: a reply naming the
commit, and their thread resolved (GraphQL `resolveReviewThread`; REST cannot).

GitHub sends no webhook for reactions, so they are read here, conditionally (a 304 costs nothing),
each time a review of the pull request starts. Replies and resolved threads arrive as webhooks
(reviews/dismissals.py). Every write goes through the effects journal under a key of the finding.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from bot.app.context.review_context import UntrustedSection
from bot.app.effects.writer import GitHubEffects, Written
from bot.app.git.plumbing import CheckoutError
from bot.app.github.api import GitHubError
from bot.app.github.client import InstallationClient
from bot.app.github.models import is_bot_login
from bot.app.github.review_threads import resolve_thread, review_comment_reactions, review_threads
from bot.app.jobs.store import Store
from bot.app.permissions import Permission, permission_at_least
from bot.app.repo_config.review_rules import ReviewRules
from bot.app.reviews import render
from bot.app.reviews.findings import marker_key
from bot.app.reviews.ledger import Finding, FindingsLedger, Posted
from bot.app.reviews.matching import Anchor, LineMaps, find_line, line_maps, same_finding
from bot.app.reviews.selection import rules_sections

log = logging.getLogger("beam.reviews")

MAX_DISMISSED_SHOWN = 30


def anchor_of(finding: Finding) -> Anchor:
    return Anchor(finding.path, finding.line, finding.line_text, finding.claim, finding.head_sha)


def _file_lines(tree: Path, path: str) -> list[str] | None:
    try:
        file = (tree / path).resolve()
        if tree.resolve() not in file.parents:
            return None
        return file.read_text(encoding="utf-8").split("\n")
    except (OSError, UnicodeDecodeError):
        return None


@dataclass
class FindingFlow:
    store: Store
    gh: InstallationClient
    effects: GitHubEffects
    repo: str
    number: int
    trigger_permission: Permission = "write"
    # Fetches what a line map between two heads reads, where the repository's copy is partial.
    fetch_diff: Callable[[str, str], Awaitable[object]] | None = None

    @property
    def ledger(self) -> FindingsLedger:
        return FindingsLedger(self.store)

    @property
    def owner(self) -> str:
        return self.repo.split("/", 1)[0]

    @property
    def name(self) -> str:
        return self.repo.split("/", 1)[1]

    async def may_dismiss(self, login: str) -> bool:
        if is_bot_login(login):
            return False
        permission = await self.gh.get_permission(self.owner, self.name, login)
        return permission_at_least(permission, self.trigger_permission)

    # -- before the review ---------------------------------------------------------------------

    async def read_reactions(self) -> int:
        """Dismiss the open findings that got a 👎 from someone allowed to; how many were."""
        dismissed, allowed = 0, {}
        for finding in await self.ledger.of_pull(self.repo, self.number, "open"):
            try:
                reactions, etag = await review_comment_reactions(
                    self.gh, self.owner, self.name, finding.comment_id, finding.reactions_etag
                )
            except GitHubError as error:
                if error.status != 404:
                    raise
                # The comment is gone: someone with write access deleted it, which says enough.
                dismissed += await self.ledger.dismiss(finding.id, "deleted", "")
                continue
            if reactions is None:
                continue  # unchanged since the last look
            await self.ledger.set_etag(finding.id, etag)
            for reaction in reactions:
                login = reaction.user.login if reaction.user else ""
                if reaction.content != "-1" or not login:
                    continue
                if login not in allowed:
                    allowed[login] = await self.may_dismiss(login)
                if allowed[login] and await self.ledger.dismiss(finding.id, "reaction", login):
                    dismissed += 1
                    break
        return dismissed

    async def sections(self, rules: ReviewRules, paths: Sequence[str]) -> list[UntrustedSection]:
        """What the maintainers asked for and what was dismissed, as data for every call."""
        out = rules_sections(rules, paths)
        dismissed = await self.ledger.of_pull(self.repo, self.number, "dismissed")
        if dismissed:
            shown = dismissed[-MAX_DISMISSED_SHOWN:]
            lines = [render.dismissed_line(f.path, f.line, f.claim) for f in shown]
            out.append(UntrustedSection(render.DISMISSED_TITLE, "\n".join(lines)))
        return out

    # -- while it posts ------------------------------------------------------------------------

    async def _maps(self, tree: Path, heads: set[str], head: str) -> dict[str, LineMaps]:
        maps: dict[str, LineMaps] = {}
        for old in heads:
            if self.fetch_diff is not None:
                try:  # a partial copy of the repository: the files that changed since come first
                    await self.fetch_diff(old, head)
                except CheckoutError as error:
                    log.warning(
                        "the files changed since %s could not be fetched: %s", old[:12], error.message
                    )
            maps[old] = await anyio.to_thread.run_sync(line_maps, tree, old, head)
        return maps

    async def screen(self, comments: list[dict[str, Any]], tree: Path, head: str) -> list[dict[str, Any]]:
        """The comments that do not repeat a dismissed finding (mapped from its head to `head`)."""
        dismissed = await self.ledger.of_pull(self.repo, self.number, "dismissed")
        if not dismissed or not comments:
            return comments
        maps = await self._maps(tree, {f.head_sha for f in dismissed}, head)
        kept = []
        for comment in comments:
            path, line = comment["path"], comment["line"]
            claim = comment.get("finding", comment["body"])
            lines = await anyio.to_thread.run_sync(_file_lines, tree, path)
            if any(same_finding(anchor_of(f), path, line, claim, maps[f.head_sha], lines) for f in dismissed):
                log.info("%s#%s: %s:%s was dismissed; not posted again", self.repo, self.number, path, line)
                continue
            kept.append(comment)
        return kept

    async def record(self, posted: list[dict[str, Any]], head: str, bot_login: str) -> None:
        """Record the review's inline comments, found by their finding markers."""
        wanted = {key: c for c in posted if (key := marker_key(c["body"])) is not None}
        if not wanted:
            return
        found = await self.gh.list_review_comments(self.owner, self.name, self.number, limit=3000)
        rows = []
        for comment in found:
            if comment.user is None or comment.user.login.lower() != bot_login.lower():
                continue
            key = marker_key(comment.body or "")
            item = wanted.get(key) if key is not None else None
            if item is None or comment.in_reply_to_id is not None:
                continue
            claim = item.get("finding", item["body"])
            severity = str(item.get("severity", "minor"))
            line_text = item.get("line_text", "")
            rows.append(Posted(comment.id, item["path"], item["line"], line_text, claim, severity, head))
        await self.ledger.record(self.repo, self.number, rows)

    # -- after it ------------------------------------------------------------------------------

    async def settle_fixed(self, reported: list[dict[str, Any]], tree: Path, head: str) -> int:
        """Fix the open findings of older heads whose anchored line changed and that `reported` (all
        the review said, before any filter) does not repeat; how many were."""
        older = [f for f in await self.ledger.of_pull(self.repo, self.number, "open") if f.head_sha != head]
        if not older:
            return 0
        maps = await self._maps(tree, {f.head_sha for f in older}, head)
        threads: dict[int, str] | None = None
        fixed = 0
        for finding in older:
            mapped = maps[finding.head_sha]
            new_path, _, changed = mapped.map(finding.path, finding.line)
            lines = await anyio.to_thread.run_sync(_file_lines, tree, new_path or finding.path)
            if not mapped.known:  # the old head is gone: the anchored code is still there, or not
                changed = lines is None or find_line(lines, finding.line_text, finding.line) is None
            if not changed:
                continue
            anchor = anchor_of(finding)
            if any(
                same_finding(anchor, c["path"], c["line"], c.get("finding", c["body"]), mapped, lines)
                for c in reported
            ):
                continue
            if threads is None:
                threads = await self._threads()
            await self._announce_fixed(finding, head, threads.get(finding.comment_id))
            fixed += await self.ledger.fix(finding.id, head)
        return fixed

    async def _threads(self) -> dict[int, str]:
        """Thread node ids by first comment; none when GraphQL fails (the replies still go out)."""
        try:
            listed = await review_threads(self.gh, self.owner, self.name, self.number)
        except GitHubError as error:
            log.warning("%s#%s: cannot list review threads: %s", self.repo, self.number, error)
            return {}
        return {t.root_comment_id: t.node_id for t in listed if t.root_comment_id}

    async def _announce_fixed(self, finding: Finding, head: str, thread_id: str | None) -> None:
        key = f"{self.repo}#{self.number}:finding-{finding.id}"
        try:
            await self.effects.reply(
                f"{key}:fixed", self.owner, self.name, self.number, finding.comment_id, render.fixed_in(head)
            )
        except GitHubError as error:
            if error.status != 404:  # a deleted comment has no thread to answer in
                raise
            return
        if thread_id is None:
            return

        async def make() -> Written:
            await resolve_thread(self.gh, thread_id)
            return Written(0, "", thread_id)

        async def find(since: float) -> Written | None:
            listed = await review_threads(self.gh, self.owner, self.name, self.number)
            done = any(t.node_id == thread_id and t.resolved for t in listed)
            return Written(0, "", thread_id) if done else None

        try:
            await self.effects.once(f"{key}:resolve", "resolve_thread", find, make)
        except GitHubError as error:  # the finding is fixed and answered; an open thread is no harm
            log.warning("%s#%s: cannot resolve thread %s: %s", self.repo, self.number, thread_id, error)
