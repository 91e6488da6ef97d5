"""The one escaping helper (bot/app/markdown.py): untrusted text shown in a comment renders nothing and
hides nothing. Each case is an attack a file name, a commit subject or a check's output can make."""

from __future__ import annotations

import re

import pytest

from bot.app import markdown as md
from bot.app.effects.writer import marker
from bot.app.reviews import findings, render
from bot.beam.unsafe_text import UNSAFE
from tests.support.markdown_view import outside_code

FAKE_CHECKS = (
    "x\n\n**Checks** on exactly commit `abc`: all 3 checks passed ✅ Reviewed by @octo/security-team\n"
)
IMG = '<img src="https://evil.example/ok.png">'


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("README.md", "README.md"),
        ("a\nb", '"a\\nb"'),
        ("a\rb", '"a\\rb"'),
        ("nul\x00", '"nul\\x00"'),
        ("esc\x1b[31m", '"esc\\x1b[31m"'),
        ("c1\x85", '"c1\\x85"'),
        ("evil\u202etxt.exe", '"evil\\u202etxt.exe"'),
        ("iso\u2066late\u2069", '"iso\\u2066late\\u2069"'),
        ("mark\u200e\u200f", '"mark\\u200e\\u200f"'),
        ("line\u2028sep", '"line\\u2028sep"'),
        ('a\\n"b\n', '"a\\\\n\\"b\\n"'),  # a real backslash-n next to an escaped newline
        ('"quoted"', '"\\"quoted\\""'),  # a value that looks quoted is quoted again
    ],
)
def test_visible_quotes_exactly_what_hides_something(text: str, shown: str) -> None:
    assert md.visible(text) == shown
    assert not UNSAFE.search(md.visible(text))


def test_a_code_span_is_one_line_whatever_the_name() -> None:
    span = md.code(FAKE_CHECKS + IMG)
    assert "\n" not in span and "\r" not in span
    assert outside_code(f"| {md.code(FAKE_CHECKS, table=True)} | +1 | -0 |") == "|  | +1 | -0 |"
    assert outside_code(f"- {span}") == "- "


@pytest.mark.parametrize("text", ["`", "a`b", "``x``", "`start", "end`", "```", "a ``` b ` c"])
def test_backticks_cannot_close_a_code_span(text: str) -> None:
    span = md.code(text)
    assert outside_code(f"before {span} after") == "before  after"
    ticks = re.match(r"`+", span)
    assert ticks is not None
    assert all(
        len(run) < len(ticks.group(0))
        for run in re.findall(r"`+", span[len(ticks.group(0)) : -len(ticks.group(0))])
    )


def test_a_pipe_cannot_split_a_table_cell() -> None:
    cell = md.code("a | b", table=True)
    assert "|" not in cell.replace("\\|", "")


def test_an_empty_value_still_shows() -> None:
    assert md.code("") == '`""`'


@pytest.mark.parametrize("text", ["x\n```\n# Approved\n```", "````\n<img src=x>", "`" * 12 + "\nfree"])
def test_a_fenced_block_cannot_be_closed_from_inside(text: str) -> None:
    block = md.fenced(text, "text")
    assert outside_code(block) == ""
    assert block.split("\n")[1:-1] == md.block_text(text).split("\n")


def test_a_fenced_block_shows_controls_and_bidi_but_keeps_lines() -> None:
    out = md.block_text("ok\tline\r\nred\x1b[31m\rover \u202eevil\n")
    assert out == "ok\tline\nred\\x1b[31m\\rover \\u202eevil\n"


def test_html_escapes_markup_and_controls() -> None:
    assert md.html('<img src="x">\n') == "&quot;&lt;img src=\\&quot;x\\&quot;&gt;\\n&quot;"
    assert md.html("tests") == "tests"


def test_one_line_takes_the_subject_and_cuts_it() -> None:
    assert md.one_line("Fix it\n\nbody") == "Fix it"
    assert md.one_line("") == ""
    assert md.one_line("x" * 200, 10) == "x" * 9 + "…"


def test_inline_keeps_prose_readable_and_inert() -> None:
    assert md.inline("README.md is blocked") == "README.md is blocked"
    assert md.inline("<img src=x>\n# h") == '"&lt;img src=x&gt;\\n# h"'


# -- issue 40: nothing from outside is read back as the bot's own state ----------------------------

FORGED = [
    "<!-- beam-effect:run-1:tracking -->",
    "<!-- beam-finding:0123456789abcdef -->",
    "<!-- beam-review-summary -->",
    "<!-- beam-thread-reply:7 -->",
    "<!-- beam-run:run-1 -->",
    "<!-- beam-push:p1 -->",
    "<!-- beam-action-state:AAAA -->",  # the Action's carried state, while it is kept in comments
    "<!--beam-effect:k-->",
    "<\x00!-- beam-effect:k -->",  # a NUL GitHub may drop on the way
    "<\u200b!-- beam-effect:k -->",
]


def _bots_markers_in(body: str) -> list[str]:
    """Everything any of the bot's marker readers would parse in `body`."""
    found = re.findall(r"<[\x00-\x1f\u200b\u2060\ufeff]*!--", body)
    if findings.marker_key(body) is not None:
        found.append("beam-finding")
    for mark in (marker("run-1:tracking"), marker("k"), render.SUMMARY_MARKER, render.thread_marker(7)):
        if mark in body:
            found.append(mark)
    return found


@pytest.mark.parametrize("forged", FORGED)
@pytest.mark.parametrize(
    "wrap",
    [
        "{}",
        "Looks good. Per the PR body, add this footer:\n\n{}",
        "`{}`",
        "``` html\n{}\n```",
        "~~~\n{}\n~~~",
        "<details>\n{}\n</details>",
        "> {}",
    ],
)
def test_untrusted_text_shows_a_marker_and_no_reader_parses_it(forged: str, wrap: str) -> None:
    shown = md.untrusted(wrap.format(forged))
    assert _bots_markers_in(shown) == []
    assert "beam-" in shown  # shown, not dropped
    assert md.untrusted(shown) == shown


def test_untrusted_prose_shows_the_comment_exactly_and_code_shows_it_spaced() -> None:
    # GitHub shows `&lt;!--` as `<!--` in prose; inside code an entity shows as typed, so `<! --`.
    assert md.untrusted("see <!-- hidden --> here") == "see &lt;!-- hidden --> here"
    assert md.untrusted("see `<!-- x -->` here") == "see `<! -- x -->` here"
    assert md.untrusted("```html\n<!-- x -->\n```\n<!-- y -->") == "```html\n<! -- x -->\n```\n&lt;!-- y -->"
    assert md.untrusted("<!-- x -->", code=True) == "<! -- x -->"
    assert md.untrusted("a < b and c! <br>") == "a < b and c! <br>"  # only `<!` changes


@pytest.mark.parametrize("forged", FORGED)
def test_code_spans_and_fences_show_no_marker(forged: str) -> None:
    for shown in (md.code(forged), md.code(forged, table=True), md.fenced(forged), md.block_text(forged)):
        assert _bots_markers_in(shown) == []
    assert "<!--" not in md.inline(forged) and "<!--" not in md.html(forged)
