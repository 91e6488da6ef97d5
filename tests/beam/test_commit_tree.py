"""The jail's attacks, tried on both ways a tool reads a tree: a checkout on disk (`WorkingTree`) and
the commit read from the object store (`CommitTree`). Each test runs on both and must end the same."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bot.beam.commit_tree import CommitTree
from bot.beam.errors import BeamError
from bot.beam.sandbox import SandboxRoot, WorkingTree
from bot.beam.sandbox_tools import sandbox_tools
from bot.beam.tree_view import ToolTree

VIEWS = ["disk", "objects"]
GIT_ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_CONFIG_NOSYSTEM": "1",
}


def git(cwd: Path, *args: str) -> str:
    result = subprocess.run(
        ["git", *args], cwd=cwd, env=GIT_ENV, capture_output=True, text=True, check=True, timeout=60
    )
    return result.stdout


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    path = tmp_path / "outside"
    path.mkdir()
    (path / "secret.txt").write_text("top secret\n")
    return path


Layout = Callable[[Path], None]


def view_of(kind: str, tmp_path: Path, layout: Layout, **caps: int) -> ToolTree:
    """The tree `layout` writes, as a checkout (`disk`) or as its commit read from objects."""
    work = tmp_path / "work"
    work.mkdir()
    git(work, "init", "-q", "-b", "main")
    layout(work)
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "the layout")
    if kind == "disk":
        return WorkingTree(SandboxRoot(work), ["main"], **caps)
    # The objects view reads a bare clone: no file of the tree is on disk anywhere it looks.
    bare = tmp_path / "bare.git"
    git(tmp_path, "clone", "-q", "--bare", str(work), str(bare))
    return CommitTree(bare, "HEAD", **caps)


def code(call: Callable[[], Any]) -> str:
    with pytest.raises(BeamError) as exc:
        call()
    return exc.value.code


def basic(root: Path) -> None:
    (root / "docs").mkdir()
    (root / "docs" / "a.md").write_text("A\nneedle here\n")
    (root / "README.md").write_text("readme\n")
    (root / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\0\0binary")
    (root / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))


@pytest.mark.parametrize("kind", VIEWS)
def test_plain_reads_and_listing(kind: str, tmp_path: Path) -> None:
    view = view_of(kind, tmp_path, basic)
    assert view.read_file("README.md") == "readme\n"
    assert view.read_file("./docs//a.md") == "A\nneedle here\n"
    assert view.read_bytes("logo.png", None) == b"\x89PNG\r\n\x1a\n\0\0binary"
    assert view.list_files("") == ["README.md", "docs/a.md", "latin1.txt", "logo.png"]
    assert view.list_files("docs") == ["docs/a.md"]
    for rel in ("logo.png", "latin1.txt", "missing.txt", "docs", "README.md/x"):
        assert code(lambda rel=rel: view.read_file(rel)) == "BEM-307", rel
    for rel in ("README.md", "missing"):
        assert code(lambda rel=rel: view.list_files(rel)) == "BEM-306", rel


@pytest.mark.parametrize("kind", VIEWS)
@pytest.mark.parametrize(
    ("rel", "expected"),
    [("/etc/passwd", "BEM-300"), ("a\0b", "BEM-300"), ("\\windows", "BEM-300"), ("../x", "BEM-301"),
     ("docs/../../x", "BEM-301"), ("./../work/README.md", "BEM-301"), (".git/config", "BEM-337"),
     (".GIT/config", "BEM-337"), ("docs/.git", "BEM-337"), (".git./config", "BEM-337")],
)  # fmt: skip
def test_spelling_escapes(kind: str, tmp_path: Path, rel: str, expected: str) -> None:
    view = view_of(kind, tmp_path, basic)
    assert code(lambda: view.read_file(rel)) == expected
    assert code(lambda: view.read_bytes(rel, None)) == expected
    assert code(lambda: view.list_files(rel)) == expected
    assert code(lambda: view.search(rel, "x")) == expected


@pytest.mark.parametrize("kind", VIEWS)
def test_symlinks_out_of_the_tree_are_refused(kind: str, tmp_path: Path, outside: Path) -> None:
    def layout(root: Path) -> None:
        basic(root)
        (root / "abs.txt").symlink_to(outside / "secret.txt")
        (root / "rel.txt").symlink_to("../outside/secret.txt")
        (root / "out").symlink_to(outside, target_is_directory=True)
        (root / "hop2").symlink_to("../outside", target_is_directory=True)
        (root / "hop1").symlink_to("hop2", target_is_directory=True)
        (root / "docs" / "deep").symlink_to("../../outside/secret.txt")

    view = view_of(kind, tmp_path, layout)
    for rel in ("abs.txt", "rel.txt", "out/secret.txt", "hop1/secret.txt", "docs/deep"):
        assert code(lambda rel=rel: view.read_file(rel)) == "BEM-302", rel
    assert code(lambda: view.list_files("out")) == "BEM-302"
    assert "top secret" not in str(view.search("", "top secret"))
    # The links out are not listed as directories to enter; the rest of the tree is.
    assert "out/secret.txt" not in view.list_files("")


@pytest.mark.parametrize("kind", VIEWS)
def test_symlinks_to_git_are_refused(kind: str, tmp_path: Path) -> None:
    def layout(root: Path) -> None:
        basic(root)
        (root / "g").symlink_to(".git", target_is_directory=True)
        (root / "c").symlink_to(".git/config")
        (root / "docs" / "c2").symlink_to("../.git/config")

    view = view_of(kind, tmp_path, layout)
    for rel in ("g/config", "c", "docs/c2", "g/HEAD"):
        assert code(lambda rel=rel: view.read_file(rel)) == "BEM-337", rel


@pytest.mark.parametrize("kind", VIEWS)
def test_symlinks_inside_the_tree_work_and_loops_stop(kind: str, tmp_path: Path) -> None:
    def layout(root: Path) -> None:
        basic(root)
        (root / "alias").symlink_to("docs", target_is_directory=True)
        (root / "a-link.md").symlink_to("docs/a.md")
        (root / "docs" / "up").symlink_to("../docs", target_is_directory=True)
        (root / "loop1").symlink_to("loop2")
        (root / "loop2").symlink_to("loop1")
        (root / "dangling").symlink_to("nowhere")

    view = view_of(kind, tmp_path, layout)
    assert view.read_file("alias/a.md") == "A\nneedle here\n"
    assert view.read_file("a-link.md") == "A\nneedle here\n"
    assert view.read_file("docs/up/a.md") == "A\nneedle here\n"
    assert view.list_files("alias") == ["docs/a.md"]  # the real path, as the jail resolves it
    assert code(lambda: view.read_file("loop1")) == "BEM-312"
    assert code(lambda: view.read_file("dangling")) == "BEM-307"
    # Links to directories are never entered by a listing; other links are listed as entries.
    listed = view.list_files("")
    assert "alias" not in listed and "docs/up" not in listed
    assert {"a-link.md", "dangling", "loop1", "loop2"} <= set(listed)


@pytest.mark.parametrize("kind", VIEWS)
def test_caps(kind: str, tmp_path: Path) -> None:
    def layout(root: Path) -> None:
        (root / "exact.txt").write_bytes(b"a" * 10)
        (root / "big.txt").write_bytes(b"a" * 11)
        (root / "d").mkdir()
        (root / "d" / "c.txt").write_text("c")

    view = view_of(kind, tmp_path, layout, max_file_bytes=10, max_list_entries=2)
    assert view.read_file("exact.txt") == "a" * 10
    with pytest.raises(BeamError) as exc:
        view.read_file("big.txt")
    assert exc.value.code == "BEM-319"
    assert "11 bytes" in str(exc.value) and "10 bytes" in str(exc.value)
    with pytest.raises(BeamError) as exc:
        view.list_files("")
    assert exc.value.code == "BEM-319" and "more than 2 files" in str(exc.value)
    assert view.list_files("d") == ["d/c.txt"]


@pytest.mark.parametrize("kind", VIEWS)
def test_search_finds_the_same_on_both(kind: str, tmp_path: Path) -> None:
    def layout(root: Path) -> None:
        basic(root)
        (root / "b").mkdir()
        (root / "b" / "z.txt").write_text("NEEDLE upper\n")
        (root / "a.txt").write_text("a needle\nno\nneedle again\n")
        (root / "big.txt").write_bytes(b"needle\n" * (600 * 1024 // 7))
        (root / "needle-link").symlink_to("a.txt")

    view = view_of(kind, tmp_path, layout)
    assert view.search("", "needle") == {
        "matches": [
            {"path": "a.txt", "line": 1, "text": "a needle"},
            {"path": "a.txt", "line": 3, "text": "needle again"},
            {"path": "b/z.txt", "line": 1, "text": "NEEDLE upper"},
            {"path": "docs/a.md", "line": 2, "text": "needle here"},
        ],
        "truncated": False,
    }
    assert view.search("docs", "needle")["matches"] == [
        {"path": "docs/a.md", "line": 2, "text": "needle here"}
    ]
    assert view.search("missing", "needle") == {"matches": [], "truncated": False}


def test_a_crafted_git_entry_in_the_objects_is_out_of_reach(tmp_path: Path) -> None:
    """git never commits a `.git`, but objects can hold one (a crafted push): still out of reach."""
    bare = tmp_path / "crafted.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))

    def blob(data: str) -> str:
        return subprocess.run(
            ["git", "hash-object", "-w", "--stdin"], cwd=bare, input=data, capture_output=True, text=True,
            check=True, timeout=60,
        ).stdout.strip()  # fmt: skip

    def mktree(lines: list[str]) -> str:
        # `git mktree` does not check names, as a crafted push would not (libgit2 refuses `.git`).
        return subprocess.run(
            ["git", "mktree"], cwd=bare, input="".join(f"{line}\n" for line in lines), capture_output=True,
            text=True, check=True, timeout=60,
        ).stdout.strip()  # fmt: skip

    config, ok, link = blob("[core]\n\thooksPath = /tmp\n"), blob("ok\n"), blob("sub/.GIT/config")
    inner = mktree([f"100644 blob {config}\tconfig"])
    sub = mktree([f"040000 tree {inner}\t.GIT"])
    top = mktree([
        f"040000 tree {inner}\t.git", f"100644 blob {ok}\tok.txt", f"040000 tree {sub}\tsub",
        f"120000 blob {link}\tto-git",
    ])  # fmt: skip
    commit = git(bare, "commit-tree", top, "-m", "crafted").strip()
    view = CommitTree(bare, commit)
    assert view.list_files("") == ["ok.txt", "to-git"]
    for rel in (".git/config", "sub/.GIT/config", "to-git"):
        assert code(lambda rel=rel: view.read_file(rel)) == "BEM-337", rel
    assert view.search("", "hooksPath") == {"matches": [], "truncated": False}


@pytest.mark.anyio
async def test_the_tools_on_a_commit_read_and_never_write(tmp_path: Path) -> None:
    view = view_of("objects", tmp_path, basic)
    tools = {tool.spec().name: tool for tool in sandbox_tools(view)}
    from tests.beam.test_sandbox_tools import agent_input

    def call(name: str, args: Any) -> Any:
        return tools[name].invoke(args, agent_input())

    assert await call("read_file", {"path": "README.md"}) == {"path": "README.md", "body": "readme\n"}
    assert await call("git_log", {}) == {"commits": ["the layout"]}
    assert await call("git_status", {}) == {"paths": []}
    assert await call("git_diff", {}) == {"diff": ""}
    for name, args in (
        ("write_file", {"path": "x.txt", "body": "x"}),
        ("git_add", {"path": "."}),
        ("git_commit", {"message": "m"}),
        ("git_push", {}),
    ):
        with pytest.raises(BeamError) as exc:
            await call(name, args)
        assert exc.value.code == "BEM-342", name
