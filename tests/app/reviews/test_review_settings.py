"""Automatic reviews under an invalid `.github/beam.yml`, without I/O: whether they would run (so the
summary says the file is invalid) or stay quiet, and the summary's line with the code and messages."""

from __future__ import annotations

import pytest

from bot.app.reviews import render
from bot.app.reviews.settings import declared_enabled, settings_of
from bot.app.runs.render import render_config_errors

VALID_ON = "auto_review:\n  enabled: true\n"
INVALID_ON = "auto_review:\n  enabled: true\n  drafts: maybe\n"
INVALID_OFF = "auto_review:\n  enabled: false\n  drafts: maybe\n"
INVALID_SILENT = "auto_review:\n  drafts: maybe\n"
NOT_YAML = "auto_review: {enabled: true\n"


@pytest.mark.parametrize(
    ("text", "server_default", "enabled", "invalid"),
    [
        (None, False, False, False),
        (None, True, True, False),
        (VALID_ON, False, True, False),
        (INVALID_ON, False, True, True),  # the file still says so
        (INVALID_OFF, True, False, True),  # the repository opted out
        (INVALID_SILENT, False, False, True),  # the server decides
        (INVALID_SILENT, True, True, True),
        (NOT_YAML, False, False, True),
        (NOT_YAML, True, True, True),
        ("auto_review: true\n", True, True, True),
        ("auto_review:\n  enabled: 'yes'\n", False, False, True),  # not a boolean: not a statement
    ],
)
def test_whether_automatic_reviews_are_on(
    text: str | None, server_default: bool, enabled: bool, invalid: bool
) -> None:
    settings = settings_of(text, server_default)
    assert (settings.enabled, settings.invalid) == (enabled, invalid)
    if invalid:
        assert settings.config.max_changed_lines == 3000  # the defaults, never half the file


def test_declared_enabled_never_raises() -> None:
    assert declared_enabled("a: &x [*x]\n") is None
    assert declared_enabled("[1, 2]\n") is None
    assert declared_enabled("x" * (64 * 1024 + 1)) is None
    assert declared_enabled("auto_review:\n  enabled: false\n  bogus: 1\n") is False


def test_the_summary_line_carries_the_code_and_the_messages_as_inert_text() -> None:
    hostile = 'auto_review:\n  enabled: true\n  "@everyone ```[x](https://e.example)": 1\n'
    settings = settings_of(hostile, False)
    entry = settings.invalid_entry("a" * 40)
    line = render.entry_line(entry)
    assert line.startswith(
        "- `aaaaaaa`: no review; `.github/beam.yml` on the default branch is invalid (BEM-341)"
    )
    block = line.split("\n")[1:]
    assert block[0] == "  ````text" and block[-1] == "  ````"  # longer than any backtick run inside
    assert "@everyone" in block[1] and "unknown setting" in block[1]
    assert settings_of(hostile, False).invalid_entry("a" * 40) == entry  # the same file, the same line
    assert render.check_output(entry)["title"] == "Skipped: invalid configuration"
    assert "(BEM-341)" in render_config_errors(list(settings.errors))
