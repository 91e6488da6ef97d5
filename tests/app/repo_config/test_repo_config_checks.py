"""`.github/beam.yml`'s checks (issue 22): the settings, their defaults, readable messages with lines,
and the shipped schema's part for them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bot.app.repo_config import RepoConfig, config_json_schema, parse_repo_config
from bot.app.repo_config.checks import check_seconds

CONFIG = """\
version: 1
checks:
  - name: tests
    run: python -m pytest -q -x
  - name: lint
    run: ruff check .
checks_timeout: 10m
checks_required: true
checks_setup: pip install -e .
"""


def test_the_issue_example_parses() -> None:
    result = parse_repo_config(CONFIG)
    assert result.ok, result.errors
    config = result.config
    assert [(c.name, c.run) for c in config.checks] == [
        ("tests", "python -m pytest -q -x"),
        ("lint", "ruff check ."),
    ]
    assert config.checks_seconds == 600 and config.checks_required is True
    assert config.checks_setup == "pip install -e ."


def test_defaults_run_nothing() -> None:
    config = RepoConfig()
    assert config.checks == [] and config.checks_required is False and config.checks_setup is None
    assert config.checks_timeout == "10m" and config.checks_seconds == 600


@pytest.mark.parametrize(
    ("value", "seconds"), [("90s", 90), ("1h30m", 5400), (45, 45), ("120", 120), ("24h", 86400)]
)
def test_timeouts(value: str | int, seconds: int) -> None:
    assert check_seconds(value) == seconds
    assert RepoConfig(checks_timeout=value).checks_seconds == seconds


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("checks_timeout: 2d\n", "checks_timeout: '2d' is not a duration; write e.g. '10m'"),
        ("checks_timeout: 25h\n", "checks_timeout: '25h' is longer than the maximum of 24 hours"),
        ("checks_timeout: 0\n", "checks_timeout: 0 is shorter than the minimum of 1 second"),
        ("checks_timeout: [1m]\n", "checks_timeout: expected a duration"),
        ("checks: [tests]\n", "checks[0]: expected a mapping of settings (key: value), got 'tests'"),
        ("checks:\n  - name: tests\n", "checks[0].run: missing; each check needs a name and a command"),
        (
            "checks:\n  - {name: t, command: x, run: y}\n",
            "checks[0].command: unknown setting; valid settings are name, run",
        ),
        ("checks:\n  - {name: t, run: '  '}\n", "checks[0].run: the command is empty"),
        ("checks:\n  - {name: '-x', run: y}\n", "checks[0].name: '-x' is not a check name"),
        ("checks:\n  - {name: t, run: a}\n  - {name: T, run: b}\n", "checks: two checks are named 'T'"),
        ("checks_required: maybe\n", "checks_required: expected true or false, got 'maybe'"),
        ("checks_setup: 3\n", "checks_setup: expected a string, got 3"),
        ("checks:\n" + "  - {name: a, run: b}\n" * 21, "checks: at most 20 checks, got 21"),
    ],
)
def test_bad_values_are_explained(text: str, message: str) -> None:
    result = parse_repo_config(text)
    assert not result.ok
    assert result.errors[0].startswith(message), result.errors
    assert result.config == RepoConfig()  # defaults apply: a broken file runs no half of its checks


def test_check_names_each_wrong_line(tmp_path: Path) -> None:
    path = tmp_path / "beam.yml"
    path.write_text("version: 1\nchecks:\n  - name: tests\n    command: pytest\nchecks_timeout: soon\n")
    result = subprocess.run(
        [sys.executable, "-m", "bot.app.repo_config", "--check", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"{path}:3: checks[0].run: missing")
    assert lines[1] == f"{path}:4: checks[0].command: unknown setting; valid settings are name, run"
    assert lines[2].startswith(f"{path}:5: checks_timeout: 'soon' is not a duration")


def test_the_schema_describes_checks() -> None:
    schema = config_json_schema()
    props = schema["properties"]
    assert set(props) >= {"checks", "checks_timeout", "checks_required", "checks_setup"}
    check = schema["$defs"]["CheckEntry"]
    assert check["required"] == ["name", "run"] and check["additionalProperties"] is False
    assert props["checks_timeout"]["default"] == "10m"
    shipped = json.loads(Path("schema/beam-config.schema.json").read_text(encoding="utf-8"))
    assert shipped == schema
