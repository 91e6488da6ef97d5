"""A wrong argument is answered before the heavy imports: the framework's runner, the model client,
the App and its database layer are not loaded when `beam-bot` only has to say what is wrong.

Wall time is not asserted (machines differ; bench/cli_startup.py measures it): a `-c` driver runs
the command in a fresh interpreter and prints which heavy modules are in `sys.modules` afterwards.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.openai_server import without_model_env

# What takes seconds to import, and none of which an argument check needs.
HEAVY = (
    "bot.app",
    "bot.beam.hub",
    "bot.beam.openai_client",
    "bot.beam.sandbox_tools",
    "bot.local.run",
    "bot.local.change_run",
    "bot.local.pull_request",
    "httpx",
    "sqlalchemy",
    "pydantic",
)
DRIVER = """
import json, sys
from bot.cli import main
code = main(sys.argv[2:])
sys.stdout.flush()
loaded = [name for name in sys.argv[1].split(",") if name in sys.modules]
print(json.dumps({"code": code, "loaded": loaded}))
"""


def drive(args: list[str], tmp_path: Path) -> tuple[dict[str, object], str]:
    env = without_model_env(os.environ)
    # No token from the environment or the gh CLI: a URL error must come before the token lookup.
    env.update(HOME=str(tmp_path), PATH="/usr/bin:/bin", GITHUB_TOKEN="ghp_test")
    env.pop("GH_TOKEN", None)
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, ",".join(HEAVY), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert isinstance(report, dict)
    return report, done.stderr


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["run", "no-such-skill", "--repo", "."], "beam-bot run: unknown skill 'no-such-skill'"),
        (["run", "review", "--repo", "/nonexistent/checkout"], "/nonexistent/checkout: no such directory"),
        (["run", "ask", "--repo", "."], "ask needs a question"),
        (["run", "author", "--repo", ".", "--base", "HEAD", "x"], "--base is for review"),
        (["review", "https://example.com/octo/demo/issues/7"], "beam-bot review: "),
        (["ask", "https://github.com/octo/demo/pull/7"], "ask needs a question"),
    ],
)
def test_an_argument_error_loads_no_heavy_module(args: list[str], said: str, tmp_path: Path) -> None:
    repo = Path(__file__).resolve().parents[1]
    args = [str(repo) if arg == "." else arg for arg in args]
    report, stderr = drive(args, tmp_path)
    assert report["code"] == 2
    assert said in stderr
    assert len(stderr.strip().splitlines()) <= 2, stderr  # the message, and at most its "What to do"
    assert report["loaded"] == [], f"an argument error imported {report['loaded']}"
