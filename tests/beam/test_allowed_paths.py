"""`WorkingTree(allowed_paths=...)`: the complement of blocked paths, as `/beam docs` uses it."""

from __future__ import annotations

from pathlib import Path

import pygit2
import pytest

from bot.beam.sandbox import WorkingTree
from bot.beam.sandbox_policy import AllowedPaths
from tests.beam.test_worktree import PROTECTED, make_tree, raises

DOCS = ["docs/**", "**/*.md", "**/*.rst", "**/*.txt", "mkdocs.yml", "docs/conf.py"]


@pytest.mark.parametrize(
    ("path", "permitted"),
    [
        ("docs/guide/intro.md", True),
        ("docs/conf.py", True),
        ("docs/api/thing.py", True),
        ("README.md", True),
        ("src/pkg/README.MD", True),
        ("notes/a.rst", True),
        ("requirements.txt", True),
        ("mkdocs.yml", True),
        ("./docs/x.png", True),
        ("docs", False),  # the directory itself is not a file to write
        ("src/app.py", False),
        ("mkdocs.yml.bak", False),
        ("sub/mkdocs.yml", False),
        ("notes.md/evil.py", False),  # a file pattern does not open a directory of that name
        ("setup.py", False),
        ("", False),
    ],
)
def test_allowed_paths_match_files_not_what_lies_below_them(path: str, permitted: bool) -> None:
    assert AllowedPaths(DOCS).permits(path) is permitted


def test_no_patterns_means_no_restriction() -> None:
    assert AllowedPaths(None).permits("src/app.py") and not AllowedPaths(None)
    assert AllowedPaths(["src/"]).permits("src/app.py") and not AllowedPaths(["src/"]).permits("src")
    assert AllowedPaths(DOCS).first_refused(["README.md", "src/app.py", "x.py"]) == "src/app.py"


@pytest.fixture
def docs_only(tmp_path: Path) -> WorkingTree:
    host = make_tree(tmp_path / "work")
    host.write_file("src/app.py", "print(0)\n")
    host.write_file("docs/index.md", "# Docs\n")
    host.add(".")
    host.commit("init")
    host.checkout_branch("feature", create=True)
    return WorkingTree(host.sandbox, PROTECTED, blocked_paths=["secret/**"], allowed_paths=DOCS)


def test_writes_outside_the_allowed_paths_are_bem_338(docs_only: WorkingTree) -> None:
    root = docs_only.sandbox.path
    err = raises("BEM-338", docs_only.write_file, "src/app.py", "print(1)\n")
    assert "src/app.py is outside the paths this run may change" in str(err) and "docs/**" in str(err)
    assert (root / "src" / "app.py").read_text() == "print(0)\n"
    raises("BEM-334", docs_only.write_file, "secret/notes.md", "x")  # blocked still wins
    (root / "link.md").symlink_to("src/app.py")
    raises("BEM-338", docs_only.write_file, "link.md", "pwned")  # where the link leads counts
    assert (root / "src" / "app.py").read_text() == "print(0)\n"
    docs_only.write_file("docs/guide.md", "# Guide\n")
    docs_only.add("docs/guide.md")
    commit = pygit2.Repository(str(root))[docs_only.commit("Add a guide")]
    assert isinstance(commit, pygit2.Commit)
    assert (commit.tree / "docs/guide.md").data == b"# Guide\n"


def test_changes_outside_the_allowed_paths_cannot_be_staged_or_committed(docs_only: WorkingTree) -> None:
    root = docs_only.sandbox.path
    head = docs_only.head_oid()
    (root / "src" / "app.py").write_text("changed out of band\n")
    raises("BEM-338", docs_only.add, "src/app.py")
    raises("BEM-338", docs_only.add, ".")
    repo = pygit2.Repository(str(root))
    repo.index.add("src/app.py")
    repo.index.write()
    repo.free()
    raises("BEM-338", docs_only.commit, "sneaky")
    assert docs_only.head_oid() == head
