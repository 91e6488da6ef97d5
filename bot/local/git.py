"""The local checkout as `beam-bot run` reads it: its top level, its default branch, the base of the
change, and a temporary worktree the run works in (the user's own checkout is left as it was)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

DEFAULT_PROTECTED = ("main", "master")
# git's empty tree: the base of a change whose first commit is the root.
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"


class UsageError(Exception):
    """Bad input to `beam-bot run` (exit code 2); the message says what to do."""


class Interrupted(Exception):
    """git was killed by the signal that stops the command (Ctrl-C reaches the whole process group):
    not git's failure to report, but the stop that `stop.stoppable` reports in its one line."""

    def __init__(self, signum: signal.Signals) -> None:
        super().__init__(f"git stopped by {signum.name}")
        self.signal = signum


def check_stopped(returncode: int) -> None:
    """Raises `Interrupted` when git's exit status says a stop signal killed it."""
    if returncode < 0 and -returncode in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        raise Interrupted(signal.Signals(-returncode))


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=False, timeout=120
    )
    check_stopped(done.returncode)
    if done.returncode != 0:
        raise UsageError(done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "git failed")
    return done.stdout.strip()


def try_git(repo: Path, *args: str) -> str | None:
    """git's answer, or None when it fails (a missing ref, an unset option)."""
    try:
        return git(repo, *args)
    except UsageError:
        return None


def check_repository(path: Path) -> Path:
    """The repository's top level, or UsageError when `path` is missing or not a git work tree."""
    if not path.exists():
        raise UsageError(f"{path}: no such directory")
    if not path.is_dir():
        raise UsageError(f"{path} is not a directory")
    try:
        return Path(git(path, "rev-parse", "--show-toplevel"))
    except UsageError:
        raise UsageError(f"{path} is not a git repository (or a checkout of one)") from None


def commit_of(repo: Path, ref: str, option: str) -> str:
    found = try_git(repo, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}")
    if not found:
        raise UsageError(f"{option} {ref!r} is not a commit of {repo}")
    return found


def default_branch(repo: Path) -> str | None:
    """The branch a pull request would go into: the origin's HEAD, else `main`, else `master`."""
    target = try_git(repo, "symbolic-ref", "--quiet", "refs/remotes/origin/HEAD")
    if target:
        return target.removeprefix("refs/remotes/")
    for name in DEFAULT_PROTECTED:
        if try_git(repo, "rev-parse", "--verify", "--quiet", f"refs/heads/{name}"):
            return name
    return None


def protected_refs(repo: Path) -> list[str]:
    """main, master and the origin's default branch when the checkout knows it."""
    refs = list(DEFAULT_PROTECTED)
    branch = default_branch(repo)
    name = branch.removeprefix("origin/") if branch else None
    if name and name not in refs:
        refs.append(name)
    return refs


@dataclass(frozen=True, slots=True)
class Base:
    """Where the change starts: `label` as the prompt names it (`main`), `sha` the merge base."""

    label: str
    sha: str


def change_base(repo: Path, head: str, base: str | None) -> Base:
    """The base of the change `…head`, as GitHub diffs a pull request (from the merge base).

    Without `--base`: the merge base with the default branch, or `HEAD~1` when the head is on that
    branch already (its merge base is the head itself, and the change would be empty).
    """
    if base is not None:
        commit_of(repo, base, "--base")
        merge = try_git(repo, "merge-base", base, head)
        if not merge:
            raise UsageError(f"--base {base!r} has no common history with {head[:12]}")
        return Base(base, merge)
    branch = default_branch(repo)
    if branch is not None:
        merge = try_git(repo, "merge-base", branch, head)
        if merge and merge != head:
            return Base(branch.removeprefix("origin/"), merge)
    parent = try_git(repo, "rev-parse", "--verify", "--quiet", f"{head}~1^{{commit}}")
    if parent:
        return Base(f"{head[:12]}~1", parent)
    return Base("(nothing: the first commit)", EMPTY_TREE)


