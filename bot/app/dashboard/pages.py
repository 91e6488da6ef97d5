"""Every word and tag of the dashboard: HTML built on the server, styled inline, with no script.

The page reads the same without JavaScript (there is none) and fetches nothing from outside the
server (private networks have no CDN). Every value from the database or GitHub passes
`html.escape`; a table's numbers sit beside its chart, so the chart is never the only way to read
them. The forms sign in (the operator's token) and out; nothing on the page changes the bot's state
(approving a held push stays on GitHub, which checks the approver's permission: the page links there).
"""

from __future__ import annotations

import html
from collections.abc import Callable, Mapping, Sequence
from urllib.parse import quote, urlencode

from starlette.responses import HTMLResponse

from bot.app.dashboard.charts import Series, bar_chart
from bot.app.dashboard.installation_queries import InstallationFigures
from bot.app.dashboard.repo_queries import RepoFigures
from bot.app.dashboard.spans import SPANS
from bot.app.dashboard.tables import Cell, Table

_STYLE = """
body{font:15px/1.45 system-ui,sans-serif;margin:1.5rem auto;max-width:72rem;padding:0 1rem;color:#1b1f24}
table{border-collapse:collapse;margin:.4rem 0 1.2rem}th,td{border:1px solid #ccd;padding:.25rem .5rem}
th{background:#f2f4f8;text-align:left}td.n{text-align:right;font-variant-numeric:tabular-nums}
.pair{display:flex;flex-wrap:wrap;gap:1.5rem;align-items:flex-start}nav a{margin-right:.8rem}
.span a{margin-right:.5rem}.span b{margin-right:.5rem}.exports{font-size:.85em}
header{display:flex;justify-content:space-between;align-items:center;border-bottom:1px solid #ccd}
.signin{display:inline-block;padding:.5rem 1rem;background:#1f883d;color:#fff;border-radius:6px;
text-decoration:none}.muted{color:#57606a}form.inline{display:inline}
"""
FIXED_COLOUR = "#1f883d"
DISMISSED_COLOUR = "#9a6700"
COST_COLOUR = "#0969da"


