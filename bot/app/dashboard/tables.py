"""The dashboard's figures as named tables: the one shape the page renders and the exports write.

A table is built once from the queries' results, so the HTML, the CSV and the JSON of a table can
never disagree. Cells are plain values (text, whole numbers, floats, None); links ride beside the
cells (`links`), so an export carries the URL as a column of its own.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime

from bot.app.dashboard.installation_queries import InstallationFigures
from bot.app.dashboard.repo_queries import RepoFigures
from bot.app.dashboard.spans import Span
from bot.app.limits.policy import Prices

Cell = str | int | float | None


@dataclass(frozen=True, slots=True)
class Table:
    name: str  # the export's file name and the table's HTML id
    title: str
    columns: tuple[str, ...]
    rows: list[tuple[Cell, ...]]
    # column index -> the URL of each row's cell there (None: no link in that row)
    links: dict[int, list[str | None]] = field(default_factory=dict)

    def csv(self) -> str:
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(self.columns + tuple(f"{self.columns[i]} url" for i in sorted(self.links)))
        for n, row in enumerate(self.rows):
            writer.writerow(
                tuple(_csv_cell(c) for c in row) + tuple(self.links[i][n] for i in sorted(self.links))
            )
        return out.getvalue()

    def json(self) -> str:
        items = []
        for n, row in enumerate(self.rows):
            item = dict(zip(self.columns, row, strict=True))
            for i in sorted(self.links):
                item[f"{self.columns[i]} url"] = self.links[i][n]
            items.append(item)
        return json.dumps({"table": self.name, "title": self.title, "rows": items}, indent=1)


def _csv_cell(value: Cell) -> Cell:
    # A spreadsheet runs a cell that starts with = + - @ as a formula; error texts come from
    # outside (a model, GitHub), so such a cell is written as text (OWASP "CSV injection").
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value


def day(moment: float) -> str:
    return datetime.fromtimestamp(moment, UTC).strftime("%Y-%m-%d")


def minute(moment: float) -> str:
    return datetime.fromtimestamp(moment, UTC).strftime("%Y-%m-%d %H:%M UTC")


def _cost(prices: Prices, input_tokens: int, output_tokens: int) -> float | None:
    cost = prices.cost(input_tokens, output_tokens)
    return None if cost is None else round(cost, 4)


def _share(part: int, whole: int) -> float | None:
    return None if whole == 0 else round(100.0 * part / whole, 1)


def week_labels(span: Span) -> list[str]:
    return [f"{day(span.week_start(w))}" for w in range(span.weeks)]


def repo_tables(figures: RepoFigures, prices: Prices, web_url: str) -> dict[str, Table]:
    """Every table of a repository's page, by name, in the order the page shows them."""
    repo_url = f"{web_url}/{figures.repo}"
    runs = Table(
        "runs",
        "Runs by command and outcome",
        ("command", "outcome", "runs", "average seconds", "input tokens", "output tokens"),
        [
            (
                g.skill,
                g.status,
                g.runs,
                None if g.timed == 0 else round(g.seconds / g.timed, 1),
                g.input_tokens,
                g.output_tokens,
            )
            for g in figures.runs
        ],
    )
    total_in = sum(g.input_tokens for g in figures.runs)
    total_out = sum(g.output_tokens for g in figures.runs)
    total_cost = _cost(prices, total_in, total_out)
    per_pull = (
        None if total_cost is None or figures.pull_count == 0 else round(total_cost / figures.pull_count, 4)
    )
    cost = Table(
        "cost",
        "Cost",
        (
            "runs",
            "pull requests",
            "input tokens",
            "output tokens",
            "cost (USD)",
            "cost per pull request (USD)",
        ),
        [(sum(g.runs for g in figures.runs), figures.pull_count, total_in, total_out, total_cost, per_pull)],
    )
    pulls = Table(
        "pulls",
        "The most expensive pull requests",
        ("pull request", "runs", "input tokens", "output tokens", "cost (USD)"),
        [
            (
                p.number,
                p.runs,
                p.input_tokens,
                p.output_tokens,
                _cost(prices, p.input_tokens, p.output_tokens),
            )
            for p in figures.pulls
        ],
        {0: [None if p.number is None else f"{repo_url}/pull/{p.number}" for p in figures.pulls]},
    )
    labels = week_labels(figures.span)
    cost_weeks = Table(
        "cost_per_week",
        "Cost per week",
        ("week from", "runs", "input tokens", "output tokens", "cost (USD)"),
        [
            (
                labels[w.week],
                w.runs,
                w.input_tokens,
                w.output_tokens,
                _cost(prices, w.input_tokens, w.output_tokens),
            )
            for w in figures.weekly_tokens
        ],
    )
    posted = sum(figures.findings.values())
    findings = Table(
        "findings",
        "Findings posted",
        ("state", "findings", "share (%)"),
        [*((state, n, _share(n, posted)) for state, n in figures.findings.items()), ("posted", posted, None)],
    )
    finding_weeks = Table(
        "findings_per_week",
        "Findings fixed and dismissed per week",
        ("week from", "fixed", "dismissed"),
        [(labels[w.week], w.fixed, w.dismissed) for w in figures.weekly_findings],
    )
    held = Table(
        "held_pushes",
        "Held pushes waiting for approval",
        ("push", "pull request", "requested by", "branch", "commit", "held since", "expires"),
        [
            (
                h.id,
                h.number,
                h.requester,
                h.branch,
                (h.commit_sha or "")[:12] or None,
                minute(h.created_at),
                None if h.expires_at is None else minute(h.expires_at),
            )
            for h in figures.held
        ],
        {0: [_approval_url(repo_url, h.number, h.approval_comment_id) for h in figures.held]},
    )
    failures = Table(
        "failures",
        "Last failures",
        ("run", "command", "pull request", "code", "message", "when"),
        [
            (f.run_id, f.skill, f.number, f.error_code, _first_line(f.error_message), minute(f.created_at))
            for f in figures.failures
        ],
        {0: [_run_url(f.command_url) for f in figures.failures]},
    )
    tables = (runs, cost, pulls, cost_weeks, findings, finding_weeks, held, failures)
    return {t.name: t for t in tables}


