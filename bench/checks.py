"""Benchmark: what the checks jail costs, against baselines measured in the same run.

- start-up: `true` in the jail (a 3-file tree mounted as its overlay included) against `sh -c true` bare.
  Target: under 50 ms of overhead.
- what the jail's bounds cost (issue 27): `true` in the jail as shipped (seccomp filter, memory cgroup
  where the bot has one, read-only `/` and `/dev`, bwrap's options from a descriptor) against the same
  jail without the filter and the cgroup, and both against a bare `bwrap --ro-bind / / true`.
  Target: the filter and the cgroup add at most 50 ms per check.
- a small pytest suite (40 files, 200 tests) in the jail against the same suite run bare with the
  same interpreter and the same pytest. Target: at most 1.1x.
- the tree: a check of `true` on a tree of 2,000 and 20,000 files (jail start with the tree mounted;
  it was copied before issue 43, and bench/checks_start.py sets the two side by side) against `git
  worktree add` of the same tree. Target: at most 1.2x.

Work happens under /dev/shm when present (where run trees belong; ARCHITECTURE.md section 9), and
`git worktree add` writes there too, so both sides write to the same kind of filesystem.
Run: `.venv/bin/python bench/checks.py [--repeat R]` (root or not; needs bubblewrap).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.app.checks.bwrap import interpreter_prefix
from bot.app.checks.jail import CheckSpec, JailLimits, _run_checks, jail_status, run_checks

LIMITS = JailLimits(timeout_s=300)
PYTEST_PACKAGES = ("pytest", "_pytest", "pluggy", "iniconfig", "packaging", "py.py")


def _median(samples: list[float]) -> float:
    return statistics.median(samples)


def _timed_sync(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


async def _timed(fn: Callable[[], Awaitable[object]]) -> float:
    start = time.perf_counter()
    await fn()
    return time.perf_counter() - start


async def _jail(
    tree: Path, command: str, scratch: Path, cache: Path | None = None, weaken: frozenset[str] = frozenset()
) -> None:
    run = run_checks if not weaken else functools.partial(_run_checks, weaken=weaken)
    (outcome,) = await run(
        tree, [CheckSpec("bench", command)], limits=LIMITS, scratch=scratch, cache_dir=cache
    )
    if outcome.status != "passed":
        raise SystemExit(f"the jailed command failed: {outcome}")


def _cache_with_pytest(root: Path) -> Path:
    """A check cache holding the bot's own pytest, so both sides run the same one."""
    import pytest

    site_packages = Path(pytest.__file__).resolve().parents[1]
    site = root / "cache" / "site"
    site.mkdir(parents=True)
    for name in PYTEST_PACKAGES:
        source = site_packages / name
        if source.is_dir():
            shutil.copytree(source, site / name)
        elif source.exists():
            shutil.copy2(source, site / name)
    return root / "cache"


def _suite(root: Path) -> Path:
    tree = root / "suite"
    (tree / "tests").mkdir(parents=True)
    (tree / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    for i in range(40):
        body = "".join(f"def test_{i}_{j}():\n    assert add({j}, {i}) == {i + j}\n\n" for j in range(5))
        (tree / "tests" / f"test_mod{i}.py").write_text(f"from calc import add\n\n\n{body}")
    (tree / "conftest.py").write_text("import sys, os\nsys.path.insert(0, os.path.dirname(__file__))\n")
    return tree


def _repo(root: Path, files: int) -> Path:
    repo = root / f"repo{files}"
    for i in range(files):
        path = repo / f"d{i // 100}" / f"f{i}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"file {i}\n")
    env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@x", "GIT_COMMITTER_NAME": "b"}
    env["GIT_COMMITTER_EMAIL"] = "b@x"
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "tree"]):
        subprocess.run(["git", *args], cwd=repo, env=env, check=True)
    return repo


def _worktree_add(repo: Path, target: Path) -> None:
    subprocess.run(["git", "worktree", "add", "-q", "--detach", str(target), "HEAD"], cwd=repo, check=True)


