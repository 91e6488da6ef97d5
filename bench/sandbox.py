"""Benchmark of the sandbox jail: `list_tree` against `os.walk`, `read_file` against a plain `open`.

Usage: `python bench/sandbox.py [--files N] [--reads N] [--rounds N]`

Generates a repository of N files (default 20,000) in a temporary directory, on /dev/shm when the
machine has it (file creation dominates on disk), and measures in the same run the jail's cost over
the naive baseline, alternating the two. Prints best-of-N times and the ratios; the target is within 2x.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pygit2

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bot.beam.sandbox import DEFAULT_MAX_LIST_ENTRIES, SandboxRoot


def generate(root: Path, files: int) -> list[str]:
    """A repository-like tree: nested directories of small text files, and a `.git` to skip."""
    pygit2.init_repository(str(root), initial_head="main").free()
    rels: list[str] = []
    body = "".join(f"line {n} of some text in the file\n" for n in range(3))
    made: set[Path] = set()
    for i in range(files):
        rel = f"pkg{i // 1000:03d}/mod{(i // 100) % 10}/file{i:05d}.py"
        path = root / rel
        if path.parent not in made:
            path.parent.mkdir(parents=True, exist_ok=True)
            made.add(path.parent)
        path.write_text(body)
        rels.append(rel)
    return rels


def walk_baseline(root: str) -> list[str]:
    """What a naive tool would do: os.walk, skip .git, relative paths, sorted."""
    out: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        rel = os.path.relpath(dirpath, root)
        prefix = "" if rel == "." else rel.replace(os.sep, "/") + "/"
        out.extend(prefix + name for name in filenames)
    out.sort()
    return out


def read_baseline(root: str, rels: list[str]) -> int:
    total = 0
    for rel in rels:
        with open(os.path.join(root, rel), encoding="utf-8") as handle:
            total += len(handle.read())
    return total


def compare(baseline: Callable[[], object], jailed: Callable[[], object], rounds: int) -> tuple[float, float]:
    """Best-of-`rounds` seconds for both, run alternately so machine noise hits both alike."""
    baseline()
    jailed()
    base_samples: list[float] = []
    jail_samples: list[float] = []
    for _ in range(rounds):
        for function, samples in ((baseline, base_samples), (jailed, jail_samples)):
            start = time.perf_counter()
            function()
            samples.append(time.perf_counter() - start)
    return min(base_samples), min(jail_samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=20_000)
    parser.add_argument("--reads", type=int, default=1_000)
    parser.add_argument("--rounds", type=int, default=15)
    options = parser.parse_args()

    base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    with tempfile.TemporaryDirectory(prefix="beam-bench-", dir=base) as tmp:
        root = Path(tmp) / "repo"
        start = time.perf_counter()
        rels = generate(root, options.files)
        print(f"generated {options.files} files in {root.parent} ({time.perf_counter() - start:.2f}s)")

        jail = SandboxRoot(root)
        cap = max(options.files, DEFAULT_MAX_LIST_ENTRIES)
        root_str = str(jail.path)
        assert jail.list_files("", max_entries=cap) == walk_baseline(root_str)

        walk, listing = compare(
            lambda: walk_baseline(root_str), lambda: jail.list_files("", max_entries=cap), options.rounds
        )

        step = max(1, len(rels) // options.reads)
        sample = rels[::step][: options.reads]
        plain, jailed = compare(
            lambda: read_baseline(root_str, sample),
            lambda: [jail.read_text(rel) for rel in sample],
            options.rounds,
        )

    print(
        f"list_tree  {options.files} files: os.walk {walk * 1e3:8.2f} ms   jail {listing * 1e3:8.2f} ms"
        f"   ratio {listing / walk:.2f}x"
    )
    print(
        f"read_file  {len(sample)} files:  open    {plain * 1e3:8.2f} ms   jail {jailed * 1e3:8.2f} ms"
        f"   ratio {jailed / plain:.2f}x"
    )
    worst = max(listing / walk, jailed / plain)
    print(f"target within 2x: {'met' if worst <= 2 else 'NOT met'} (worst {worst:.2f}x)")


if __name__ == "__main__":
    main()
