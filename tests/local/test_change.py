"""A local change's files: git's list of what changed and libgit2's patches give what libgit2's whole
tree diff gave (the review's prompt must not change because its start got faster)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pygit2
import pytest

from bot.local.change import _tree_diff_files, diff_files
from bot.local.git import EMPTY_TREE, PendingStatus, UsageError


def git(cwd: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t"}
    env |= {"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    done = subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True)
    return done.stdout.strip()


@pytest.fixture(name="repo")
def repo_fixture(tmp_path: Path) -> Path:
    """Two commits whose change holds each kind of file change a pull request can."""
    work = tmp_path / "work"
    git(tmp_path, "init", "-q", "-b", "main", str(work))
    lines = "".join(f"line {i}\n" for i in range(50))
    kept = "".join(f"kept {i}\n" for i in range(30))
    (work / "edited.txt").write_text(lines)
    (work / "gone.txt").write_text("gone\n")
    (work / "blob.bin").write_bytes(b"\0\1\2" * 10)
    (work / "moved_from.txt").write_text(kept)
    (work / "mode.sh").write_text("echo\n")
    (work / "same" / "deep").mkdir(parents=True)
    (work / "same" / "deep" / "untouched.txt").write_text("untouched\n")
    git(work, "add", "-A")
    git(work, "commit", "-qm", "base")
    (work / "edited.txt").write_text(lines.replace("line 25", "LINE 25") + "no newline at the end")
    (work / "gone.txt").unlink()
    (work / "new.txt").write_text("new\n")
    (work / "blob.bin").write_bytes(b"\0\3\2" * 10)
    (work / "moved_from.txt").rename(work / "z_moved_to.txt")
    (work / "z_moved_to.txt").write_text(kept + "one more\n")
    (work / "mode.sh").chmod(0o755)
    (work / "link").symlink_to("edited.txt")
    git(work, "add", "-A")
    git(work, "commit", "-qm", "head")
    return work


def test_the_files_are_those_of_the_whole_tree_diff(repo: Path) -> None:
    base = git(repo, "rev-parse", "HEAD~1")
    files = diff_files(repo, base, "HEAD")
    assert files == _tree_diff_files(pygit2.Repository(str(repo)), base, "HEAD")
    by_name = {f.filename: f for f in files}
    assert sorted(by_name) == [
        "blob.bin",
        "edited.txt",
        "gone.txt",
        "link",
        "mode.sh",
        "new.txt",
        "z_moved_to.txt",
    ]
    assert by_name["z_moved_to.txt"].status == "renamed"
    assert by_name["z_moved_to.txt"].previous_filename == "moved_from.txt"
    assert by_name["gone.txt"].status == "removed" and by_name["new.txt"].status == "added"
    assert by_name["blob.bin"].patch is None  # binary: no patch, as GitHub lists it
    edited = by_name["edited.txt"].patch or ""
    assert "-line 25\n+LINE 25" in edited and edited.endswith("\\ No newline at end of file")


def test_the_first_commit_is_all_added(repo: Path) -> None:
    first = git(repo, "rev-list", "--max-parents=0", "HEAD")
    files = diff_files(repo, EMPTY_TREE, first)
    assert files == _tree_diff_files(pygit2.Repository(str(repo)), EMPTY_TREE, first)
    assert {f.status for f in files} == {"added"} and len(files) == 6


def test_a_commit_git_does_not_know_is_a_usage_error(repo: Path) -> None:
    with pytest.raises(UsageError):
        diff_files(repo, "1" * 40, "HEAD")


def test_the_pending_status_is_git_status(repo: Path) -> None:
    (repo / "new.txt").write_text("changed\n")
    (repo / "untracked.txt").write_text("u\n")
    pending = PendingStatus(repo)
    assert [line.split()[-1] for line in pending.lines()] == ["new.txt", "untracked.txt"]
    pending.close()  # read already: nothing to end
    # Kept once read; the whole output is stripped, so the first line loses its leading space, as before.
    assert pending.lines() == ["M new.txt", "?? untracked.txt"]
    unread = PendingStatus(repo)
    unread.close()  # never read: git is ended, not left behind
    assert unread._process.returncode is not None


def test_run_review_starts_without_the_apps_store() -> None:
    """`beam-bot run`'s code imports no SQLAlchemy (a quarter to half a second of its start) and not
    the author's path, which a review never takes."""
    names = "('sqlalchemy', 'bot.local.author_run')"
    code = f"import sys, bot.local.run; print(sorted(m for m in {names} if m in sys.modules))"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert done.stdout.strip() == "[]"
