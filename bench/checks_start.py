"""Benchmark: a check's start by the size of its tree (the overlay against the copy it replaced).

`true` as a check in the jail as shipped (the tree mounted as an overlay) and in the jail that copies
the tree (what a kernel without the overlay falls back to), on generated trees of 1,000 and 100,000
small files in directories of 100, against a bare `bwrap --ro-bind / / true` measured in the same run
and interleaved with them. Target: the jail as shipped at most 2x bare bwrap on 100,000 files; the
ratio of 100,000 files to 1,000 files shows whether a start still grows with the tree.

Trees are on the machine's disk (under /var/tmp, as a run's tree on a server is), not /dev/shm.

`--stages` says where a start goes instead, on the 100,000-file tree: the jail's own bwrap command
line with `true` as its command, outside and inside the check's fresh memory cgroup; then with the
jail's Python (`-I -S`) started, with ctypes imported, the overlay step alone (its mounts, the
filter, the uid and the limits), and the whole start (the wrapper's bash and the check's sh too),
each against bare bwrap in the same run, interleaved; `check` is the whole of `run_checks`, the
bot's side included.
Run: `.venv/bin/python bench/checks_start.py [--repeat R] [--dir DIR] [--stages]` (root or not; needs
bubblewrap).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.app.checks import bwrap
from bot.app.checks.jail import CheckSpec, JailLimits, _run_checks, _tree_script, jail_status
from bot.app.checks.probe import probe

LIMITS = JailLimits(timeout_s=600)
SIZES = (1_000, 100_000)


def _tree(root: Path, files: int) -> Path:
    tree = root / f"tree{files}"
    for start in range(0, files, 100):
        folder = tree / f"d{start // 100}"
        folder.mkdir(parents=True)
        for i in range(start, min(start + 100, files)):
            (folder / f"f{i}.txt").write_text(f"file {i}\n")
    (tree / ".git").mkdir()
    (tree / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    return tree


async def _jail(tree: Path, scratch: Path, weaken: frozenset[str]) -> float:
    start = time.perf_counter()
    (outcome,) = await _run_checks(
        tree, [CheckSpec("bench", "true")], limits=LIMITS, scratch=scratch, weaken=weaken
    )
    elapsed = time.perf_counter() - start
    if outcome.status != "passed":
        raise SystemExit(f"the jailed command failed: {outcome}")
    mounted = "copying it instead" not in outcome.output_tail
    if not weaken and not mounted:
        raise SystemExit(f"the overlay could not be mounted here: {outcome.output_tail}")
    return elapsed


def _bare() -> float:
    start = time.perf_counter()
    subprocess.run(["bwrap", "--ro-bind", "/", "/", "true"], check=True)
    return time.perf_counter() - start


async def _run(root: Path, repeat: int) -> None:
    scratch = root / "scratch"
    print(jail_status().reason)
    medians: dict[tuple[int, str], float] = {}
    for files in SIZES:
        started = time.perf_counter()
        tree = _tree(root, files)
        print(f"{files:,} files generated in {time.perf_counter() - started:.1f} s")
        bare: list[float] = []
        overlay: list[float] = []
        copy: list[float] = []
        # The copy of 100,000 files takes seconds: fewer of those, the cheap ones interleaved around each.
        copies = repeat if files <= 10_000 else max(2, repeat // 3)
        for i in range(repeat):
            bare.append(_bare())
            overlay.append(await _jail(tree, scratch, frozenset()))
            if i < copies:
                copy.append(await _jail(tree, scratch, frozenset({"overlay"})))
        b, o, c = (statistics.median(x) for x in (bare, overlay, copy))
        medians[files, "overlay"], medians[files, "copy"] = o, c
        print(
            f"{files:>7,} files: bare bwrap {b * 1000:.1f} ms; jail, overlay {o * 1000:.1f} ms"
            f" ({o / b:.2f}x bare; target <= 2x at 100,000); jail, copy {c * 1000:.1f} ms"
            f" ({c / b:.2f}x bare); copy/overlay {c / o:.1f}x"
        )
        shutil.rmtree(tree)
    small, large = SIZES
    for how in ("overlay", "copy"):
        grown = medians[large, how] / medians[small, how]
        print(f"{how}: {large:,} files against {small:,}: {grown:.2f}x")


_STAGES = ("bwrap, no cgroup", "bwrap", "+ python", "+ ctypes", "overlay step", "whole jail")


def _stage(tree: Path, scratch: Path, stage: str) -> float:
    """One start of the jail `run_checks` makes, cut after `stage` (the command line made the same way)."""
    found = probe()
    assert found.bwrap is not None
    limits = bwrap.Rlimits(
        processes=LIMITS.processes,
        memory_bytes=LIMITS.memory_bytes,
        cpu_seconds=LIMITS.cpu_seconds,
        file_bytes=LIMITS.file_bytes,
        open_files=LIMITS.open_files,
    )
    layout = bwrap.Layout(tree, scratch, LIMITS.tmpfs_bytes, env={"PATH": "/usr/bin:/bin"})
    status, mark = os.pipe(), os.pipe()
    script = _tree_script(mark[1], status[1]) + 'exec /bin/sh -c "$1"\n'
    uid = bwrap.JAIL_UID_BASE if found.privileged else None
    started = bwrap.launch(
        found.bwrap,
        layout,
        script,
        ["true"],
        uid=uid,
        rlimits=limits,
        status_fd=status[1],
        cgroups=found.cgroups,
        mark_fd=mark[1],
    )
    argv = started.argv
    options_end = argv.index("--") + 1  # bwrap's own: the command follows
    python = str(bwrap.interpreter_prefix() / "bin" / "python3")
    if stage == "bwrap, no cgroup":
        argv = [*argv[argv.index(found.bwrap) : options_end], "/usr/bin/true"]
    elif stage == "bwrap":
        argv = [*argv[:options_end], "/usr/bin/true"]
    elif stage == "+ python":
        argv = [*argv[:options_end], python, "-I", "-S", "-c", "pass"]
    elif stage == "+ ctypes":
        argv = [*argv[:options_end], python, "-I", "-S", "-c", "import ctypes"]
    elif stage == "overlay step":
        argv = [*argv[: argv.index("--", options_end) + 1], "/usr/bin/true"]
    try:
        start = time.perf_counter()
        subprocess.run(argv, pass_fds=(status[1], mark[1], *started.fds), env=bwrap.BWRAP_ENV, check=True)
        return time.perf_counter() - start
    finally:
        started.close()
        for fd in (*status, *mark):
            os.close(fd)
        if started.cgroup is not None:
            started.cgroup.remove()


async def _stages(root: Path, repeat: int) -> None:
    scratch = root / "scratch"
    scratch.mkdir()
    tree = _tree(root, SIZES[-1])
    times: dict[str, list[float]] = {name: [] for name in ("bare bwrap", *_STAGES, "check")}
    for _ in range(repeat):
        times["bare bwrap"].append(_bare())
        for stage in _STAGES:
            times[stage].append(_stage(tree, scratch, stage))
        times["check"].append(await _jail(tree, scratch, frozenset()))
    bare = statistics.median(times["bare bwrap"])
    before = 0.0
    for name, values in times.items():
        took = statistics.median(values)
        step = "" if name in ("bare bwrap", "check") else f"; this step {(took - before) * 1000:+.1f} ms"
        before = took if name not in ("bare bwrap", "check") else before
        print(f"{name:18} {took * 1000:7.1f} ms  {took / bare:5.1f}x bare{step}")


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--dir", default="/var/tmp", help="where the trees are generated (a real disk)")
    parser.add_argument("--stages", action="store_true", help="where a start goes, on 100,000 files")
    args = parser.parse_args()
    state = jail_status()
    if not state.available:
        raise SystemExit(state.reason)
    root = Path(tempfile.mkdtemp(prefix="beam-bench-checks-start-", dir=args.dir))
    root.chmod(0o755)
    try:
        await (_stages if args.stages else _run)(root, args.repeat)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
