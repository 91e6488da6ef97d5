"""`python -m bot.app.repo_config --check FILE`: FILE:LINE messages, duplicate keys refused, missing files."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bot.app.repo_config import parse_repo_config


def check(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bot.app.repo_config", "--check", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_a_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    result = check(tmp_path / "beam.yml")
    assert result.returncode == 2
    assert result.stderr.strip() == f"{tmp_path / 'beam.yml'}: no such file"
    assert "Traceback" not in result.stderr


def test_errors_carry_their_line(tmp_path: Path) -> None:
    path = tmp_path / "beam.yml"
    path.write_text(
        "version: 1\n# who may ask\nskills:\n  - review\n  - deploy\ntrigger_permission: boss\nexpiry: 3d\n",
        encoding="utf-8",
    )
    result = check(path)
    assert result.returncode == 1
    assert result.stdout.splitlines() == [
        f"{path}:5: skills[1]: 'deploy' is not a skill; "
        "choose from review, summarize, commit-notes, ask, author, docs",
        f"{path}:6: trigger_permission: 'boss' is not a permission; "
        "choose from read, triage, write, maintain, admin",
    ]


def test_duplicate_keys_are_refused(tmp_path: Path) -> None:
    text = "skills: [review]\nexpiry: 3d\nskills: []\n"
    result = parse_repo_config(text)
    assert not result.ok
    assert result.errors == [
        "YAML syntax error at line 3, column 1: duplicate key 'skills' (first at line 1)"
    ]
    assert result.lines == [3]
    nested = parse_repo_config("blocked_paths:\n  - a\nexpiry: 1d\nexpiry: 2d\n")
    assert nested.errors[0].endswith("duplicate key 'expiry' (first at line 3)")
    path = tmp_path / "beam.yml"
    path.write_text(text, encoding="utf-8")
    checked = check(path)
    assert checked.returncode == 1
    assert checked.stdout.startswith(f"{path}:3: YAML syntax error at line 3")


def test_a_valid_file_says_so(tmp_path: Path) -> None:
    path = tmp_path / "beam.yml"
    path.write_text("version: 1\nskills: [review, ask]\n", encoding="utf-8")
    result = check(path)
    assert (result.returncode, result.stdout.strip()) == (0, f"{path}: valid")
