"""Linters as evidence (issue 21): the real ruff and shellcheck on a checkout folder, only findings on
changed lines kept, the repository's own configuration never read, and a linter that is missing,
too slow or too loud skipped and named, never fatal."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from bot.app.context import linters
from bot.app.context.linters import lint_skipped, run_linters
from bot.beam.sandbox import SandboxRoot

pytestmark = pytest.mark.anyio

CODE = "import os\n\n\ndef collect(item, bucket=[]):\n    bucket.append(item)\n    return bucket\n"
SCRIPT = "#!/usr/bin/env bash\nset -e\nrm -rf $DIR/*\necho $1\n"


def tree(tmp_path: Path) -> SandboxRoot:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "app.py").write_text(CODE)
    (tmp_path / "deploy").write_text(SCRIPT)  # a shell script by its shebang
    # The repository's own settings would silence both: they must not be read.
    (tmp_path / "pyproject.toml").write_text('[tool.ruff.lint]\nignore = ["B006", "F401"]\n')
    (tmp_path / "ruff.toml").write_text('[lint]\nignore = ["B006", "F401"]\n')
    (tmp_path / ".shellcheckrc").write_text("disable=SC2115,SC2086\n")
    return SandboxRoot(tmp_path)


async def test_findings_on_changed_lines_are_kept_without_the_repositorys_configuration(
    tmp_path: Path,
) -> None:
    report = await run_linters(tree(tmp_path), {"app.py": {4}, "deploy": {3}})
    assert report.ran == ["ruff", "shellcheck"] and report.missing == [] and report.failed == []
    found = [(f.tool, f.path, f.line, f.code) for f in report.findings]
    assert found == [("ruff", "app.py", 4, "B006"), ("shellcheck", "deploy", 3, "SC2115")]
    # F401 (line 1) and SC2086 (line 4) are real but on unchanged lines: not the pull request's doing.


async def test_a_file_linked_out_of_the_checkout_is_not_read(tmp_path: Path) -> None:
    outside = tmp_path / "outside.py"
    outside.write_text("import os\n")
    root = tmp_path / "tree"
    root.mkdir()
    (root / "link.py").symlink_to(outside)
    report = await run_linters(SandboxRoot(root), {"link.py": {1}})
    assert report.findings == [] and report.ran == []


async def test_review_linters_turns_one_off(tmp_path: Path) -> None:
    report = await run_linters(tree(tmp_path), {"app.py": {4}, "deploy": {3}}, enabled=lambda n: n != "ruff")
    assert report.ran == ["shellcheck"] and {f.tool for f in report.findings} == {"shellcheck"}


def fake_linter(tmp_path: Path, body: str) -> str:
    path = tmp_path / "fake-linter"
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


async def test_a_missing_slow_or_loud_linter_is_skipped_and_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tree(tmp_path / "t")
    slow = fake_linter(tmp_path, "sleep 30")
    (tmp_path / "loud").mkdir()
    loud = fake_linter(tmp_path / "loud", "yes findings")
    binaries = {"ruff": slow, "shellcheck": loud}
    monkeypatch.setattr(linters, "_binary", lambda name: binaries.get(name))
    monkeypatch.setattr(linters, "TIME_CAP", 1.0)
    report = await run_linters(root, {"app.py": {4}, "deploy": {3}})
    assert report.failed == ["ruff", "shellcheck"] and report.findings == []
    assert lint_skipped(report) == ["ruff (failed or over its cap)", "shellcheck (failed or over its cap)"]
    binaries.clear()  # neither installed
    report = await run_linters(root, {"app.py": {4}, "deploy": {3}})
    assert report.missing == ["ruff", "shellcheck"]
    assert lint_skipped(report) == ["ruff (not installed)", "shellcheck (not installed)"]


async def test_a_linter_gets_none_of_the_bots_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tree(tmp_path / "t")
    seen = tmp_path / "env.txt"
    spy = fake_linter(tmp_path, f"env > {seen}; echo '[]'")
    monkeypatch.setattr(linters, "_binary", lambda name: spy if name == "ruff" else None)
    monkeypatch.setenv("BEAM_WEBHOOK_SECRET", "s3cret")
    assert os.environ["BEAM_WEBHOOK_SECRET"] == "s3cret"
    report = await run_linters(root, {"app.py": {4}})
    assert report.ran == ["ruff"]
    names = {line.split("=", 1)[0] for line in seen.read_text().splitlines()}
    assert "BEAM_WEBHOOK_SECRET" not in names and names <= {"PATH", "LANG", "HOME", "PWD", "SHLVL", "_"}
