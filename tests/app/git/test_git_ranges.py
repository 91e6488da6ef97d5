"""`bot/app/git/ranges.py` on real repositories: which commits a push would make new, and what each
changes (issue 28)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pygit2
import pytest

from bot.app.git.ranges import TooManyCommits, describe, landing_shas, merge_base, resolve_refs

GIT = shutil.which("git") or "git"


def commit(
    repo: pygit2.Repository, parents: list[str], files: dict[str, str | None], message: str, who: str = "A"
) -> str:
    index = pygit2.Index()
    if parents:
        index.read_tree(repo[parents[0]].peel(pygit2.Tree))
    for path, body in files.items():
        if body is None:
            index.remove(path)
        else:
            index.add(pygit2.IndexEntry(path, repo.create_blob(body.encode()), pygit2.enums.FileMode.BLOB))
    sig = pygit2.Signature(who, f"{who.lower()}@example.com")
    return str(repo.create_commit(None, sig, sig, message, index.write_tree(repo), parents))


@pytest.fixture
def repo(tmp_path: Path) -> pygit2.Repository:
    return pygit2.init_repository(str(tmp_path / "mirror.git"), bare=True)


def test_the_range_is_every_commit_the_known_tips_lack(repo: pygit2.Repository) -> None:
    root = commit(repo, [], {"README.md": "hi\n"}, "Initial")
    main = commit(repo, [root], {"NEWS.md": "1\n"}, "News")
    fork1 = commit(repo, [root], {"conftest.py": "evil\n"}, "Add a helper\n\nbody", who="Mallory")
    fork2 = commit(repo, [fork1], {"src/a.py": "x\n"}, "Tune")
    bot = commit(repo, [fork2], {"README.md": "hello\n"}, "Fix typo")
    path = Path(repo.path)
    shas = landing_shas(GIT, 30, path, bot, [main], 10)
    assert shas == [fork1, fork2, bot]  # oldest first; main's own commit is not new
    assert landing_shas(GIT, 30, path, bot, [main, fork2], 10) == [bot]  # the run's start, when known
    first = describe(path, shas)[0]
    assert (first.author, first.email, first.subject, first.paths) == (
        "Mallory",
        "mallory@example.com",
        "Add a helper",
        ("conftest.py",),
    )
    assert merge_base(path, main, bot) == root
    with pytest.raises(TooManyCommits):
        landing_shas(GIT, 30, path, bot, [main], 2)


def test_a_merge_of_the_base_changes_only_what_differs_from_both_parents(repo: pygit2.Repository) -> None:
    root = commit(repo, [], {"README.md": "hi\n", ".github/workflows/ci.yml": "a\n"}, "Initial")
    main = commit(repo, [root], {".github/workflows/ci.yml": "b\n"}, "CI on main")
    branch = commit(repo, [root], {"src/a.py": "1\n"}, "Work")
    index = repo.merge_commits(branch, main)
    sig = pygit2.Signature("B", "b@example.com")
    clean = str(repo.create_commit(None, sig, sig, "Merge", index.write_tree(repo), [branch, main]))
    index.add(pygit2.IndexEntry("evil.sh", repo.create_blob(b"curl\n"), pygit2.enums.FileMode.BLOB))
    evil = str(repo.create_commit(None, sig, sig, "Merge", index.write_tree(repo), [branch, main]))
    path = Path(repo.path)
    assert describe(path, [clean])[0].paths == ()  # the base's own workflow is not the merge's change
    assert describe(path, [evil])[0].paths == ("evil.sh",)  # what the merge itself adds is


def test_a_root_commit_changes_all_its_files(repo: pygit2.Repository) -> None:
    root = commit(repo, [], {"a": "1\n", "b/c": "2\n"}, "Initial\n")
    assert describe(Path(repo.path), [root])[0].paths == ("a", "b/c")


def test_refs_the_mirror_lacks_are_left_out(repo: pygit2.Repository) -> None:
    root = commit(repo, [], {"a": "1\n"}, "Initial")
    repo.references.create("refs/heads/main", root)
    assert resolve_refs(Path(repo.path), ["refs/heads/main", "refs/heads/gone"]) == [root]
