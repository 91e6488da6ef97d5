"""The `review:` section of `.github/beam.yml`: its defaults, its rules, `--check` messages, the schema."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema

from bot.app.repo_config import config_json_schema, parse_repo_config
from bot.app.repo_config.review_rules import ReviewRules, severity_rank
from bot.app.reviews.selection import instructions_for


def test_defaults_when_the_section_is_absent() -> None:
    rules = parse_repo_config("version: 1\n").config.review
    assert rules == ReviewRules()
    assert (rules.max_comments, rules.severity, rules.tone, rules.max_calls) == (10, "nit", "concise", None)
    assert rules.path_instructions == {}
    assert rules.linter_enabled("ruff") and rules.linter_enabled("shellcheck")
    # The measured default (docs/review.md, "Figures"): one structured pass over the whole change,
    # its findings posted unchecked; focused passes and verification are a repository's choice.
    assert (rules.focus, rules.passes, rules.verify) == (False, 1, False)


def test_a_full_section_is_read() -> None:
    text = (
        "review:\n"
        "  path_instructions:\n"
        "    'src/**/*.py': Check that errors carry a BEM code.\n"
        "    docs/: Spelling only.\n"
        "  max_comments: 3\n"
        "  severity: major\n"
        "  tone: detailed\n"
        "  linters: {shellcheck: false}\n"
        "  max_calls: 2\n"
    )
    result = parse_repo_config(text)
    assert result.ok, result.errors
    rules = result.config.review
    assert rules.max_comments == 3 and rules.severity == "major" and rules.tone == "detailed"
    assert rules.linter_enabled("ruff") and not rules.linter_enabled("shellcheck")
    assert instructions_for(rules, ["src/app/x.py", "README.md", "docs/a.md"]) == [
        ("src/**/*.py", "Check that errors carry a BEM code.", ["src/app/x.py"]),
        ("docs/", "Spelling only.", ["docs/a.md"]),
    ]
    # A repository may only lower the server's limit of chunked calls.
    assert rules.calls_limit(3) == 2 and rules.calls_limit(1) == 1
    assert ReviewRules().calls_limit(3) == 3
    assert parse_repo_config("review:\n  linters: false\n").config.review.linter_enabled("ruff") is False


def test_severity_order_and_threshold() -> None:
    assert [severity_rank(s) for s in ("nit", "minor", "major", "critical")] == [0, 1, 2, 3]
    rules = ReviewRules(severity="major")
    assert [rules.posts(s) for s in ("nit", "minor", "major", "critical")] == [False, False, True, True]


def test_bad_values_get_one_clear_message_each_with_its_line() -> None:
    text = (
        "version: 1\n"
        "review:\n"
        "  severity: huge\n"
        "  tone: loud\n"
        "  max_comments: 0\n"
        "  linters: yes-please\n"
        "  max_coments: 3\n"
        "  path_instructions:\n"
        "    'src/**': ''\n"
    )
    result = parse_repo_config(text)
    assert not result.ok
    assert result.config.review == ReviewRules()  # the defaults apply
    assert sorted(zip(result.lines, result.errors, strict=True), key=lambda p: p[0] or 0) == [
        (3, "review.severity: 'huge' is not a severity; choose from nit, minor, major, critical"),
        (4, "review.tone: 'loud' is not a tone; choose from concise, detailed"),
        (5, "review.max_comments: 0 is outside the allowed range; the minimum is 1"),
        (
            6,
            "review.linters: expected true, false or a mapping of linter names to true or false, "
            "got 'yes-please'",
        ),
        (
            7,
            "review.max_coments: unknown setting; did you mean 'max_comments'? valid settings are "
            "path_instructions, max_comments, severity, tone, linters, max_calls, focus, passes, verify",
        ),
        (8, "review.path_instructions: the instruction for 'src/**' is empty"),
    ]


def test_a_linter_value_names_the_linter() -> None:
    result = parse_repo_config("review:\n  linters: {ruff: maybe, Bad Name: true}\n")
    assert result.errors == ["review.linters.ruff: expected true or false, got 'maybe'"]
    result = parse_repo_config("review:\n  linters: {Bad Name: true}\n")
    assert result.errors == [
        "review.linters: 'Bad Name' is not a linter name (lower-case letters, digits, - and _)"
    ]


def test_check_prints_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "beam.yml"
    path.write_text("review:\n  max_comments: 500\n", encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "bot.app.repo_config", "--check", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1
    message = "review.max_comments: 500 is outside the allowed range; the maximum is 50"
    assert result.stdout == f"{path}:2: {message}\n"


def test_the_schema_describes_the_section() -> None:
    schema = config_json_schema()
    good = {"review": {"severity": "minor", "path_instructions": {"src/**": "x"}, "linters": {"ruff": False}}}
    jsonschema.validate(good, schema)
    for bad in ({"review": {"severity": "huge"}}, {"review": {"tone": "loud"}}, {"review": {"max_calls": 0}}):
        try:
            jsonschema.validate(bad, schema)
        except jsonschema.ValidationError:
            continue
        raise AssertionError(f"the schema accepts {json.dumps(bad)}")