def page(title: str, body: str, *, who: str | None = None, status: int = 200) -> HTMLResponse:
    signed = (
        f'<span>Signed in as <b>{html.escape(who)}</b> <form class="inline" method="post" '
        'action="/dashboard/logout"><button id="signout" type="submit">Sign out</button></form></span>'
        if who
        else ""
    )
    return HTMLResponse(
        f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>{html.escape(title)} · beam-bot</title><style>{_STYLE}</style></head>
<body><header><h1>{html.escape(title)}</h1>{signed}</header>{body}</body></html>
""",
        status_code=status,
        headers=SECURITY_HEADERS,
    )


# No script may run and nothing may load from elsewhere; the page is never framed or cached.
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
}


def signin_page(
    *, configured: bool, error: str | None = None, csrf: str | None = None, status: int | None = None
) -> HTMLResponse:
    """The sign-in page; with `csrf` (BEAM_DASHBOARD_TOKEN is set) also the operator's token form,
    whose hidden field repeats the nonce of the form cookie."""
    problem = f'<p class="err" id="error">{html.escape(error)}</p>' if error else ""
    if not configured:
        body = (
            f"{problem}<p>Sign-in is not available: this server does not know the App's client id and "
            "secret. Set BEAM_CLIENT_ID and BEAM_CLIENT_SECRET (the App's settings page on GitHub "
            "shows both), or register the App through the setup page, which stores them.</p>"
        )
    else:
        body = (
            f"{problem}<p>See what beam-bot did in your repositories, what it cost, and how many of its "
            "findings were acted on.</p>"
            '<p><a class="signin" id="signin" href="/dashboard/login">Sign in with GitHub</a></p>'
        )
    body += (
        '<p class="muted">You see a repository while GitHub says you can read it. Operators may also '
        "send the token of BEAM_DASHBOARD_TOKEN as <code>Authorization: Bearer</code>.</p>"
    )
    if csrf is not None:
        body += (
            '<h2>Operator</h2><form id="token-form" method="post" action="/dashboard/token">'
            f'<input type="hidden" name="csrf" value="{html.escape(csrf)}">'
            '<label>Token (BEAM_DASHBOARD_TOKEN) <input id="operator-token" name="token" type="password" '
            'autocomplete="current-password" required></label> '
            '<button id="token-signin" type="submit">Sign in with the token</button></form>'
        )
    return page("beam-bot dashboard", body, status=status or (400 if error else 200))


def not_found(who: str | None) -> HTMLResponse:
    """The same answer for a repository that does not exist and one the visitor may not read."""
    return page(
        "Not found",
        '<p>There is no such repository here, or you cannot read it. <a href="/dashboard">Back</a></p>',
        who=who,
        status=404,
    )


def home_page(who: str, repos: Sequence[str], *, operator: bool) -> HTMLResponse:
    items = "".join(f'<li><a href="{html.escape(repo_path(r))}">{html.escape(r)}</a></li>' for r in repos)
    listing = (
        f'<ul id="repos">{items}</ul>'
        if repos
        else "<p>GitHub lists no repository of this App you can read.</p>"
    )
    extra = (
        '<p><a id="installation" href="/dashboard/installation">Every repository (operator view)</a></p>'
        if operator
        else ""
    )
    return page("beam-bot dashboard", f"<h2>Your repositories</h2>{listing}{extra}", who=who)


def repo_path(repo: str, suffix: str = "", days: int | None = None) -> str:
    path = f"/dashboard/repos/{quote(repo, safe='/')}{suffix}"
    return path if days is None else f"{path}?{urlencode({'days': days})}"


def repo_page(figures: RepoFigures, tables: Mapping[str, Table], who: str | None) -> HTMLResponse:
    repo, days = figures.repo, figures.span.days

    def export(name: str) -> str:
        return _exports(repo_path(repo, f"/export/{name}", None), days)

    def block(name: str) -> str:
        return render_table(tables[name]) + export(name)

    labels = [str(row[0]) for row in tables["cost_per_week"].rows]
    cost_values = [float(row[4] or 0.0) for row in tables["cost_per_week"].rows]
    token_values = [float(int(row[2] or 0) + int(row[3] or 0)) for row in tables["cost_per_week"].rows]
    priced = any(row[4] is not None for row in tables["cost_per_week"].rows)
    cost_chart = (
        bar_chart("Cost per week", labels, [Series("cost", cost_values, COST_COLOUR)], unit="$")
        if priced
        else bar_chart("Tokens per week", labels, [Series("tokens", token_values, COST_COLOUR)])
    )
    week_rows = tables["findings_per_week"].rows
    findings_chart = bar_chart(
        "Findings fixed and dismissed per week",
        [str(r[0]) for r in week_rows],
        [
            Series("fixed", [float(r[1] or 0) for r in week_rows], FIXED_COLOUR),
            Series("dismissed", [float(r[2] or 0) for r in week_rows], DISMISSED_COLOUR),
        ],
    )
    legend = (
        f'<p class="muted"><span style="color:{FIXED_COLOUR}">■</span> fixed '
        f'<span style="color:{DISMISSED_COLOUR}">■</span> dismissed</p>'
    )
    no_prices = (
        ""
        if priced or not figures.runs
        else '<p class="muted">No prices are configured (BEAM_PRICE_INPUT_PER_MTOK, '
        "BEAM_PRICE_OUTPUT_PER_MTOK): costs show as blank and the chart shows tokens.</p>"
    )
    body = (
        span_links(repo_path(repo), days)
        + '<nav><a href="/dashboard">All your repositories</a></nav>'
        + "<h2>What the bot did</h2>"
        + block("runs")
        + "<h2>What it cost</h2>"
        + no_prices
        + block("cost")
        + f'<div class="pair"><div id="chart-cost">{cost_chart}</div>'
        + f"<div>{block('cost_per_week')}</div></div>"
        + block("pulls")
        + "<h2>Did its findings help</h2>"
        + block("findings")
        + f'<div class="pair"><div id="chart-findings">{findings_chart}{legend}</div>'
        + f"<div>{block('findings_per_week')}</div></div>"
        + "<h2>Held pushes waiting for approval</h2>"
        + '<p class="muted">Approve or reject on GitHub, on the approval comment each one links to.</p>'
        + block("held_pushes")
        + "<h2>Last failures</h2>"
        + block("failures")
    )
    return page(f"{repo} · last {days} days", body, who=who)


def installation_page(
    figures: InstallationFigures, tables: Mapping[str, Table], who: str | None
) -> HTMLResponse:
    days = figures.span.days
    body = (
        span_links("/dashboard/installation", days)
        + '<nav><a href="/dashboard">Your repositories</a></nav>'
        + "<h2>The workers' queue</h2>"
        + render_table(tables["queue"])
        + _exports("/dashboard/installation/export/queue", days)
        + "<h2>Every repository</h2>"
        + render_table(tables["repositories"], link=lambda r: repo_path(str(r), days=days))
        + _exports("/dashboard/installation/export/repositories", days)
    )
    return page(f"All repositories · last {days} days", body, who=who)


def span_links(path: str, days: int) -> str:
    parts = [
        f"<b>{d} days</b>" if d == days else f'<a href="{html.escape(path)}?days={d}">{d} days</a>'
        for d in SPANS
    ]
    return f'<p class="span" id="span">Span: {"".join(parts)}</p>'


def _exports(path: str, days: int) -> str:
    csv_url = html.escape(f"{path}.csv?days={days}")
    json_url = html.escape(f"{path}.json?days={days}")
    name = path.rsplit("/", 1)[-1]
    return (
        f'<p class="exports">Export: <a id="export-{name}-csv" href="{csv_url}" download>CSV</a> · '
        f'<a id="export-{name}-json" href="{json_url}">JSON</a></p>'
    )


def render_table(table: Table, *, link: Callable[[Cell], str] | None = None) -> str:
    """A table with its title as caption; linked cells where the table has links for them."""
    head = "".join(f"<th scope=col>{html.escape(c)}</th>" for c in table.columns)
    rows = []
    for n, row in enumerate(table.rows):
        cells = []
        for i, value in enumerate(row):
            text = _cell(value)
            url = table.links.get(i, [None] * len(table.rows))[n]
            if url is None and i == 0 and link is not None and value is not None:
                url = link(value)
            if url is not None:
                text = f'<a href="{html.escape(url)}">{text}</a>'
            numeric = isinstance(value, int | float) and not isinstance(value, bool)
            cells.append(f'<td class="n">{text}</td>' if numeric else f"<td>{text}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    if not rows:
        rows.append(f'<tr><td colspan="{len(table.columns)}" class="muted">None in this span.</td></tr>')
    return (
        f'<table id="table-{html.escape(table.name)}"><caption>{html.escape(table.title)}</caption>'
        f"<thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


def _cell(value: Cell) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:,.4f}".rstrip("0").rstrip(".") if not value.is_integer() else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return html.escape(value)
