"""What one workflow run leaves for the next, kept on GitHub: a hidden marker in the bot's own comment.

A run's database is gone when its job ends, so the rows a later run of the same pull request needs
are carried in a marker: the automatic review's row (`auto_reviews`: the reviewed head, the summary
comment, the generation) and the findings ledger (`review_findings`: what was posted, dismissed or
fixed). and a held push (`pending_pushes`, its commit's bundle in `held_commits` and its run). A run reads
the newest marker of the pull request before its work and writes one after it, so a `synchronize`
run reviews only the new range and posts only new findings, and a `/beam approve <id>` run finds the
push it approves and pushes exactly the held commit (digest-checked, approvals/held_commits.py),
as the App does from its database.

Only comments written by the bot's own login are read: no one else can edit them, so no one else
can write a ledger that hides a finding. The marker is base64 of compressed JSON, which holds no `--`
and so cannot end the HTML comment early.
"""

from __future__ import annotations

import base64
import json
import logging
import re
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Table, insert, select

from bot.app.github.api import GitHubError
from bot.app.github.client import InstallationClient
from bot.app.jobs.schema import auto_reviews, held_commits, pending_pushes, review_findings, runs
from bot.app.jobs.store import Store

log = logging.getLogger("beam.action")

# In the order they are inserted (each row's foreign keys first): a held push's run, the push, its
# commit; the automatic review's row and the findings ledger.
CARRIED: Sequence[Table] = (runs, pending_pushes, held_commits, auto_reviews, review_findings)

VERSION = 1
_MARKER = re.compile(r"\n*<!-- beam-action-state:([A-Za-z0-9+/=]*) -->")
# GitHub refuses a comment body over 65,536 characters; the rest of the body needs room too.
MAX_MARKER_CHARS = 50_000


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


@dataclass(frozen=True, slots=True)
class Carried:
    """The state a run started from: how many rows, and the comment that held them (the next
    run's state goes into the same comment, so a pull request has one)."""

    rows: int = 0
    comment_id: int | None = None


async def restore(store: Store, gh: InstallationClient, repo: str, number: int, login: str) -> Carried:
    """Loads the newest state the bot left on the pull request."""
    owner, name = repo.split("/", 1)
    newest: tuple[float, int, dict[str, Any]] | None = None
    for comment in await gh.list_comments(owner, name, number):
        if comment.user is None or comment.user.login.lower() != login.lower():
            continue
        state = decode(comment.body or "")
        saved = state.get("saved_at") if state is not None else None
        if state is not None and isinstance(saved, int | float) and (newest is None or saved > newest[0]):
            newest = (float(saved), comment.id, state)
    if newest is None:
        return Carried()
    return Carried(await _load(store, newest[2], repo, number), newest[1])


def _rows(state: dict[str, Any], table: Table) -> list[dict[str, Any]]:
    rows = state.get("tables", {}).get(table.name, [])
    names = set(table.c.keys())
    out = []
    for row in rows if isinstance(rows, list) else []:
        if not isinstance(row, dict):
            continue
        clean = {k: v for k, v in row.items() if k in names}
        if table is held_commits and isinstance(clean.get("pack"), str):
            clean["pack"] = base64.b64decode(clean["pack"])
        out.append(clean)
    return out


async def _load(store: Store, state: dict[str, Any], repo: str, number: int) -> int:
    count = 0
    async with store.write() as conn:
        pushes = {r["id"] for r in _rows(state, pending_pushes) if r.get("repo") == repo}
        for table in CARRIED:
            rows = _rows(state, table)
            if table is held_commits:
                rows = [r for r in rows if r.get("push_id") in pushes]
            elif table is runs:
                rows = [{**r, "job_id": None} for r in rows if r.get("repo") == repo]
            else:
                rows = [r for r in rows if r.get("repo") == repo and r.get("number") == number]
            if rows:
                await conn.execute(insert(table), rows)
                count += len(rows)
    return count


async def _dump(store: Store, repo: str, number: int) -> dict[str, list[dict[str, Any]]]:
    mine = (pending_pushes.c.repo == repo) & (pending_pushes.c.number == number)
    push_ids = select(pending_pushes.c.id).where(mine)
    queries = {
        runs: select(runs).where(runs.c.id.in_(select(pending_pushes.c.run_id).where(mine))),
        pending_pushes: select(pending_pushes).where(mine),
        held_commits: select(held_commits).where(held_commits.c.push_id.in_(push_ids)),
        auto_reviews: select(auto_reviews).where(
            auto_reviews.c.repo == repo, auto_reviews.c.number == number
        ),
        review_findings: select(review_findings).where(
            review_findings.c.repo == repo, review_findings.c.number == number
        ),
    }
    tables: dict[str, list[dict[str, Any]]] = {}
    async with store.read() as conn:
        for table in CARRIED:
            found = await conn.execute(queries[table])
            rows = [dict(row) for row in found.mappings()]
            for row in rows:
                if isinstance(row.get("pack"), bytes):
                    row["pack"] = base64.b64encode(row["pack"]).decode()
            tables[table.name] = rows
    return tables


async def _target(store: Store, repo: str, number: int, carried: Carried) -> int | None:
    """The comment the state goes into: the one it came from, else this run's own: the summary of
    an automatic review, or the newest command's tracking comment (an approval comment only when
    there is neither: its body is what a maintainer approves, and an edit makes its reactions void)."""
    if carried.comment_id is not None:
        return carried.comment_id
    candidates = (
        select(auto_reviews.c.summary_comment_id).where(
            auto_reviews.c.repo == repo, auto_reviews.c.number == number
        ),
        select(runs.c.tracking_comment_id)
        .where(runs.c.repo == repo, runs.c.number == number)
        .order_by(runs.c.created_at.desc()),
        select(pending_pushes.c.approval_comment_id)
        .where(pending_pushes.c.repo == repo, pending_pushes.c.number == number)
        .order_by(pending_pushes.c.created_at.desc()),
    )
    async with store.read() as conn:
        for query in candidates:
            found = (await conn.execute(query)).scalars().first()
            if found is not None:
                return int(found)
    return None


async def save(
    store: Store,
    gh: InstallationClient,
    repo: str,
    number: int,
    carried: Carried,
    *,
    on_github: set[str] | frozenset[str] = frozenset(),
) -> str | None:
    """Writes the pull request's rows into the marker. Returns a problem to report, or None: the
    state is kept, or there was nothing to keep (or no comment of the bot's to keep it in).
    `on_github`: held pushes whose commit is on GitHub already (held.py): their bundle may be left out."""
    tables = await _dump(store, repo, number)
    target = await _target(store, repo, number, carried)
    if target is None or not any(tables.values()):
        return None
    problem = None
    marker = encode({"version": VERSION, "saved_at": time.time(), "tables": tables})
    if len(marker) > MAX_MARKER_CHARS:
        log.warning(
            "this run's state is %d characters, more than a comment can carry: held commits are left out",
            len(marker),
        )
        if any(row["push_id"] not in on_github for row in tables[held_commits.name]):
            problem = (
                f"the held commit is too large to carry to the `/beam approve` run ({len(marker)} "
                f"characters; a comment holds {MAX_MARKER_CHARS}): ask for a smaller change"
            )
        tables[held_commits.name] = []
        marker = encode({"version": VERSION, "saved_at": time.time(), "tables": tables})
    owner, name = repo.split("/", 1)
    try:
        comment = await gh.get_comment(owner, name, target)
        await gh.update_comment(owner, name, target, without_marker(comment.body or "") + marker)
    except GitHubError as error:
        return f"could not keep this run's state on the pull request: {error}"
    return problem
