"""`as_text`: GitHub's markup in a model's answer or a review as a terminal shows it, code untouched."""

from __future__ import annotations

import pytest

from bot.local.terminal_text import as_text


@pytest.mark.parametrize(
    ("markdown", "shown"),
    [
        ("# Summary\n\nText.", "Summary\n=======\n\nText."),
        ("## What changed ##\nText.", "What changed\n------------\nText."),
        ("### Risks\n- none", "Risks\n- none"),
        ("This **fixes** the __greeting__.", "This fixes the greeting."),
        ("An *important* and _quiet_ word.", "An important and quiet word."),
        ("See [the docs](https://example.com/a) now.", "See the docs (https://example.com/a) now."),
        ("[https://example.com](https://example.com)", "https://example.com"),
        ("At <https://example.com/x>.", "At https://example.com/x."),
        ("![a chart](chart.png)", "image: a chart (chart.png)"),
        ("Call `read_file(**kw)` once.", "Call read_file(**kw) once."),
        ("A \\*star\\* and a \\_line\\_.", "A *star* and a _line_."),
        ("Ok<!-- beam:marker {} --> &amp; <b>done</b>", "Ok & done"),
        ("<details><summary>How</summary>\n\nRead it.\n</details>", "How:\n\nRead it."),
    ],
)
def test_markup_becomes_its_text(markdown: str, shown: str) -> None:
    assert as_text(markdown) == shown


@pytest.mark.parametrize(
    "prose",
    [
        "snake_case_name and a_b_c stay",
        "2 * 3 * 4 is 24",
        "* a bullet stays a bullet",
        "a path like src/*/x.py stays",
        "~~struck~~ text says it was struck",
    ],
)
def test_what_is_not_markup_stays_as_written(prose: str) -> None:
    assert as_text(prose) == prose


def test_a_fenced_block_is_its_code_indented_and_untouched() -> None:
    markdown = "Before.\n\n```python\ndef f(**kw):\n\n    return a_b  # **not bold**\n```\nAfter."
    assert as_text(markdown) == ("Before.\n\n    def f(**kw):\n\n        return a_b  # **not bold**\nAfter.")


def test_a_suggestion_is_a_diff_of_the_lines_it_replaces() -> None:
    markdown = "Use a plus.\n```suggestion\n    return a + b\n```"
    assert (
        as_text(markdown, ["    return a - b"]) == "Use a plus.\n- " + "    return a - b\n+     return a + b"
    )


def test_an_answer_that_opens_with_code_keeps_its_indent() -> None:
    assert as_text("```\nx = 1\n```") == "    x = 1"
