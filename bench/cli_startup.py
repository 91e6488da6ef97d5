"""Benchmark: how soon `beam-bot` answers a wrong argument, against a bare Python start in the same run.

A command-line mistake (an unknown skill, a missing `--repo` path, a URL that names no pull request)
is checked before the framework and the App are imported; this prints the median wall time of each
such error and of `python -c pass` on this machine, and their ratio, so the figure means the same on
a fast laptop and on a loaded CI runner. Before the arguments were checked first, an unknown skill
cost the whole import of `bot.local.run` (about 2 s warm on a 2-core box, 4.5 s cold).

    .venv/bin/python bench/cli_startup.py [--runs 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CASES = {
    "python -c pass": ["-c", "pass"],
    "run <unknown skill>": ["-m", "bot.cli", "run", "no-such-skill", "--repo", str(ROOT)],
    "run --repo <missing>": ["-m", "bot.cli", "run", "review", "--repo", "/nonexistent/checkout"],
    "review <bad URL>": ["-m", "bot.cli", "review", "https://example.com/not-a-pull"],
    "--help": ["-m", "bot.cli", "--help"],
}


def median_seconds(args: list[str], runs: int, env: dict[str, str]) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([sys.executable, *args], env=env, capture_output=True, check=False, timeout=120)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    runs = parser.parse_args().runs
    with tempfile.TemporaryDirectory() as home:
        # No gh CLI token lookup and no developer's key: the error path alone is timed.
        env = {**os.environ, "PATH": "/usr/bin:/bin", "HOME": home, "GITHUB_TOKEN": "x"}
        baseline = median_seconds(CASES["python -c pass"], runs, env)
        print(f"{'case':24} {'median':>9} {'× python -c pass':>18}")
        for name, args in CASES.items():
            took = median_seconds(args, runs, env)
            print(f"{name:24} {took * 1000:7.0f}ms {took / baseline:17.1f}×")


if __name__ == "__main__":
    main()
