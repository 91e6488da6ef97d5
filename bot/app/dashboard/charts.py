"""Bar charts as inline SVG, drawn on the server: no script, no outside asset, readable when printed.

A chart is decoration over a table that holds the same numbers (the page puts one beside each
chart), so it carries a `<title>` per bar and `role="img"` with a label, and nothing else needs it.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass

WIDTH = 480
HEIGHT = 180
_PAD_LEFT = 48
_PAD_BOTTOM = 28
_PAD_TOP = 10


@dataclass(frozen=True, slots=True)
class Series:
    name: str
    values: Sequence[float]
    colour: str  # a CSS colour; the page's legend repeats it


def bar_chart(title: str, labels: Sequence[str], series: Sequence[Series], *, unit: str = "") -> str:
    """Grouped bars, one group per label; the axis' top is the largest value, rounded up."""
    top = _nice(max((v for s in series for v in s.values), default=0.0))
    plot_w = WIDTH - _PAD_LEFT - 8
    plot_h = HEIGHT - _PAD_BOTTOM - _PAD_TOP
    groups = max(len(labels), 1)
    group_w = plot_w / groups
    bar_w = max(group_w * 0.8 / max(len(series), 1), 1.0)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-label="{html.escape(title)}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" class="chart">',
        f"<title>{html.escape(title)}</title>",
        f'<line x1="{_PAD_LEFT}" y1="{_PAD_TOP + plot_h}" x2="{WIDTH - 8}" y2="{_PAD_TOP + plot_h}" '
        'stroke="#888"/>',
        f'<text x="{_PAD_LEFT - 4}" y="{_PAD_TOP + 8}" text-anchor="end" font-size="10">'
        f"{html.escape(_number(top, unit))}</text>",
        f'<text x="{_PAD_LEFT - 4}" y="{_PAD_TOP + plot_h}" text-anchor="end" font-size="10">0</text>',
    ]
    for g, label in enumerate(labels):
        x0 = _PAD_LEFT + g * group_w + group_w * 0.1
        for s_index, s in enumerate(series):
            value = s.values[g] if g < len(s.values) else 0.0
            h = 0.0 if top == 0 else plot_h * value / top
            x = x0 + s_index * bar_w
            y = _PAD_TOP + plot_h - h
            parts.append(
                f'<rect x="{x:.1f}" y="{y:.1f}" width="{bar_w:.1f}" height="{h:.1f}" fill="{s.colour}">'
                f"<title>{html.escape(f'{s.name}, {label}: {_number(value, unit)}')}</title></rect>"
            )
        parts.append(
            f'<text x="{x0 + group_w * 0.4:.1f}" y="{HEIGHT - 10}" text-anchor="middle" font-size="9">'
            f"{html.escape(label[5:] if len(label) == 10 else label)}</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


def _nice(value: float) -> float:
    """1, 2 or 5 times a power of ten, at least `value` (an axis a reader can count on)."""
    if value <= 0:
        return 0.0
    step = 1.0
    while step * 10 <= value:
        step *= 10
    while step > value:
        step /= 10
    for factor in (1, 2, 5, 10):
        if step * factor >= value:
            return step * factor
    return step * 10


def _number(value: float, unit: str) -> str:
    if unit == "$":
        return f"${value:,.2f}"
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.2f}"
