"""The token and cost block of `/metrics`: totals by installation and skill, read from the runs table
at scrape time, so runs of every worker process count (no per-process counter to add up)."""

from __future__ import annotations

from bot.app.jobs.store import Store
from bot.app.limits.policy import Prices
from bot.app.limits.report import usage_by


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


async def usage_exposition(store: Store, prices: Prices) -> str:
    """Prometheus text: `beam_run_tokens_total` and, with prices set, `beam_run_cost_dollars_total`."""
    rows = await usage_by(store, ("installation_id", "skill"), prices)
    tokens = [
        "# HELP beam_run_tokens_total Tokens used by skill runs, by installation, skill and direction.",
        "# TYPE beam_run_tokens_total counter",
    ]
    costs = [
        "# HELP beam_run_cost_dollars_total Estimated dollars of skill runs, by installation and skill.",
        "# TYPE beam_run_cost_dollars_total counter",
    ]
    runs = [
        "# HELP beam_runs_total Skill runs started, by installation and skill.",
        "# TYPE beam_runs_total counter",
    ]
    for row in rows:
        labels = f'installation="{_escape(row.group[0])}",skill="{_escape(row.group[1])}"'
        tokens.append(f'beam_run_tokens_total{{{labels},direction="input"}} {row.input_tokens}')
        tokens.append(f'beam_run_tokens_total{{{labels},direction="output"}} {row.output_tokens}')
        runs.append(f"beam_runs_total{{{labels}}} {row.runs}")
        if row.cost is not None:
            costs.append(f"beam_run_cost_dollars_total{{{labels}}} {row.cost!r}")
    lines = tokens + runs + (costs if len(costs) > 2 else [])
    return "\n".join(lines) + "\n"