def installation_tables(figures: InstallationFigures, prices: Prices) -> dict[str, Table]:
    repos = Table(
        "repositories",
        "Every repository",
        (
            "repository",
            "installation",
            "runs",
            "failed",
            "input tokens",
            "output tokens",
            "cost (USD)",
            "findings",
            "fixed (%)",
            "dismissed (%)",
            "held pushes",
        ),
        [
            (
                r.repo,
                r.installation_id,
                r.runs,
                r.failed,
                r.input_tokens,
                r.output_tokens,
                _cost(prices, r.input_tokens, r.output_tokens),
                r.findings,
                _share(r.fixed, r.findings),
                _share(r.dismissed, r.findings),
                r.held,
            )
            for r in figures.repos
        ],
    )
    queue = Table(
        "queue",
        "The workers' queue",
        ("queued", "running", "oldest queued since"),
        [
            (
                figures.queue.get("queued", 0),
                figures.queue.get("running", 0),
                None if figures.oldest_queued is None else minute(figures.oldest_queued),
            )
        ],
    )
    return {t.name: t for t in (repos, queue)}


def _approval_url(repo_url: str, number: int | None, comment_id: int | None) -> str | None:
    """The approval comment on GitHub, where the approval is given (and its permission checked)."""
    if number is None:
        return None
    anchor = f"#issuecomment-{comment_id}" if comment_id is not None else ""
    return f"{repo_url}/pull/{number}{anchor}"


def _run_url(command_url: str | None) -> str | None:
    # Stored from GitHub's payload; only a web address is offered as a link (ARCHITECTURE 4.15).
    return command_url if command_url is not None and command_url.startswith("https://") else None


def _first_line(text: str | None) -> str | None:
    if text is None:
        return None
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line[:200]