def _worktree_remove(repo: Path, target: Path) -> None:
    shutil.rmtree(target)
    subprocess.run(["git", "worktree", "prune"], cwd=repo, check=True)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    state = jail_status()
    if not state.available:
        raise SystemExit(state.reason)
    base = "/dev/shm" if Path("/dev/shm").is_dir() else None
    root = Path(tempfile.mkdtemp(prefix="beam-bench-checks-", dir=base))
    try:
        await _run(root, args.repeat)
    finally:
        shutil.rmtree(root, ignore_errors=True)


async def _run(root: Path, repeat: int) -> None:
    state = jail_status()
    scratch = root / "scratch"
    python = str(interpreter_prefix() / "bin" / "python3")
    tiny = root / "tiny"
    tiny.mkdir()
    for name in ("a.py", "b.py", "README"):
        (tiny / name).write_text("x = 1\n")

    # Interleaved, so a busy moment of the shared machine hits both sides alike.
    bare_true, jail_true = [], []
    for _ in range(repeat * 3):
        bare_true.append(_timed_sync(lambda: subprocess.run(["/bin/sh", "-c", "true"], check=True)))
        jail_true.append(await _timed(lambda: _jail(tiny, "true", scratch)))
    overhead_ms = (_median(jail_true) - _median(bare_true)) * 1000
    print(
        f"start-up: bare {_median(bare_true) * 1000:.1f} ms, jailed {_median(jail_true) * 1000:.1f} ms;"
        f" overhead {overhead_ms:.1f} ms (target < 50 ms)"
    )

    # The bounds of issue 27: the filter and the cgroup, against the jail without them and bare bwrap.
    bare_bwrap, shipped, unbounded = [], [], []
    no_bounds = frozenset({"seccomp", "cgroup"})
    for _ in range(repeat * 3):
        bare_bwrap.append(
            _timed_sync(lambda: subprocess.run(["bwrap", "--ro-bind", "/", "/", "true"], check=True))
        )
        shipped.append(await _timed(lambda: _jail(tiny, "true", scratch)))
        unbounded.append(await _timed(lambda: _jail(tiny, "true", scratch, weaken=no_bounds)))
    added_ms = (_median(shipped) - _median(unbounded)) * 1000
    print(
        f"bounds: bare bwrap {_median(bare_bwrap) * 1000:.1f} ms, jail without filter and cgroup"
        f" {_median(unbounded) * 1000:.1f} ms, as shipped {_median(shipped) * 1000:.1f} ms"
        f" ({state.reason}); the filter and the cgroup add {added_ms:.1f} ms"
        f" ({_median(shipped) / _median(bare_bwrap):.2f}x bare bwrap; target < 50 ms added)"
    )

    suite = _suite(root)
    cache = _cache_with_pytest(root)
    pytest_cmd = "python -m pytest -q -p no:cacheprovider tests"
    bare_env = {
        "PATH": f"{interpreter_prefix()}/bin:/usr/bin:/bin",
        "HOME": str(root),
        "PYTHONPATH": str(cache / "site"),
        "LANG": "C.UTF-8",
    }
    bare_suite, jail_suite = [], []
    for _ in range(repeat):
        bare_suite.append(
            _timed_sync(
                lambda: subprocess.run(
                    [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
                    cwd=suite,
                    env=bare_env,
                    check=True,
                    capture_output=True,
                )
            )
        )
        jail_suite.append(await _timed(lambda: _jail(suite, pytest_cmd, scratch, cache)))
    ratio = _median(jail_suite) / _median(bare_suite)
    print(
        f"pytest suite (200 tests): bare {_median(bare_suite):.3f} s, jailed {_median(jail_suite):.3f} s;"
        f" {ratio:.2f}x (target <= 1.1x)"
    )

    for files in (2000, 20000):
        repo = _repo(root, files)
        wt, cp = [], []
        for i in range(repeat):
            target = root / f"wt{files}-{i}"
            wt.append(_timed_sync(functools.partial(_worktree_add, repo, target)))
            _worktree_remove(repo, target)
            cp.append(await _timed(functools.partial(_jail, repo, "true", scratch)))
        ratio = _median(cp) / _median(wt)
        print(
            f"tree, {files} files: git worktree add {_median(wt):.3f} s, jailed start"
            f" {_median(cp):.3f} s; {ratio:.2f}x (target <= 1.2x)"
        )


if __name__ == "__main__":
    asyncio.run(main())
