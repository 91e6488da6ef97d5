"""Attempts to break the path jail (`SandboxRoot`), and the pure path rules it relies on."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bot.beam.errors import BeamError
from bot.beam.sandbox import BlockedPaths, SandboxRoot, is_git_name


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory next to the jail holding something secret."""
    path = tmp_path / "outside"
    path.mkdir()
    (path / "secret.txt").write_text("top secret\n")
    return path


@pytest.fixture
def jail(tmp_path: Path) -> SandboxRoot:
    return SandboxRoot(tmp_path / "jail")


def code_of(exc: pytest.ExceptionInfo[BeamError]) -> str:
    return exc.value.code


def tree_snapshot(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


# -- the root ----------------------------------------------------------------------------------


def test_root_is_created_and_canonical(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "alias").symlink_to(real)
    root = SandboxRoot(tmp_path / "alias" / "new" / "deeper")
    assert root.path == (real / "new" / "deeper").resolve()
    assert root.path.is_dir()


def test_root_that_cannot_be_created_is_bem_310(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(BeamError) as exc:
        SandboxRoot(tmp_path / "file" / "sub")
    assert code_of(exc) == "BEM-310"


def test_plain_paths_resolve_inside(jail: SandboxRoot) -> None:
    assert jail.resolve("") == jail.path
    assert jail.resolve(".") == jail.path
    assert jail.resolve("a/./b//c.txt") == jail.path / "a" / "b" / "c.txt"
    # A backslash that is not the first character is an ordinary character on POSIX.
    assert jail.resolve("a\\b") == jail.path / "a\\b"


# -- lexical escapes ---------------------------------------------------------------------------


@pytest.mark.parametrize("rel", ["/etc/passwd", "/", "\\windows", "a\0b", "\0"])
def test_absolute_and_nul_are_bem_300(jail: SandboxRoot, rel: str) -> None:
    with pytest.raises(BeamError) as exc:
        jail.resolve(rel)
    assert code_of(exc) == "BEM-300"
    assert exc.value.data == {"detail": rel}


@pytest.mark.parametrize("rel", ["..", "../x", "foo/../../x", "foo/..", "a/../b", "./../jail/x"])
def test_parent_components_are_bem_301(jail: SandboxRoot, rel: str) -> None:
    with pytest.raises(BeamError) as exc:
        jail.resolve(rel)
    assert code_of(exc) == "BEM-301"


def test_parent_escape_writes_nothing(jail: SandboxRoot, tmp_path: Path) -> None:
    before = tree_snapshot(tmp_path)
    for rel in ["../escaped.txt", "foo/../../escaped.txt", "/tmp/escaped.txt", "x\0y"]:
        with pytest.raises(BeamError):
            jail.write_text(rel, "pwned")
    assert tree_snapshot(tmp_path) == before


# -- symlinks ----------------------------------------------------------------------------------


def test_symlink_to_outside_file_cannot_be_read_or_written(jail: SandboxRoot, outside: Path) -> None:
    (jail.path / "link.txt").symlink_to(outside / "secret.txt")
    with pytest.raises(BeamError) as exc:
        jail.read_text("link.txt")
    assert code_of(exc) == "BEM-302"
    with pytest.raises(BeamError) as exc:
        jail.write_text("link.txt", "pwned")
    assert code_of(exc) == "BEM-302"
    assert (outside / "secret.txt").read_text() == "top secret\n"


def test_symlink_to_outside_dir_cannot_be_listed_read_or_written(jail: SandboxRoot, outside: Path) -> None:
    (jail.path / "out").symlink_to(outside, target_is_directory=True)
    with pytest.raises(BeamError) as exc:
        jail.list_files("out")
    assert code_of(exc) == "BEM-302"
    with pytest.raises(BeamError) as exc:
        jail.read_text("out/secret.txt")
    assert code_of(exc) == "BEM-302"
    with pytest.raises(BeamError) as exc:
        jail.write_text("out/new.txt", "pwned")
    assert code_of(exc) == "BEM-303"
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    # The listing of the root does not go through it either.
    assert jail.list_files("") == []


@pytest.mark.parametrize("depth", [1, 2, 4])
def test_symlinked_parent_of_missing_path_creates_nothing_outside(
    jail: SandboxRoot, outside: Path, depth: int
) -> None:
    (jail.path / "link").symlink_to(outside, target_is_directory=True)
    rel = "/".join(["link", *[f"new{i}" for i in range(depth)], "file.txt"])
    before = tree_snapshot(outside)
    with pytest.raises(BeamError) as exc:
        jail.write_text(rel, "pwned")
    assert code_of(exc) == "BEM-303"
    assert tree_snapshot(outside) == before  # no directory was made outside the jail


def test_symlink_deep_in_the_path_is_checked(jail: SandboxRoot, outside: Path) -> None:
    (jail.path / "a" / "b").mkdir(parents=True)
    (jail.path / "a" / "b" / "c").symlink_to(outside, target_is_directory=True)
    before = tree_snapshot(outside)
    with pytest.raises(BeamError) as exc:
        jail.write_text("a/b/c/d/e/f.txt", "pwned")
    assert code_of(exc) == "BEM-303"
    assert tree_snapshot(outside) == before


def test_chained_symlinks_that_end_outside_are_refused(jail: SandboxRoot, outside: Path) -> None:
    (jail.path / "hop2").symlink_to(outside, target_is_directory=True)
    (jail.path / "hop1").symlink_to(jail.path / "hop2", target_is_directory=True)
    with pytest.raises(BeamError) as exc:
        jail.read_text("hop1/secret.txt")
    assert code_of(exc) == "BEM-302"


def test_dangling_symlink_pointing_outside_is_not_a_way_out(jail: SandboxRoot, outside: Path) -> None:
    (jail.path / "dangling").symlink_to(outside / "created-by-write.txt")
    with pytest.raises(BeamError) as exc:
        jail.write_text("dangling", "pwned")
    assert code_of(exc) in {"BEM-302", "BEM-303"}
    assert not (outside / "created-by-write.txt").exists()


def test_symlinks_inside_the_jail_work(jail: SandboxRoot) -> None:
    (jail.path / "docs").mkdir()
    (jail.path / "docs" / "a.md").write_text("A")
    (jail.path / "alias").symlink_to(jail.path / "docs", target_is_directory=True)
    (jail.path / "a-link.md").symlink_to("docs/a.md")
    assert jail.read_text("alias/a.md") == "A"
    assert jail.read_text("a-link.md") == "A"
    jail.write_text("alias/new/b.md", "B")
    assert (jail.path / "docs" / "new" / "b.md").read_text() == "B"
    # Relative symlinks whose target climbs out and back in stay usable.
    (jail.path / "docs" / "up").symlink_to("../docs", target_is_directory=True)
    assert jail.read_text("docs/up/a.md") == "A"


def test_symlink_loop_cannot_be_resolved(jail: SandboxRoot) -> None:
    (jail.path / "a").symlink_to(jail.path / "b")
    (jail.path / "b").symlink_to(jail.path / "a")
    with pytest.raises(BeamError) as exc:
        jail.read_text("a/file")
    assert code_of(exc) == "BEM-312"
    with pytest.raises(BeamError):
        jail.write_text("a/file", "x")


# -- .git --------------------------------------------------------------------------------------


@pytest.fixture
def with_git(jail: SandboxRoot) -> SandboxRoot:
    (jail.path / ".git" / "hooks").mkdir(parents=True)
    (jail.path / ".git" / "config").write_text("[core]\n")
    (jail.path / "sub").mkdir()
    (jail.path / "sub" / ".git").write_text("gitdir: ../.git\n")
    (jail.path / "README.md").write_text("readme\n")
    return jail


@pytest.mark.parametrize(
    "rel",
    [".git", ".git/config", "./.git/config", "sub/.git", ".GIT/config", ".Git", ".git/hooks/pre-commit",
     ".git./config", ".git /config", "sub/../.git"],
)  # fmt: skip
def test_git_dir_is_out_of_reach_for_reads_and_writes(with_git: SandboxRoot, rel: str) -> None:
    for attempt in (
        lambda: with_git.read_text(rel),
        lambda: with_git.write_text(rel, "[core]\n\thooksPath = /tmp\n"),
        lambda: with_git.list_files(rel),
    ):
        with pytest.raises(BeamError) as exc:
            attempt()
        assert code_of(exc) in {"BEM-337", "BEM-301"}
    assert (with_git.path / ".git" / "config").read_text() == "[core]\n"
    assert not (with_git.path / ".git" / "hooks" / "pre-commit").exists()


def test_git_dir_through_a_symlink_is_out_of_reach(with_git: SandboxRoot) -> None:
    (with_git.path / "g").symlink_to(with_git.path / ".git", target_is_directory=True)
    (with_git.path / "c").symlink_to(".git/config")
    for rel in ("g/config", "c", "g/hooks/post-checkout"):
        with pytest.raises(BeamError) as exc:
            with_git.write_text(rel, "pwned")
        assert code_of(exc) == "BEM-337"
        with pytest.raises(BeamError) as exc:
            with_git.read_text(rel)
        assert code_of(exc) == "BEM-337"
    assert (with_git.path / ".git" / "config").read_text() == "[core]\n"
    assert with_git.list_files("") == ["README.md", "c"]


def test_listing_skips_git_at_any_depth_and_any_case(with_git: SandboxRoot) -> None:
    (with_git.path / "deep" / "x" / ".GIT").mkdir(parents=True)
    (with_git.path / "deep" / "x" / ".GIT" / "HEAD").write_text("ref")
    (with_git.path / "deep" / "x" / "keep.txt").write_text("k")
    assert with_git.list_files("") == ["README.md", "deep/x/keep.txt"]


@pytest.mark.parametrize(
    ("name", "blocked"),
    [(".git", True), (".GIT", True), (".git.", True), (".git ", True), (".g\u200cit", True),
     (".gitignore", False), ("git", False), (".github", False), ("x.git", False)],
)  # fmt: skip
def test_is_git_name(name: str, blocked: bool) -> None:
    assert is_git_name(name) is blocked


# -- listing -----------------------------------------------------------------------------------


def test_listing_is_relative_to_root_sorted_files_only(jail: SandboxRoot) -> None:
    for rel in ["b.txt", "a/z.txt", "a/b/c.txt", "A.txt", "a/b/d/e.txt"]:
        jail.write_text(rel, rel)
    (jail.path / "empty").mkdir()
    assert jail.list_files("") == ["A.txt", "a/b/c.txt", "a/b/d/e.txt", "a/z.txt", "b.txt"]
    assert jail.list_files("a/b") == ["a/b/c.txt", "a/b/d/e.txt"]
    assert jail.list_files("./a/b/") == ["a/b/c.txt", "a/b/d/e.txt"]


@pytest.mark.parametrize("rel", ["missing", "b.txt"])
def test_listing_a_non_directory_is_bem_306(jail: SandboxRoot, rel: str) -> None:
    jail.write_text("b.txt", "b")
    with pytest.raises(BeamError) as exc:
        jail.list_files(rel)
    assert code_of(exc) == "BEM-306"
    assert str(jail.path) not in str(exc.value)  # no host path in the error


def test_listing_never_follows_symlinks_and_cannot_loop(jail: SandboxRoot) -> None:
    (jail.path / "d").mkdir()
    (jail.path / "d" / "f.txt").write_text("f")
    (jail.path / "d" / "self").symlink_to(".", target_is_directory=True)
    (jail.path / "d" / "parent").symlink_to("..", target_is_directory=True)
    (jail.path / "up").symlink_to("..", target_is_directory=True)  # outside the jail
    (jail.path / "loop1").symlink_to("loop2")
    (jail.path / "loop2").symlink_to("loop1")
    (jail.path / "file-link").symlink_to("d/f.txt")
    (jail.path / "dangling").symlink_to("nowhere")
    assert jail.list_files("") == ["d/f.txt", "dangling", "file-link", "loop1", "loop2"]


def test_listing_over_the_cap_is_bem_319(jail: SandboxRoot) -> None:
    for i in range(6):
        jail.write_text(f"d{i % 2}/f{i}.txt", "x")
    assert len(jail.list_files("", max_entries=6)) == 6
    with pytest.raises(BeamError) as exc:
        jail.list_files("", max_entries=5)
    assert code_of(exc) == "BEM-319"
    assert "more than 5 files" in str(exc.value)
    assert exc.value.http_status == 413


# -- reading and writing -----------------------------------------------------------------------


def test_read_errors_are_bem_307(jail: SandboxRoot) -> None:
    (jail.path / "dir").mkdir()
    (jail.path / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    os.mkfifo(jail.path / "fifo")  # would block a plain open() forever
    for rel in ("missing.txt", "dir", "latin1.txt", "fifo"):
        with pytest.raises(BeamError) as exc:
            jail.read_text(rel)
        assert code_of(exc) == "BEM-307", rel
        assert str(jail.path) not in str(exc.value)


def test_read_cap(jail: SandboxRoot) -> None:
    (jail.path / "exact.txt").write_bytes(b"a" * 100)
    (jail.path / "big.txt").write_bytes(b"a" * 101)
    assert jail.read_text("exact.txt", max_bytes=100) == "a" * 100
    with pytest.raises(BeamError) as exc:
        jail.read_text("big.txt", max_bytes=100)
    assert code_of(exc) == "BEM-319"
    assert "101 bytes" in str(exc.value) and "100 bytes" in str(exc.value)


def test_default_caps_are_one_mebibyte(jail: SandboxRoot) -> None:
    (jail.path / "big.txt").write_bytes(b"a" * ((1 << 20) + 1))
    with pytest.raises(BeamError) as exc:
        jail.read_text("big.txt")
    assert code_of(exc) == "BEM-319"
    with pytest.raises(BeamError) as exc:
        jail.write_text("new.txt", "a" * ((1 << 20) + 1))
    assert code_of(exc) == "BEM-319"
    assert not (jail.path / "new.txt").exists()


def test_write_over_the_cap_writes_nothing(jail: SandboxRoot) -> None:
    jail.write_text("keep.txt", "original")
    for rel in ("keep.txt", "new/dir/file.txt"):
        with pytest.raises(BeamError) as exc:
            jail.write_text(rel, "é" * 60, max_bytes=100)  # 120 bytes in UTF-8
        assert code_of(exc) == "BEM-319"
    assert (jail.path / "keep.txt").read_text() == "original"
    assert not (jail.path / "new").exists()


def test_write_creates_parents_and_replaces(jail: SandboxRoot) -> None:
    jail.write_text("a/b/c.txt", "one")
    jail.write_text("a/b/c.txt", "two")
    assert (jail.path / "a" / "b" / "c.txt").read_text() == "two"
    assert jail.read_text("a/b/c.txt") == "two"


def test_write_errors(jail: SandboxRoot) -> None:
    jail.write_text("file.txt", "x")
    (jail.path / "dir").mkdir()
    cases = {"": "BEM-316", "dir": "BEM-316", "file.txt/child.txt": "BEM-314"}
    for rel, code in cases.items():
        with pytest.raises(BeamError) as exc:
            jail.write_text(rel, "x")
        assert code_of(exc) == code, rel
    with pytest.raises(BeamError) as exc:
        jail.write_text("bad.txt", "\ud800")  # a lone surrogate is not UTF-8
    assert code_of(exc) == "BEM-316"
    assert not (jail.path / "bad.txt").exists()


def test_write_guard_sees_the_resolved_path(jail: SandboxRoot) -> None:
    (jail.path / "real").mkdir()
    (jail.path / "alias").symlink_to("real", target_is_directory=True)
    seen: list[str] = []
    jail.write_text("alias/x.txt", "x", guard=seen.append)
    assert seen == ["real/x.txt"]


# -- blocked path globs ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("patterns", "path", "blocked"),
    [
        ([".github/workflows/**"], ".github/workflows/ci.yml", True),
        ([".github/workflows/**"], ".github/workflows/nested/x.yml", True),
        ([".github/workflows/**"], ".github/workflows", True),
        ([".github/workflows/**"], ".GitHub/Workflows/CI.yml", True),
        ([".github/workflows/**"], "./.github//workflows/ci.yml", True),
        ([".github/workflows/**"], ".github/dependabot.yml", False),
        ([".github/workflows/**"], "docs/.github/workflows/ci.yml", False),
        ([".github/workflows"], ".github/workflows/ci.yml", True),
        (["**/secrets.yml"], "secrets.yml", True),
        (["**/secrets.yml"], "a/b/secrets.yml", True),
        (["*.pem"], "key.pem", True),
        (["*.pem"], "keys/key.pem", False),
        (["docs/*.md"], "docs/a.md", True),
        (["docs/*.md"], "docs/sub/a.md", False),
        (["docs/**/*.md"], "docs/sub/deep/a.md", True),
        (["docs/**/*.md"], "docs/a.md", True),
        (["file?.txt"], "file1.txt", True),
        (["file?.txt"], "file/.txt", False),
        (["[ab].txt"], "a.txt", True),
        (["[!ab].txt"], "a.txt", False),
        (["[!ab].txt"], "c.txt", True),
        ([], "anything", False),
        (["", "/"], "anything", False),
    ],
)
def test_blocked_paths(patterns: list[str], path: str, blocked: bool) -> None:
    assert BlockedPaths(patterns).matches(path) is blocked
