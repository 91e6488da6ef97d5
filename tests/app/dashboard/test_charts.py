"""Charts drawn on the server: one bar per value, an axis a reader can count on, escaped labels."""

from __future__ import annotations

from bot.app.dashboard.charts import Series, _nice, bar_chart


def test_one_bar_per_value_and_series() -> None:
    svg = bar_chart(
        "Findings <per> week",
        ["2026-11-01", "2026-11-08"],
        [Series("fixed", [2, 0], "#0a0"), Series("dismissed", [1, 4], "#a60")],
    )
    assert svg.startswith("<svg") and svg.count("<rect") == 4
    assert "Findings &lt;per&gt; week" in svg and "<per>" not in svg
    assert "fixed, 2026-11-01: 2" in svg and "dismissed, 2026-11-08: 4" in svg
    assert "<script" not in svg and "href" not in svg


def test_the_axis_top_is_one_two_or_five_times_a_power_of_ten() -> None:
    assert [_nice(v) for v in (0, 0.03, 1, 3, 7, 12, 4999, 5001)] == [0, 0.05, 1, 5, 10, 20, 5000, 10000]


def test_an_empty_chart_draws_no_bars() -> None:
    svg = bar_chart("Cost per week", ["2026-11-01"], [Series("cost", [0.0], "#00f")], unit="$")
    assert 'height="0.0"' in svg