class PendingStatus:
    """`git status --porcelain` lines (changes and untracked files a run at a commit leaves out),
    started now and read later: on a big checkout git reads every file's metadata and every directory
    (0.3 to 0.5 s at 100,000 files), about as long as Python takes to import the run's code, so
    `beam-bot run` starts it first and the two share the machine's cores."""

    def __init__(self, repo: Path) -> None:
        self._process = subprocess.Popen(
            ["git", "-C", str(repo), "status", "--porcelain"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self._lines: list[str] | None = None

    def lines(self) -> list[str]:
        """Its lines (none where git fails); `Interrupted` where a stop signal killed it."""
        if self._lines is None:
            try:
                out, _ = self._process.communicate(timeout=120)
            except subprocess.TimeoutExpired:
                self.close()
                raise
            check_stopped(self._process.returncode)
            text = out.strip() if self._process.returncode == 0 else ""
            self._lines = [line for line in text.splitlines() if line.strip()]
        return self._lines

    def close(self) -> None:
        """Ends git if its answer was never read (the run stopped before it needed one)."""
        if self._process.poll() is None:
            self._process.kill()
        self._process.communicate()


def working_tree_commit(repo: Path) -> str:
    """A commit of the working tree as it is (untracked files too, ignored ones not) on HEAD, made
    with a temporary index: the user's index, branch and files are not touched. Nothing points at
    it, so git collects it later."""
    with tempfile.TemporaryDirectory(prefix="beam-index-") as scratch:
        env = {**os.environ, "GIT_INDEX_FILE": str(Path(scratch) / "index")}
        for who in ("AUTHOR", "COMMITTER"):  # a throwaway commit: no identity of the user's needed
            env.setdefault(f"GIT_{who}_NAME", "beam-bot run")
            env.setdefault(f"GIT_{who}_EMAIL", "beam-bot@localhost")

        def run(*args: str) -> str:
            done = subprocess.run(
                ["git", "-C", str(repo), *args],
                capture_output=True,
                text=True,
                env=env,
                timeout=120,
                check=False,
            )
            if done.returncode != 0:
                raise UsageError(
                    done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "git failed"
                )
            return done.stdout.strip()

        run("read-tree", "HEAD")
        run("add", "-A")
        tree = run("write-tree")
        return run("commit-tree", tree, "-p", "HEAD", "-m", "beam-bot run: the uncommitted changes")


def head_label(repo: Path, ref: str) -> str:
    """The branch name of `ref` when it is one (`feature`), else the ref as given."""
    if ref == "HEAD":
        return try_git(repo, "symbolic-ref", "--quiet", "--short", "HEAD") or "HEAD"
    return ref


class TemporaryWorktree:
    """`git worktree add --detach` at a commit in a temporary directory, removed again on exit.

    The commit is checked when it is made (a bad `--ref` is a usage error before anything runs); the
    directory exists only inside `with`, so a run stopped between the two (a wrong model setting, a
    signal) leaves nothing in the temporary directory.
    """

    parent: Path
    path: Path

    def __init__(self, repo: Path, ref: str) -> None:
        self.repo = repo
        self.commit = commit_of(repo, ref, "--ref")

    def __enter__(self) -> TemporaryWorktree:
        self.parent = Path(tempfile.mkdtemp(prefix="beam-run-"))
        self.path = self.parent / "tree"
        try:
            git(self.repo, "worktree", "add", "--detach", "--quiet", str(self.path), self.commit)
        except BaseException:
            # Stopped in the middle (a signal while a post-checkout hook ran): the worktree may be
            # registered already, and is removed as after a run.
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        subprocess.run(
            ["git", "-C", str(self.repo), "worktree", "remove", "--force", str(self.path)],
            capture_output=True,
            check=False,
            timeout=120,
        )
        shutil.rmtree(self.parent, ignore_errors=True)
        subprocess.run(
            ["git", "-C", str(self.repo), "worktree", "prune"], capture_output=True, check=False, timeout=120
        )


class ScratchDir:
    """A temporary directory for the few files a reading run writes to disk (the change's files, for
    the linters), removed again on exit. A review, `summarize`, `commit-notes` and `ask` read the
    commit from the repository's objects (bot/beam/commit_tree.py): no worktree is added, so a
    100,000-file checkout costs what the change touches, not the tree."""

    parent: Path
    path: Path

    def __init__(self, repo: Path, ref: str) -> None:
        self.repo = repo
        self.commit = commit_of(repo, ref, "--ref")

    def __enter__(self) -> ScratchDir:
        # Made only inside `with`, as a worktree is: a run stopped before (a wrong model setting, a
        # signal) leaves nothing in the temporary directory.
        self.parent = Path(tempfile.mkdtemp(prefix="beam-run-"))
        self.path = self.parent / "files"
        self.path.mkdir()
        return self

    def __exit__(self, *exc: object) -> None:
        shutil.rmtree(self.parent, ignore_errors=True)
