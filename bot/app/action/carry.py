"""What one workflow run leaves for the next: the pull request's rows, kept in a git ref (state_ref.py).

A run's database is gone when its job ends, so the rows a later run of the same pull request needs
are carried: the automatic review's row (`auto_reviews`: the reviewed head, the summary comment, the
generation), the findings ledger (`review_findings`: what was posted, dismissed or fixed), and a held
push (`pending_pushes`, its commit's bundle in `held_commits` and its run). A run loads them before
its work and saves them after it, so a `synchronize` run reviews only the new range and posts only
new findings, and a `/beam approve <id>` run finds the push it approves and pushes exactly the held
commit (digest-checked, approvals/held_commits.py), as the App does from its database.

What comes back is still checked as if a stranger wrote it: rows of another repository or pull
request are dropped, and where a held push goes (its clone and HTML URLs, its installation) is set
from the run's environment, never read from the rows.
"""

from __future__ import annotations

import base64
import json
import logging
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import anyio.to_thread
from sqlalchemy import Table, insert, select

from bot.app.action.environment import Place
from bot.app.action.state_ref import Snapshot, StateRef
from bot.app.git.plumbing import CheckoutError
from bot.app.github.auth import ONE_INSTALLATION
from bot.app.jobs.schema import auto_reviews, held_commits, pending_pushes, review_findings, runs
from bot.app.jobs.store import Store

log = logging.getLogger("beam.action")

# In the order they are inserted (each row's foreign keys first): a held push's run, the push, its
# commit; the automatic review's row and the findings ledger.
CARRIED: Sequence[Table] = (runs, pending_pushes, held_commits, auto_reviews, review_findings)
# What makes two rows the same row when two runs saved at once (a finding's `id` is only local).
SAME_ROW: dict[str, tuple[str, ...]] = {
    runs.name: ("id",),
    pending_pushes.name: ("id",),
    held_commits.name: ("push_id",),
    auto_reviews.name: ("repo", "number"),
    review_findings.name: ("comment_id",),
}
VERSION = 2
SAVE_TRIES = 3


@dataclass(frozen=True, slots=True)
class Carried:
    """The state a run started from: how many rows, and the state commit (the lease of its save)."""

    rows: int = 0
    commit: str | None = None


def encode(tables: dict[str, list[dict[str, Any]]]) -> bytes:
    return zlib.compress(json.dumps({"version": VERSION, "tables": tables}, separators=(",", ":")).encode())


def decode(data: bytes | None) -> dict[str, list[dict[str, Any]]]:
    """The tables in a state file; empty when there is none or it cannot be read (nothing is carried)."""
    if not data:
        return {}
    try:
        state = json.loads(zlib.decompress(data))
    except (ValueError, zlib.error):
        log.warning("the carried state cannot be read: starting without it")
        return {}
    if (
        not isinstance(state, dict)
        or state.get("version") != VERSION
        or not isinstance(state.get("tables"), dict)
    ):
        return {}
    tables = state["tables"]
    return {k: [r for r in v if isinstance(r, dict)] for k, v in tables.items() if isinstance(v, list)}


async def restore(store: Store, ref: StateRef, place: Place, number: int) -> Carried:
    """Loads the state GitHub holds for the pull request."""
    snapshot: Snapshot = await anyio.to_thread.run_sync(ref.read, number)
    tables = decode(snapshot.data)
    return Carried(await _load(store, tables, place, number) if tables else 0, snapshot.commit)


def _rows(tables: dict[str, list[dict[str, Any]]], table: Table) -> list[dict[str, Any]]:
    names = set(table.c.keys())
    out = []
    for row in tables.get(table.name, []):
        clean = {k: v for k, v in row.items() if k in names}
        if table is held_commits and isinstance(clean.get("pack"), str):
            clean["pack"] = base64.b64decode(clean["pack"])
        out.append(clean)
    return out


def _placed(row: dict[str, Any], place: Place) -> dict[str, Any]:
    """A carried push, sent where the run's environment says: never to a URL from the rows."""
    action = row.get("action")
    if not isinstance(action, dict):
        return row
    fixed = {
        **action,
        "clone_url": place.clone_url,
        "html_url": place.html_url,
        "installation_id": ONE_INSTALLATION,
    }
    return {**row, "action": fixed}


def _carried_order(row: dict[str, Any]) -> int:
    found = row.get("id")
    return found if isinstance(found, int) else 0


async def _load(store: Store, tables: dict[str, list[dict[str, Any]]], place: Place, number: int) -> int:
    count = 0
    repo = place.repo
    async with store.write() as conn:
        pushes = {
            r["id"]
            for r in _rows(tables, pending_pushes)
            if r.get("repo") == repo and r.get("number") == number
        }
        for table in CARRIED:
            rows = _rows(tables, table)
            if table is held_commits:
                rows = [r for r in rows if r.get("push_id") in pushes]
            elif table is runs:
                rows = [{**r, "job_id": None} for r in rows if r.get("repo") == repo]
            elif table is pending_pushes:
                rows = [_placed(r, place) for r in rows if r.get("id") in pushes]
            else:
                rows = [r for r in rows if r.get("repo") == repo and r.get("number") == number]
            if table is review_findings:  # ids are this database's own; the carried order is kept
                rows = [{k: v for k, v in r.items() if k != "id"} for r in sorted(rows, key=_carried_order)]
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
        review_findings: select(review_findings)
        .where(review_findings.c.repo == repo, review_findings.c.number == number)
        .order_by(review_findings.c.id),
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


def merge(
    ours: dict[str, list[dict[str, Any]]], theirs: dict[str, list[dict[str, Any]]]
) -> dict[str, list[dict[str, Any]]]:
    """This run's rows, plus the rows a concurrent run saved that this run does not have."""
    merged: dict[str, list[dict[str, Any]]] = {}
    for table in CARRIED:
        key = SAME_ROW[table.name]
        mine = ours.get(table.name, [])
        have = {tuple(r.get(k) for k in key) for r in mine}
        merged[table.name] = [
            *mine,
            *(r for r in theirs.get(table.name, []) if tuple(r.get(k) for k in key) not in have),
        ]
    return merged


async def save(store: Store, ref: StateRef, repo: str, number: int, carried: Carried) -> str | None:
    """Writes the pull request's rows to its state ref. Returns a problem to report, or None."""
    tables = await _dump(store, repo, number)
    if not any(tables.values()) and carried.commit is None:
        return None
    over = carried.commit
    try:
        for _ in range(SAVE_TRIES):
            if await anyio.to_thread.run_sync(ref.write, number, encode(tables), over):
                return None
            # Another run of the same pull request saved first: keep its rows too, then try again.
            snapshot: Snapshot = await anyio.to_thread.run_sync(ref.read, number)
            log.info("the state of #%d moved during this run: merging with the newer one", number)
            tables, over = merge(tables, decode(snapshot.data)), snapshot.commit
    except CheckoutError as error:
        if error.auth and not tables.get(pending_pushes.name):
            # A review job with `contents: read`: the next run reviews the whole pull request again
            # (and posts only findings GitHub does not show yet). A held push is never dropped so.
            log.warning(
                "this run's review state is not kept: the job's token cannot write refs/beam/state/ "
                "(give the job `contents: write` to review only new commits next time)"
            )
            return None
        hint = " (the job's token needs `contents: write`)" if error.auth else ""
        return f"could not keep this run's state on GitHub{hint}: {error.message}"
    return f"could not keep this run's state on GitHub: it moved {SAVE_TRIES} times during the save"
