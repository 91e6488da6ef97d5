"""`WorkingTree` against real repositories: commits, diffs, protected refs, blocked paths and pushes."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pygit2
import pytest

from bot.beam.errors import BeamError
from bot.beam.sandbox import SandboxRoot, WorkingTree, is_protected
from tests.support.git_http import GitHttpServer

PROTECTED = ["main", "master"]


def make_tree(root: Path, **options: object) -> WorkingTree:
    tree = WorkingTree(SandboxRoot(root), PROTECTED, **options)  # type: ignore[arg-type]
    tree.init(initial_head="main")
    return tree


def commit_file(tree: WorkingTree, rel: str, body: str, message: str) -> str:
    tree.write_file(rel, body)
    tree.add(rel)
    return tree.commit(message)


@pytest.fixture
def tree(tmp_path: Path) -> WorkingTree:
    """A repository on `main` with one commit, checked out on the branch `feature`."""
    tree = make_tree(tmp_path / "work")
    commit_file(tree, "README.md", "one\ntwo\nthree\n", "Initial commit")
    tree.checkout_branch("feature", create=True)
    return tree


@pytest.fixture
def bare(tmp_path: Path) -> Path:
    path = tmp_path / "remote.git"
    pygit2.init_repository(str(path), bare=True).free()
    return path


def remote_refs(path: Path) -> dict[str, str]:
    repo = pygit2.Repository(str(path))
    try:
        return {name: str(repo.references[name].target) for name in repo.references}
    finally:
        repo.free()


def raises(code: str, call: object, *args: object) -> BeamError:
    with pytest.raises(BeamError) as exc:
        call(*args)  # type: ignore[operator]
    assert exc.value.code == code, exc.value
    return exc.value


# -- commits, log, status, diff ------------------------------------------------------------------


def test_unborn_repository(tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "work")
    assert tree.head_oid() is None
    assert tree.log() == []
    assert tree.status() == []
    raises("BEM-327", tree.current_branch)
    raises("BEM-332", tree.checkout_branch, "feature", True)


def test_no_repository_at_the_root_is_bem_321(tmp_path: Path) -> None:
    outer = make_tree(tmp_path)  # a repository above the root must not be found
    commit_file(outer, "x.txt", "x", "outer")
    inner = WorkingTree(SandboxRoot(tmp_path / "inner"), PROTECTED)
    for call in (inner.status, inner.diff, inner.log, inner.current_branch):
        raises("BEM-321", call)


def test_commit_and_log(tree: WorkingTree) -> None:
    oid = commit_file(tree, "a.txt", "a\n", "Add a\n\nWith a body.")
    assert len(oid) == 40 and int(oid, 16) >= 0
    assert tree.head_oid() == oid
    commit_file(tree, "b.txt", "b\n", "Add b")
    assert tree.log() == ["Add b", "Add a", "Initial commit"]
    assert tree.log(2) == ["Add b", "Add a"]
    assert tree.log(0) == []


def test_commit_identity_defaults_to_beam_agent(tree: WorkingTree) -> None:
    oid = commit_file(tree, "a.txt", "a\n", "Add a")
    repo = pygit2.Repository(str(tree.sandbox.path))
    commit = repo[oid].peel(pygit2.Commit)
    assert (commit.author.name, commit.author.email) == ("beam-agent", "beam@localhost")
    assert (commit.committer.name, commit.committer.email) == ("beam-agent", "beam@localhost")
    assert commit.parents[0].message == "Initial commit"
    repo.free()


def test_commit_identity_and_trailer_are_configurable(tmp_path: Path) -> None:
    tree = make_tree(
        tmp_path / "work",
        author=("Octo Cat", "octo@example.com"),
        committer=("beam-bot[bot]", "bot@example.com"),
        commit_trailer="Co-authored-by: Mona <mona@example.com>",
    )
    oid = commit_file(tree, "a.txt", "a\n", "Fix links\n")
    repo = pygit2.Repository(str(tree.sandbox.path))
    commit = repo[oid].peel(pygit2.Commit)
    assert commit.author.name == "Octo Cat" and commit.committer.email == "bot@example.com"
    assert commit.message == "Fix links\n\nCo-authored-by: Mona <mona@example.com>\n"
    repo.free()
    assert tree.log() == ["Fix links"]


def test_status_lists_changes_and_untracked(tree: WorkingTree) -> None:
    tree.write_file(".gitignore", "*.log\n")
    tree.write_file("README.md", "changed\n")
    tree.write_file("new.txt", "n")
    tree.write_file("dir/inner.txt", "i")
    tree.write_file("debug.log", "ignored")
    assert tree.status() == [".gitignore", "README.md", "dir/", "new.txt"]


def test_diff_is_a_real_unified_diff(tree: WorkingTree) -> None:
    tree.write_file("README.md", "one\nTWO\nthree\n")
    tree.write_file("staged.txt", "staged line\n")
    tree.add("staged.txt")
    tree.write_file("untracked.txt", "not in the diff\n")
    diff = tree.diff()
    assert "diff --git a/README.md b/README.md" in diff
    assert "--- a/README.md\n+++ b/README.md\n" in diff
    assert "@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\n" in diff
    assert "+++ b/staged.txt\n@@ -0,0 +1 @@\n+staged line\n" in diff
    assert "untracked" not in diff


def test_diff_combines_index_and_workdir(tree: WorkingTree) -> None:
    tree.write_file("README.md", "one\nstaged\nthree\n")
    tree.add("README.md")
    tree.write_file("README.md", "one\nstaged\nthree\nunstaged\n")
    diff = tree.diff()
    assert "-two\n+staged\n" in diff
    assert "+unstaged\n" in diff


def test_diff_on_unborn_head_is_against_the_empty_tree(tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "work")
    assert tree.diff() == ""
    tree.write_file("a.txt", "hello\n")
    tree.add("a.txt")
    assert "new file mode 100644" in tree.diff()
    assert "+hello\n" in tree.diff()


# -- staging -----------------------------------------------------------------------------------


def test_add_everything_and_single_paths(tree: WorkingTree) -> None:
    tree.write_file("a.txt", "a")
    tree.write_file("d/b.txt", "b")
    assert tree.add(".") == "."
    tree.commit("all")
    assert tree.status() == []
    tree.write_file("c.txt", "c")
    tree.write_file("e.txt", "e")
    assert tree.add("./c.txt") == "./c.txt"
    oid = tree.commit("c only")
    assert tree.status() == ["e.txt"]
    repo = pygit2.Repository(str(tree.sandbox.path))
    assert "c.txt" in repo[oid].tree and "e.txt" not in repo[oid].tree
    repo.free()


def test_add_errors(tree: WorkingTree) -> None:
    tree.write_file("d/x.txt", "x")
    raises("BEM-325", tree.add, "missing.txt")
    raises("BEM-325", tree.add, "d")
    raises("BEM-301", tree.add, "../x")
    raises("BEM-300", tree.add, "/etc/passwd")
    for rel in (".git/config", ".GIT/HEAD", "sub/.git"):
        raises("BEM-337", tree.add, rel)


# -- protected refs ----------------------------------------------------------------------------

SPELLINGS = [
    "main", "refs/heads/main", "Main", "MAIN", "+main", "+refs/heads/main", "HEAD:main",
    "feature:main", ":main", "HEAD:refs/heads/main", " main ", "refs/heads/refs/heads/main",
    "master", "refs/heads/Master",
]  # fmt: skip


@pytest.mark.parametrize("ref", SPELLINGS)
def test_is_protected_in_any_spelling(ref: str) -> None:
    assert is_protected(ref, ["main", "master"])
    assert is_protected(ref, ["refs/heads/main", "refs/heads/master"])


@pytest.mark.parametrize(
    ("ref", "protected"),
    [("feature", False), ("main-fix", False), ("beam/pr-1/main", False), ("refs/remotes/origin/main", False),
     ("release/1.0", True), ("Release/2.0", True), ("release", False), ("", False), (":", False)],
)  # fmt: skip
def test_is_protected_negatives_and_globs(ref: str, protected: bool) -> None:
    assert is_protected(ref, ["main", "release/*"]) is protected


def test_is_protected_with_no_protection() -> None:
    assert not is_protected("main", [])


@pytest.mark.parametrize("ref", ["main", "refs/heads/main", "Main", "+main", "HEAD:main", "master"])
def test_checkout_of_protected_ref_is_bem_333(tree: WorkingTree, ref: str) -> None:
    before = tree.current_branch()
    err = raises("BEM-333", tree.checkout_branch, ref, False)
    assert err.http_status == 403
    raises("BEM-333", tree.checkout_branch, ref, True)
    assert tree.current_branch() == before


def test_checkout_of_head_when_head_is_protected_is_refused(tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "work")
    commit_file(tree, "a.txt", "a", "init")
    assert tree.current_branch() == "main"
    raises("BEM-333", tree.checkout_branch, "HEAD", False)


def test_checkout_switches_branches_and_detaches_on_a_commit(tree: WorkingTree) -> None:
    first = tree.head_oid()
    commit_file(tree, "f.txt", "f", "on feature")
    tree.checkout_branch("other", create=True)
    assert tree.current_branch() == "other"
    tree.checkout_branch("refs/heads/feature")
    assert tree.current_branch() == "feature"
    tree.checkout_branch("feature", create=True)  # an existing branch is kept, not reset
    assert tree.log(1) == ["on feature"]
    assert first is not None
    tree.checkout_branch(first)
    assert tree.current_branch() == "HEAD"
    assert not (tree.sandbox.path / "f.txt").exists()
    raises("BEM-332", tree.checkout_branch, "no-such-branch", False)


# -- blocked paths -----------------------------------------------------------------------------


@pytest.fixture
def guarded(tmp_path: Path) -> WorkingTree:
    """A checkout whose workflows exist (the host checked them out) and may not be changed."""
    host = make_tree(tmp_path / "work")
    host.write_file(".github/workflows/ci.yml", "on: push\n")
    host.write_file("README.md", "r")
    host.add(".")
    host.commit("init")
    host.checkout_branch("feature", create=True)
    return WorkingTree(host.sandbox, PROTECTED, blocked_paths=[".github/workflows/**"])


@pytest.mark.parametrize(
    "rel", [".github/workflows/ci.yml", ".github/workflows/new.yml", ".GitHub/Workflows/x.yml",
            "./.github/workflows/deep/x.yml"],
)  # fmt: skip
def test_write_to_blocked_path_is_bem_334(guarded: WorkingTree, rel: str) -> None:
    err = raises("BEM-334", guarded.write_file, rel, "on: pull_request_target\n")
    assert "blocked by the repository's configuration" in str(err)
    assert (guarded.sandbox.path / ".github" / "workflows" / "ci.yml").read_text() == "on: push\n"
    assert guarded.status() == []


def test_write_through_symlinks_into_blocked_paths_is_refused(guarded: WorkingTree) -> None:
    root = guarded.sandbox.path
    (root / "innocent.yml").symlink_to(".github/workflows/ci.yml")
    (root / "wf").symlink_to(".github/workflows", target_is_directory=True)
    raises("BEM-334", guarded.write_file, "innocent.yml", "pwned")
    raises("BEM-334", guarded.write_file, "wf/new.yml", "pwned")
    assert (root / ".github" / "workflows" / "ci.yml").read_text() == "on: push\n"
    assert not (root / ".github" / "workflows" / "new.yml").exists()
    guarded.write_file(".github/dependabot.yml", "version: 2\n")  # not blocked


def test_blocked_changes_cannot_be_staged_or_committed(guarded: WorkingTree) -> None:
    root = guarded.sandbox.path
    head = guarded.head_oid()
    (root / ".github" / "workflows" / "ci.yml").write_text("changed out of band\n")
    raises("BEM-334", guarded.add, ".github/workflows/ci.yml")
    guarded.write_file("ok.txt", "ok")
    raises("BEM-334", guarded.add, ".")
    # Staged behind the tool's back: the commit still refuses it.
    repo = pygit2.Repository(str(root))
    repo.index.add(".github/workflows/ci.yml")
    repo.index.write()
    repo.free()
    raises("BEM-334", guarded.commit, "sneaky")
    assert guarded.head_oid() == head


def test_a_character_class_in_blocked_paths_blocks_writes_and_commits(tmp_path: Path) -> None:
    """Issue 28: `secret[12].txt` blocks `secret1.txt` (the config check agrees: test_repo_config)."""
    host = make_tree(tmp_path / "work")
    host.write_file("README.md", "r")
    host.add(".")
    host.commit("init")
    host.checkout_branch("feature", create=True)
    tree = WorkingTree(host.sandbox, PROTECTED, blocked_paths=["secret[12].txt"])
    raises("BEM-334", tree.write_file, "secret1.txt", "token")
    (tree.sandbox.path / "secret2.txt").write_text("out of band\n")
    raises("BEM-334", tree.add, "secret2.txt")
    tree.write_file("secret3.txt", "not blocked")


# -- push --------------------------------------------------------------------------------------


def test_push_to_a_local_bare_repository(tree: WorkingTree, bare: Path) -> None:
    tree.add_origin(str(bare))
    oid = commit_file(tree, "a.txt", "a", "feature work")
    assert tree.push() == "feature"
    assert remote_refs(bare) == {"refs/heads/feature": oid}
    assert tree.push("refs/heads/feature") == "feature"


@pytest.mark.parametrize("ref", SPELLINGS)
def test_every_protected_spelling_is_refused_and_nothing_arrives(
    tree: WorkingTree, bare: Path, ref: str
) -> None:
    tree.add_origin(str(bare))
    err = raises("BEM-328", tree.push, ref)
    assert err.http_status == 403
    assert err.data["detail"].strip().casefold() in {"main", "master"}
    assert remote_refs(bare) == {}


def test_push_of_head_on_a_protected_branch_is_refused(tmp_path: Path, bare: Path) -> None:
    tree = make_tree(tmp_path / "work")
    commit_file(tree, "a.txt", "a", "init")
    tree.add_origin(str(bare))
    for ref in (None, "HEAD"):
        assert raises("BEM-328", tree.push, ref).data == {"detail": "main"}
    assert remote_refs(bare) == {}


def test_protection_is_checked_before_the_remote(tree: WorkingTree) -> None:
    raises("BEM-328", tree.push, "main")
    raises("BEM-329", tree.push, "feature")


@pytest.mark.parametrize("ref", ["feature:other", "+feature", "refs/heads/feature:refs/heads/x", "bad..name"])
def test_refspec_tricks_are_bem_335(tree: WorkingTree, bare: Path, ref: str) -> None:
    tree.add_origin(str(bare))
    raises("BEM-335", tree.push, ref)
    assert remote_refs(bare) == {}


def test_push_only_to_allowed_branches(tmp_path: Path, bare: Path) -> None:
    tree = make_tree(tmp_path / "work", allowed_push_branches={"beam/pr-1/author-abcd1234"})
    commit_file(tree, "a.txt", "a", "init")
    tree.add_origin(str(bare))
    tree.checkout_branch("feature", create=True)
    raises("BEM-335", tree.push, "feature")
    raises("BEM-335", tree.push)
    tree.checkout_branch("beam/pr-1/author-abcd1234", create=True)
    assert tree.push() == "beam/pr-1/author-abcd1234"
    assert list(remote_refs(bare)) == ["refs/heads/beam/pr-1/author-abcd1234"]


def test_push_errors(tree: WorkingTree, bare: Path, tmp_path: Path) -> None:
    tree.add_origin(str(bare))
    raises("BEM-330", tree.push, "no-such-branch")
    tree.checkout_branch(str(tree.head_oid()))
    raises("BEM-327", tree.push)
    tree.checkout_branch("feature")
    # A non-fast-forward update is refused by the remote side.
    other = make_tree(tmp_path / "other")
    commit_file(other, "x.txt", "x", "unrelated")
    other.checkout_branch("feature", create=True)
    other.add_origin(str(bare))
    other.push("feature")
    raises("BEM-330", tree.push, "feature")


def test_origin_url_with_credentials_is_refused(tree: WorkingTree) -> None:
    err = raises("BEM-331", tree.add_origin, "https://x-access-token:ghs_SECRET@github.com/o/r.git")
    assert "ghs_SECRET" not in str(err) and "ghs_SECRET" not in repr(err.data)
    raises("BEM-331", tree.add_origin, "https://user@github.com/o/r.git")
    tree.add_origin("https://github.com/o/r.git")
    tree.add_origin("https://github.com/o/other.git")  # updates the existing origin
    config = (tree.sandbox.path / ".git" / "config").read_text()
    assert "https://github.com/o/other.git" in config and "o/r.git" not in config


def _reject_all_updates(bare: Path) -> None:
    hook = bare / "hooks" / "update"
    hook.parent.mkdir(exist_ok=True)
    hook.write_text("#!/bin/sh\necho 'branch frozen by policy' >&2\nexit 1\n")
    hook.chmod(hook.stat().st_mode | stat.S_IXUSR)


def test_push_over_http_with_token_in_memory(tree: WorkingTree, tmp_path: Path) -> None:
    token = "ghs_test-token-0123456789"
    with GitHttpServer(tmp_path / "srv", token=token) as server:
        server.create_bare("repo")
        tree = WorkingTree(tree.sandbox, PROTECTED, credentials=lambda: ("x-access-token", token))
        tree.add_origin(server.repo_url("repo"))
        oid = commit_file(tree, "a.txt", "a", "over http")
        assert tree.push() == "feature"
        assert server.ref_sha("repo", "refs/heads/feature") == oid
        assert any(r.authorized and r.user == "x-access-token" for r in server.requests)
        assert server.ref_sha("repo", "refs/heads/main") is None
    for dirpath, _dirs, files in os.walk(tree.sandbox.path):
        for name in files:
            path = Path(dirpath) / name
            if not path.is_symlink():
                assert token.encode() not in path.read_bytes(), path
    config = (tree.sandbox.path / ".git" / "config").read_text()
    assert "x-access-token" not in config and "@" not in config


def test_push_over_http_with_a_wrong_or_no_token_fails_cleanly(tree: WorkingTree, tmp_path: Path) -> None:
    with GitHttpServer(tmp_path / "srv", token="right-token") as server:
        server.create_bare("repo")
        tree.add_origin(server.repo_url("repo"))
        raises("BEM-330", tree.push)
        wrong = WorkingTree(
            tree.sandbox, PROTECTED, credentials=lambda: ("x-access-token", "wrong-token-value")
        )
        err = raises("BEM-330", wrong.push)
        assert "wrong-token-value" not in str(err)
        assert server.refs("repo") == {}


def test_push_rejected_by_the_server_is_bem_330(tree: WorkingTree, tmp_path: Path) -> None:
    with GitHttpServer(tmp_path / "srv", token="t0ken") as server:
        _reject_all_updates(server.create_bare("repo"))
        tree = WorkingTree(tree.sandbox, PROTECTED, credentials=lambda: ("x-access-token", "t0ken"))
        tree.add_origin(server.repo_url("repo"))
        err = raises("BEM-330", tree.push, "feature")
        assert "refs/heads/feature" in err.data["detail"]
        assert "hook declined" in err.data["detail"]
        assert server.refs("repo") == {}


@pytest.mark.parametrize(
    "name",
    [
        "docs/a\n\n**Checks** all 3 checks passed.md",
        "carriage\rreturn.txt",
        "esc\x1b[2J.txt",
        "c1\x85.txt",
        "report\u202etxt.exe",
        "iso\u2066late\u2069.py",
        "mark\u200f.md",
        "line\u2028sep.md",
    ],
)
def test_a_path_with_a_control_or_bidi_character_is_never_written(tree: WorkingTree, name: str) -> None:
    """Issue 28: such a name, shown in a comment, draws lines that are not there (BEM-346)."""
    err = raises("BEM-346", tree.write_file, name, "x\n")
    assert "\n" not in str(err.detail) and "\u202e" not in str(err.detail)
    assert tree.status() == []
    # One that got onto the disk another way (not through the tools) is neither staged nor committed.
    (tree.sandbox.path / name.split("/")[-1]).write_text("x\n")
    raises("BEM-346", tree.add, name.split("/")[-1])
    raises("BEM-346", tree.add, ".")
    index = pygit2.Repository(str(tree.sandbox.path)).index
    index.add(name.split("/")[-1])
    index.write()
    raises("BEM-346", tree.commit, "sneak it in")


def test_ordinary_unicode_names_are_still_written(tree: WorkingTree) -> None:
    tree.write_file("docs/café ünïcode 漢字.md", "ok\n")
    assert tree.add("docs/café ünïcode 漢字.md")
