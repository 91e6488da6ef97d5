"""Benchmark (issue 43): what a review costs before the model's first call, by the repository's size.

For each size (generated repositories of small files, one pull request changing one file), on a real
disk (`--dir`, default the system's temporary directory; not /dev/shm), served over HTTP by the
suite's `GitHttpServer`, measured in the same run against a baseline of the same run:

- `git diff` of the change in a full clone (the baseline every ratio is against);
- cold review start: no mirror; `update_mirror` (a partial clone) + the reading run's tree
  (`create_run_tree(checkout=False)`) + the change's files written for the linters; against the
  whole checkout a writing run still makes (`create_run_tree()`, every blob fetched and written);
- warm review start: the mirror exists and the pull request got one new commit;
- disk used by one review run (its run directory, and what its fetches added to the mirror), and
  the blobs it fetched;
- `beam-bot run review` (echo model, so the run ends at its first model call) on a local checkout,
  against `git worktree add` of the same commit, which is what it did before.

Run: `.venv/bin/python bench/review_start.py [--sizes 1000,100000] [--repeat 3] [--dir PATH]`.
Prints medians and ratios; asserts nothing about time (the figures go to docs/performance.md).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import pygit2

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.app.git.blob_budget import BlobBudget
from bot.app.git.checkout import Checkouts
from bot.app.git.plumbing import dir_bytes, git_env
from bot.beam.commit_tree import CommitTree
from bot.beam.sandbox import SandboxRoot
from tests.support.git_http import GitHttpServer

TOKEN = "ghs_benchToken"
REPO = "bench/mono"
CHANGED = "pkg000/mod00/file0000000.py"
IDENTITY = {
    "GIT_AUTHOR_NAME": "b",
    "GIT_AUTHOR_EMAIL": "b@b",
    "GIT_COMMITTER_NAME": "b",
    "GIT_COMMITTER_EMAIL": "b@b",
}


def git(*args: str, cwd: Path | None = None, token: str | None = TOKEN) -> str:
    env = {**git_env(token), **IDENTITY}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout


def path_of(i: int) -> str:
    return f"pkg{i // 4000:03d}/mod{(i // 200) % 20:02d}/file{i:07d}.py"


def generate(bare: Path, files: int) -> tuple[str, str]:
    """`files` small files on main by `git fast-import` (fast at a million), and a pull request
    changing one; returns (base, head)."""
    chunks: list[bytes] = [b"commit refs/heads/main\ncommitter b <b@b> 0 +0000\ndata 4\nbase\n"]
    for i in range(files):
        body = f"# file {i}\n".encode() + b"x = 1\n" * 8
        chunks.append(b"M 100644 inline %s\ndata %d\n%s\n" % (path_of(i).encode(), len(body), body))
    chunks.append(b"\n")
    subprocess.run(["git", "fast-import", "--quiet"], cwd=bare, input=b"".join(chunks), check=True)
    base = git("rev-parse", "refs/heads/main", cwd=bare).strip()
    return base, new_commit(bare, base, "# changed by the pull request\n")


def new_commit(bare: Path, parent: str, text: str) -> str:
    """A commit on `parent` changing CHANGED, as refs/pull/1/head."""
    repo = pygit2.Repository(str(bare))
    commit = repo[parent].peel(pygit2.Commit)
    index = pygit2.Index()
    index.read_tree(commit.tree)
    index.add(pygit2.IndexEntry(CHANGED, repo.create_blob(text.encode()), pygit2.GIT_FILEMODE_BLOB))
    sig = pygit2.Signature("b", "b@b", 0, 0)
    sha = str(repo.create_commit("refs/pull/1/head", sig, sig, "change", index.write_tree(repo), [commit.id]))
    return sha


def disk_bytes(path: Path) -> int:
    """What `path` takes on the disk (blocks, as `du` counts them), not the sum of file sizes."""
    total = 0
    for dirpath, _, filenames in os.walk(path):
        for name in filenames:
            total += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
    return total


async def atimed(fn: Callable[[], Awaitable[object]]) -> float:
    start = time.perf_counter()
    await fn()
    return time.perf_counter() - start


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


async def review_start(checkouts: Checkouts, run_id: str, sha: str, url: str) -> tuple[int, int, int]:
    """The reading run's start, as runs/workspace.py makes it; returns (run dir bytes, mirror growth,
    blobs fetched)."""
    refs = ["refs/pull/1/head:refs/pull/1/head", "refs/heads/main:refs/heads/main"]
    await checkouts.update_mirror(REPO, url, TOKEN, refs)
    mirror = checkouts.mirror_path(REPO)
    before = dir_bytes(mirror / "objects")
    tree = await checkouts.create_run_tree(REPO, run_id, sha, f"beam/pr-1/{run_id}", checkout=False)
    budget = BlobBudget(checkouts.mirrors, REPO, 256 << 20)
    view = CommitTree(mirror, sha, fetch=budget, scratch=SandboxRoot(tree.path))
    await anyio.to_thread.run_sync(view.materialise, [CHANGED, ".gitattributes"])
    return disk_bytes(tree.path), dir_bytes(mirror / "objects") - before, budget.fetched


async def bench_size(base: Path, files: int, repeat: int, skip_whole: bool) -> dict[str, float]:
    out: dict[str, list[float]] = {}

    def add(key: str, value: float) -> None:
        out.setdefault(key, []).append(value)

    with GitHttpServer(base / "srv", token=TOKEN) as server:
        bare = server.create_bare(REPO)
        started = time.perf_counter()
        base_sha, head = generate(bare, files)
        print(f"  generated {files} files in {time.perf_counter() - started:.1f} s", flush=True)
        url = server.repo_url(REPO)
        full = base / "full"
        git("clone", "--quiet", "--bare", url, str(full))
        git("fetch", "--quiet", "origin", "+refs/pull/1/head:refs/pull/1/head", cwd=full)
        for i in range(repeat):
            add("git diff", timed(lambda: git("diff", base_sha, head, cwd=full, token=None)))
            cold = Checkouts(base / f"cold{i}", base / f"cold{i}" / "runs")
            run_bytes, grown, fetched = 0, 0, 0

            async def start(cold: Checkouts = cold, i: int = i) -> None:
                nonlocal run_bytes, grown, fetched
                run_bytes, grown, fetched = await review_start(cold, f"r{i}", head, url)

            add("cold review start", await atimed(start))
            add("run dir bytes", run_bytes)
            add("fetched bytes", grown)
            add("blobs fetched", fetched)
            add("mirror bytes", dir_bytes(cold.mirror_path(REPO) / "objects"))
            shutil.rmtree(base / f"cold{i}")
            if skip_whole:
                continue
            whole = Checkouts(base / f"whole{i}", base / f"whole{i}" / "runs")

            async def checkout(whole: Checkouts = whole, i: int = i) -> None:
                refs = ["refs/pull/1/head:refs/pull/1/head", "refs/heads/main:refs/heads/main"]
                await whole.update_mirror(REPO, url, TOKEN, refs)
                await whole.create_run_tree(REPO, f"w{i}", head, f"beam/pr-1/w{i}")

            add("cold whole checkout", await atimed(checkout))
            add("whole run dir bytes", disk_bytes(whole.run_path(REPO, f"w{i}")))
            shutil.rmtree(base / f"whole{i}")
        warm = Checkouts(base / "warm", base / "warm" / "runs")
        await review_start(warm, "first", head, url)
        tip = head
        for i in range(repeat):
            sha = tip = new_commit(bare, tip, f"# push {i}\n")

            async def again(sha: str = sha, i: int = i) -> None:
                await review_start(warm, f"warm{i}", sha, url)

            add("warm review start", await atimed(again))
        # `beam-bot run review` on a local checkout of this size (echo model), and the old way's cost.
        work = base / "work"
        git("clone", "--quiet", str(full), str(work), token=None)
        git("checkout", "--quiet", "-B", "pr", head, cwd=work, token=None)
        env = {k: v for k, v in os.environ.items() if not k.endswith("API_KEY")}
        # As an installed beam-bot starts: from its bytecode. With PYTHONDONTWRITEBYTECODE (set on some
        # build machines) every run compiled its modules again, 0.5 s or more of what was measured.
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        cmd = [sys.executable, "-m", "bot.cli", "run", "review", "--repo", str(work), "--base", "HEAD~1"]
        subprocess.run(cmd, env=env, capture_output=True, check=True)  # untimed: writes the bytecode
        for i in range(repeat):
            add(
                "beam-bot run review",
                timed(lambda cmd=cmd: subprocess.run(cmd, env=env, capture_output=True, check=True)),
            )
            tree = base / f"wt{i}"

            def worktree(tree: Path = tree) -> None:
                git("worktree", "add", "--quiet", "--detach", str(tree), head, cwd=work, token=None)

            add("git worktree add", timed(worktree))
            git("worktree", "remove", "--force", str(tree), cwd=work, token=None)
            add("local git diff", timed(lambda: git("diff", "HEAD~1", "HEAD", cwd=work, token=None)))
    return {key: statistics.median(values) for key, values in out.items()}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="1000,100000")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--skip-whole", action="store_true", help="leave out the whole checkout (slow at 1M)")
    args = parser.parse_args()
    for files in (int(size) for size in args.sizes.split(",")):
        base = Path(tempfile.mkdtemp(prefix="beam-bench-review-", dir=args.dir))
        try:
            print(f"{files} files, work dir {base} ({os.cpu_count()} cores), {args.repeat} repeats, medians:")
            med = anyio.run(bench_size, base, files, args.repeat, args.skip_whole)
        finally:
            shutil.rmtree(base, ignore_errors=True)
        diff = med["git diff"]
        for key in ("git diff", "cold review start", "warm review start", "cold whole checkout"):
            if key not in med:
                continue
            print(f"  {key:28s} {med[key]:8.3f} s  {med[key] / diff:8.1f}x git diff")
        local = med["local git diff"]
        for key in ("local git diff", "beam-bot run review", "git worktree add"):
            print(f"  {key:28s} {med[key]:8.3f} s  {med[key] / local:8.1f}x git diff")
        print(f"  mirror (no blobs)            {med['mirror bytes'] / 1e6:8.1f} MB")
        print(
            f"  one review run: run dir      {med['run dir bytes'] / 1e3:8.1f} kB, fetched "
            f"{med['fetched bytes'] / 1e3:.1f} kB in {med['blobs fetched']:.0f} blob(s)"
        )
        if "whole run dir bytes" in med:
            print(f"  one whole checkout: run dir  {med['whole run dir bytes'] / 1e6:8.1f} MB")


if __name__ == "__main__":
    main()
