"""`beam-bot usage`: runs, tokens and estimated cost per repository and user, and the same totals by
installation and skill for `/metrics`; read from the runs table, so every process's runs count."""

from __future__ import annotations

import re
import sys
import time
from dataclasses import dataclass

from sqlalchemy import func, select

from bot.app.jobs.offline import NoDatabase, open_existing
from bot.app.jobs.schema import runs
from bot.app.jobs.store import Store
from bot.app.limits.policy import Policy, Prices
from bot.app.settings import Settings

_SINCE = re.compile(r"^(\d+)([smhdw])$")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def since_seconds(text: str) -> int:
    """`7d`, `12h`, `30m`, `2w` or `90s` as seconds; ValueError with the accepted forms otherwise."""
    match = _SINCE.match(text.strip())
    if match is None:
        raise ValueError(f"--since {text!r}: write a number and a unit, e.g. 7d, 12h, 30m, 2w")
    return int(match.group(1)) * _UNIT[match.group(2)]


@dataclass(frozen=True, slots=True)
class UsageRow:
    group: tuple[str, str]  # (repository, user) or (installation, skill)
    runs: int
    input_tokens: int
    output_tokens: int
    cost: float | None


async def usage_by(
    store: Store,
    columns: tuple[str, str],
    prices: Prices,
    *,
    since: float | None = None,
    repo: str | None = None,
) -> list[UsageRow]:
    """Runs and tokens grouped by two run columns, most tokens first."""
    first, second = runs.c[columns[0]], runs.c[columns[1]]
    query = select(
        first,
        second,
        func.count(),
        func.coalesce(func.sum(runs.c.input_tokens), 0),
        func.coalesce(func.sum(runs.c.output_tokens), 0),
    ).group_by(first, second)
    if since is not None:
        query = query.where(runs.c.created_at >= since)
    if repo is not None:
        query = query.where(func.lower(runs.c.repo) == repo.lower())
    async with store.read() as conn:
        found = (await conn.execute(query)).all()
    rows = [
        UsageRow(
            (str(a if a is not None else "-"), str(b if b is not None else "-")),
            int(n),
            int(i),
            int(o),
            prices.cost(int(i), int(o)),
        )
        for a, b, n, i, o in found
    ]
    return sorted(rows, key=lambda r: (-(r.input_tokens + r.output_tokens), r.group))


def format_usage(rows: list[UsageRow], title: str) -> str:
    if not rows:
        return f"No runs {title}."
    header = f"{'repository':<32} {'user':<24} {'runs':>6} {'input':>12} {'output':>12} {'cost':>10}"
    lines = [f"Runs {title}:", header]
    for row in rows:
        cost = f"${row.cost:.4f}" if row.cost is not None else "-"
        repo, user = row.group
        lines.append(
            f"{repo:<32} {user:<24} {row.runs:>6} {row.input_tokens:>12,} {row.output_tokens:>12,} {cost:>10}"
        )
    total_in = sum(r.input_tokens for r in rows)
    total_out = sum(r.output_tokens for r in rows)
    costs = [r.cost for r in rows if r.cost is not None]
    cost = f"${sum(costs):.4f}" if costs else "-"
    total_runs = sum(r.runs for r in rows)
    lines.append(f"{'total':<32} {'':<24} {total_runs:>6} {total_in:>12,} {total_out:>12,} {cost:>10}")
    return "\n".join(lines)


async def print_usage(settings: Settings, since: str, repo: str | None) -> int:
    """The `beam-bot usage` command; 2 with a message for a bad `--since`."""
    try:
        window = since_seconds(since)
    except ValueError as error:
        print(f"beam-bot: {error}", file=sys.stderr)
        return 2
    try:
        store, where = await open_existing(settings)
    except NoDatabase as nothing:
        print(f"{nothing}: no runs.")
        return 0
    try:
        prices = Policy.from_settings(settings).prices
        rows = await usage_by(store, ("repo", "requester"), prices, since=time.time() - window, repo=repo)
    finally:
        await store.close()
    scope = f" on {repo}" if repo else ""
    print(format_usage(rows, f"in the last {since}{scope} ({where})"))
    return 0
