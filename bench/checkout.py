"""Benchmark: time to a sandbox ready on a pull request's head, `Checkouts` against the git CLI.

Serves a generated repository (20,000 files by default) over real HTTP with `GitHttpServer`, then
measures, interleaved and in the same run:

- cold: no mirror yet. `Checkouts.update_mirror` + `create_run_tree` against a full `git clone`
  (`clone --no-checkout`, fetch `refs/pull/1/head`, `checkout -b`).
- warm: the mirror exists and the PR got one new commit. `update_mirror` + `create_run_tree` against
  `git fetch` into a bare mirror + `git worktree add` (target: within 1.2x), plus, for reference, the
  same fetch with libgit2's `checkout_tree` instead of git's checkout.

Run: `.venv/bin/python bench/checkout.py [--files N] [--repeat R] [--dir PATH]`.
Work happens under /dev/shm when present (file creation dominates; ARCHITECTURE.md section 9).
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

from bot.app.git.checkout import Checkouts
from bot.app.git.plumbing import git_env
from tests.support.git_http import GitHttpServer

TOKEN = "ghs_benchToken"
REPO = "bench/big"


def generate(server: GitHttpServer, files: int) -> str:
    """A repository of `files` small files in 2-level directories; returns the PR head sha."""
    content = {
        f"pkg{i // 400:03d}/mod{(i // 20) % 20:02d}/file{i:05d}.py": f"# file {i}\n" + "x = 1\n" * 40
        for i in range(files)
    }
    server.seed(REPO, content)
    head = server.commit(REPO, {"pkg000/mod00/file00000.py": "# changed by the PR\n"}, branch="feature")
    server.create_pull_ref(REPO, 1, head)
    return head


def new_pr_commit(server: GitHttpServer, n: int) -> str:
    sha = server.commit(REPO, {"pkg000/mod00/file00001.py": f"# push {n}\n"}, branch="feature")
    server.create_pull_ref(REPO, 1, sha)
    return sha


def git(*args: str, cwd: Path | None = None) -> None:
    subprocess.run(["git", *args], cwd=cwd, env=git_env(TOKEN), check=True, capture_output=True)


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


async def atimed(fn: Callable[[], Awaitable[object]]) -> float:
    start = time.perf_counter()
    await fn()
    return time.perf_counter() - start


async def bench(base: Path, files: int, repeat: int) -> dict[str, list[float]]:
    results: dict[str, list[float]] = {k: [] for k in ("clone", "cold", "worktree", "warm", "libgit2")}
    with GitHttpServer(base / "srv", token=TOKEN) as server:
        started = time.perf_counter()
        generate(server, files)
        print(f"generated {files} files in {time.perf_counter() - started:.1f} s")
        url = server.repo_url(REPO)
        refs = ["refs/pull/1/head:refs/pull/1/head", "refs/heads/main:refs/heads/main"]

        for i in range(repeat):
            sha = server.ref_sha(REPO, "refs/pull/1/head")
            assert sha is not None
            dest = base / f"clone{i}"

            def clone(dest: Path = dest, sha: str = sha) -> None:
                git("clone", "--quiet", "--no-checkout", url, str(dest))
                git("fetch", "--quiet", "origin", "refs/pull/1/head", cwd=dest)
                git("checkout", "--quiet", "-b", "beam/pr-1/bench", sha, cwd=dest)

            results["clone"].append(timed(clone))
            shutil.rmtree(dest)

            checkouts = Checkouts(base / f"cold{i}", base / f"cold{i}" / "runs")

            async def cold(checkouts: Checkouts = checkouts, sha: str = sha) -> None:
                await checkouts.update_mirror(REPO, url, TOKEN, refs)
                await checkouts.create_run_tree(REPO, "cold", sha, "beam/pr-1/bench")

            results["cold"].append(await atimed(cold))
            shutil.rmtree(base / f"cold{i}")

        # Warm: both mirrors exist and each iteration brings one new commit to fetch.
        checkouts = Checkouts(base / "warm", base / "warm" / "runs")
        await checkouts.update_mirror(REPO, url, TOKEN, refs)
        libgit2 = Checkouts(base / "warm-libgit2")
        await libgit2.update_mirror(REPO, url, TOKEN, refs)
        mirror = base / "git-mirror.git"
        git("init", "--quiet", "--bare", str(mirror))
        git("fetch", "--quiet", url, *["+" + r for r in refs], cwd=mirror)
        for i in range(repeat):
            sha = new_pr_commit(server, i)
            tree_dir = base / f"wt{i}"

            def worktree(sha: str = sha, tree_dir: Path = tree_dir, i: int = i) -> None:
                git("fetch", "--quiet", url, "+refs/pull/1/head:refs/pull/1/head", cwd=mirror)
                git("worktree", "add", "--quiet", "-b", f"beam/pr-1/w{i}", str(tree_dir), sha, cwd=mirror)

            async def warm(sha: str = sha, i: int = i) -> None:
                await checkouts.update_mirror(REPO, url, TOKEN, refs[:1])
                await checkouts.create_run_tree(REPO, f"w{i}", sha, f"beam/pr-1/w{i}")

            async def via_libgit2(sha: str = sha, i: int = i) -> None:
                await libgit2.update_mirror(REPO, url, TOKEN, refs[:1])
                await anyio.to_thread.run_sync(libgit2_tree, libgit2, base / f"lg{i}", sha, f"beam/pr-1/w{i}")

            order = [("worktree", None), ("warm", warm), ("libgit2", via_libgit2)]
            for name, coro in order if i % 2 == 0 else order[::-1]:
                if coro is None:
                    results[name].append(timed(worktree))
                else:
                    results[name].append(await atimed(coro))
            shutil.rmtree(tree_dir)
            git("worktree", "prune", cwd=mirror)
            shutil.rmtree(checkouts.run_path(REPO, f"w{i}"))
            shutil.rmtree(base / f"lg{i}")
    return results


def libgit2_tree(checkouts: Checkouts, path: Path, sha: str, branch: str) -> None:
    """The libgit2 way to the same tree: init + alternates + `checkout_tree`."""
    repo = pygit2.init_repository(str(path))
    info = path / ".git" / "objects" / "info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "alternates").write_text(f"{checkouts.mirror_path(REPO) / 'objects'}\n")
    repo = pygit2.Repository(str(path))
    commit = repo[sha].peel(pygit2.Commit)
    repo.create_branch(branch, commit)
    repo.checkout_tree(commit.tree, strategy=pygit2.enums.CheckoutStrategy.FORCE)
    repo.set_head(f"refs/heads/{branch}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--files", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--dir", type=Path, default=Path("/dev/shm") if Path("/dev/shm").is_dir() else None)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="beam-bench-", dir=args.dir))
    try:
        print(f"work dir {base} ({os.cpu_count()} cores), {args.repeat} repeats, medians:")
        results = anyio.run(bench, base, args.files, args.repeat)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    med = {name: statistics.median(values) for name, values in results.items()}
    rows = [
        ("cold: git clone + fetch PR + checkout (baseline)", "clone", "clone"),
        ("cold: Checkouts.update_mirror + create_run_tree", "cold", "clone"),
        ("warm: git fetch + git worktree add (baseline)", "worktree", "worktree"),
        ("warm: Checkouts.update_mirror + create_run_tree", "warm", "worktree"),
        ("warm: update_mirror + libgit2 checkout_tree (reference)", "libgit2", "worktree"),
    ]
    for label, key, against in rows:
        print(f"{label:58s} {med[key]:7.3f} s  {med[key] / med[against]:5.2f}x")
    verdict = "PASS" if med["warm"] <= 1.2 * med["worktree"] else "MISS"
    print(f"target warm <= 1.2x git worktree add: {verdict} ({med['warm'] / med['worktree']:.2f}x)")


if __name__ == "__main__":
    main()
