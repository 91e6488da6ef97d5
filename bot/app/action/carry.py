"""What one workflow run leaves for the next, kept on GitHub: a hidden marker in the bot's own comment.

A run's database is gone when its job ends, so the rows a later run of the same pull request needs
are carried in a marker: the automatic review's row (`auto_reviews`: the reviewed head, the summary
comment, the generation) and the findings ledger (`review_findings`: what was posted, dismissed or
fixed). A run reads the newest marker of the pull request before its work and writes one after it,
into the summary comment (or the tracking comment of a command), so a `synchronize` run reviews only
the new range and posts only new findings, exactly as the App does from its database.

Only comments written by the bot's own login are read: no one else can edit them, so no one else
can write a ledger that hides a finding. The marker is base64 of compressed JSON, which holds no `--`
and so cannot end the HTML comment early.
"""

from __future__ import annotations

import base64
import json
import logging
import re
import zlib
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Table, insert, select

from bot.app.github.api import GitHubError
from bot.app.github.client import InstallationClient
from bot.app.jobs.schema import auto_reviews, review_findings, runs
from bot.app.jobs.store import Store

log = logging.getLogger("beam.action")

CARRIED: Sequence[Table] = (auto_reviews, review_findings)
VERSION = 1
_MARKER = re.compile(r"\n*<!-- beam-action-state:([A-Za-z0-9+/=]*) -->")


def encode(state: dict[str, Any]) -> str:
    packed = base64.b64encode(zlib.compress(json.dumps(state, separators=(",", ":")).encode())).decode()
    return f"\n\n<!-- beam-action-state:{packed} -->"


def decode(body: str) -> dict[str, Any] | None:
    """The state in a body, or None when it has none or it cannot be read (then nothing is carried)."""
    found = _MARKER.search(body)
    if found is None:
        return None
    try:
        state = json.loads(zlib.decompress(base64.b64decode(found.group(1), validate=True)))
    except (ValueError, zlib.error):
        return None
    if not isinstance(state, dict) or state.get("version") != VERSION:
        return None
    return state


def without_marker(body: str) -> str:
    return _MARKER.sub("", body)


async def restore(store: Store, gh: InstallationClient, repo: str, number: int, login: str) -> int:
    """Loads the newest state the bot left on the pull request; the number of rows carried in."""
    owner, name = repo.split("/", 1)
    comments = await gh.list_comments(owner, name, number)
    for comment in reversed(comments):
        if comment.user is None or comment.user.login.lower() != login.lower():
            continue
        state = decode(comment.body or "")
        if state is None:
            continue
        return await _load(store, state, repo, number)
    return 0


async def _load(store: Store, state: dict[str, Any], repo: str, number: int) -> int:
    count = 0
    async with store.write() as conn:
        for table in CARRIED:
            rows = state.get("tables", {}).get(table.name, [])
            names = set(table.c.keys())
            clean = [
                {k: v for k, v in row.items() if k in names}
                for row in rows
                if isinstance(row, dict) and row.get("repo") == repo and row.get("number") == number
            ]
            if clean:
                await conn.execute(insert(table), clean)
                count += len(clean)
    return count


async def save(store: Store, gh: InstallationClient, repo: str, number: int) -> bool:
    """Writes the pull request's rows into the marker of the summary comment, or of the newest
    command's tracking comment; False when the run left no comment of its own to carry them."""
    tables: dict[str, list[dict[str, Any]]] = {}
    async with store.read() as conn:
        for table in CARRIED:
            found = await conn.execute(select(table).where(table.c.repo == repo, table.c.number == number))
            tables[table.name] = [dict(row) for row in found.mappings()]
        summary = await conn.execute(
            select(auto_reviews.c.summary_comment_id).where(
                auto_reviews.c.repo == repo, auto_reviews.c.number == number
            )
        )
        target = summary.scalar()
        if target is None:
            tracking = await conn.execute(
                select(runs.c.tracking_comment_id)
                .where(runs.c.repo == repo, runs.c.number == number, runs.c.tracking_comment_id.is_not(None))
                .order_by(runs.c.created_at.desc())
            )
            target = tracking.scalar()
    if target is None or not any(tables.values()):
        return False
    owner, name = repo.split("/", 1)
    try:
        comment = await gh.get_comment(owner, name, int(target))
        body = without_marker(comment.body or "") + encode({"version": VERSION, "tables": tables})
        await gh.update_comment(owner, name, int(target), body)
    except GitHubError as error:
        log.warning("could not keep this run's review state on the pull request: %s", error)
        return False
    return True
