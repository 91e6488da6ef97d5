"""`beam-bot pending`: the held pushes in the store, newest first, with their state and age."""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import select

from bot.app.jobs.store import Store, build_url, pending_pushes
from bot.app.settings import Settings


def _age(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds)}s"


def format_rows(rows: list[dict[str, Any]], now: float) -> str:
    if not rows:
        return "No held pushes."
    header = f"{'id':<10} {'state':<11} {'age':>5}  {'repository':<30} {'branch':<40} commit"
    lines = [header]
    for row in rows:
        where = f"{row['repo']}#{row['number']}" if row["number"] is not None else row["repo"]
        commit = (row["commit_sha"] or "")[:12]
        age = _age(now - float(row["created_at"]))
        lines.append(
            f"{row['id']:<10} {row['state']:<11} {age:>5}  {where:<30} {row['branch'] or '':<40} {commit}"
        )
    return "\n".join(lines)


async def list_pending(store: Store, limit: int = 200) -> list[dict[str, Any]]:
    query = select(pending_pushes).order_by(pending_pushes.c.created_at.desc()).limit(limit)
    async with store.read() as conn:
        return [dict(row._mapping) for row in (await conn.execute(query))]


async def print_pending(settings: Settings) -> int:
    secret = settings.database_url.get_secret_value() if settings.database_url else None
    store = await Store.open(build_url(secret, settings.work_dir))
    try:
        print(format_rows(await list_pending(store), time.time()))
    finally:
        await store.close()
    return 0
