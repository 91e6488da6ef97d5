"""The repository page's numbers: seeded runs, costs and ledger states give exactly the figures shown,
for each span, on SQLite and (with BEAM_TEST_POSTGRES_URL) PostgreSQL."""

from __future__ import annotations

import pytest

from bot.app.dashboard.repo_queries import repo_figures
from bot.app.dashboard.spans import Span
from bot.app.dashboard.tables import repo_tables
from bot.app.jobs.store import Store
from bot.app.limits.policy import Prices
from tests.support import dashboard_data

pytestmark = pytest.mark.anyio
NOW = dashboard_data.SEEDED_AT
REPO = "octo-org/widgets"
PRICES = Prices(3.0, 15.0)  # dollars per million input and output tokens


async def test_seven_days(seeded_store: Store) -> None:
    store = seeded_store
    figures = await repo_figures(store, REPO, Span(7, NOW))
    tables = repo_tables(figures, PRICES, "https://github.com")
    assert tables["runs"].rows == [
        ("author", "succeeded", 1, 120.0, 10000, 2000),
        ("review", "failed", 1, 5.0, 500, 0),
        ("review", "succeeded", 2, 40.0, 4000, 800),
    ]
    # 14,500 input tokens at $3 and 2,800 output tokens at $15 per million, over pull requests 1 and 2.
    assert tables["cost"].rows == [(4, 2, 14500, 2800, 0.0855, 0.0428)]
    assert tables["pulls"].rows == [(2, 2, 10500, 2000, 0.0615), (1, 2, 4000, 800, 0.024)]
    assert tables["pulls"].links[0] == [
        f"https://github.com/{REPO}/pull/2",
        f"https://github.com/{REPO}/pull/1",
    ]
    assert tables["findings"].rows == [
        ("open", 1, 25.0),
        ("fixed", 2, 50.0),
        ("dismissed", 1, 25.0),
        ("posted", 4, None),
    ]
    assert [row[1:] for row in tables["findings_per_week"].rows] == [(2, 1)]
    assert [row[1:] for row in tables["cost_per_week"].rows] == [(4, 14500, 2800, 0.0855)]
    [held] = tables["held_pushes"].rows
    assert held[1:4] == (2, "octocat", held[3]) and held[3].startswith("beam/pr-2/author-")
    assert tables["held_pushes"].links[0] == [f"https://github.com/{REPO}/pull/2#issuecomment-555"]
    [failure] = tables["failures"].rows
    assert failure[1:5] == ("review", 2, "BEM-380", "GitHub did not answer")


async def test_thirty_and_ninety_days(seeded_store: Store) -> None:
    store = seeded_store
    month = repo_tables(await repo_figures(store, REPO, Span(30, NOW)), PRICES, "https://github.com")
    assert month["runs"].rows[-1] == ("review", "succeeded", 4, 40.0, 8000, 1600)
    assert month["cost"].rows[0][:4] == (6, 3, 18500, 3600)
    # Five weeks end now: the runs 20 and 21 days ago fall in the third, the recent ones in the last.
    assert [row[1] for row in month["cost_per_week"].rows] == [0, 0, 2, 0, 4]
    assert month["findings"].rows[-1] == ("posted", 5, None)
    quarter = repo_tables(await repo_figures(store, REPO, Span(90, NOW)), PRICES, "https://github.com")
    assert len(quarter["cost_per_week"].rows) == 13
    assert sum(int(row[1] or 0) for row in quarter["cost_per_week"].rows) == 7
    assert quarter["findings"].rows == [
        ("open", 3, 50.0),
        ("fixed", 2, 33.3),
        ("dismissed", 1, 16.7),
        ("posted", 6, None),
    ]


async def test_without_prices_costs_are_blank_not_zero(seeded_store: Store) -> None:
    store = seeded_store
    tables = repo_tables(await repo_figures(store, REPO, Span(7, NOW)), Prices(), "https://github.com")
    assert tables["cost"].rows == [(4, 2, 14500, 2800, None, None)]


async def test_an_empty_repository_shows_empty_tables(store: Store) -> None:
    tables = repo_tables(
        await repo_figures(store, "nobody/nothing", Span(7, NOW)), PRICES, "https://github.com"
    )
    assert tables["runs"].rows == [] and tables["failures"].rows == []
    assert tables["cost"].rows == [(0, 0, 0, 0, 0.0, None)]
