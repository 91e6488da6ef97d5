"""The nine sandbox tools: specs, argument checks, return shapes, and the bound vs metadata modes."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pygit2
import pytest

from bot.beam.commit_tree import CommitTree
from bot.beam.errors import BeamError
from bot.beam.sandbox import SandboxRoot, WorkingTree
from bot.beam.sandbox_tools import sandbox_tools
from bot.beam.tools import Tool
from bot.beam.tree_view import ToolTree
from bot.beam.types import AgentInput, ContentPart

S = {"type": "string"}
EXPECTED_SPECS = [
    ("list_tree", "List files under a relative path in the workspace sandbox.", {"path": S}, [], False),
    ("read_file", "Read a text file from the sandbox.", {"path": S}, ["path"], False),
    ("write_file", "Write a text file in the sandbox.", {"path": S, "body": S}, ["path", "body"], False),
    ("git_status", "Show dirty and untracked paths.", {}, [], False),
    ("git_diff", "Show unstaged/index diff.", {}, [], False),
    ("git_log", "Recent commit summaries.", {"limit": {"type": "integer"}}, [], False),
    ("git_add", "Stage a relative path (or '.').", {"path": S}, ["path"], False),
    ("git_commit", "Commit the index on the current branch.", {"message": S}, ["message"], False),
    ("git_push", "Push the current (or named) branch to origin. Protected refs are denied.", {"ref": S}, [],
     True),
]  # fmt: skip


def agent_input(metadata: Any = None) -> AgentInput:
    return AgentInput(
        content=[ContentPart.text_part("hi")], session_id=uuid.uuid4(), run_id=uuid.uuid4(), metadata=metadata
    )


def by_name(tools: list[Tool]) -> dict[str, Tool]:
    return {tool.spec().name: tool for tool in tools}


@pytest.fixture
def tree(tmp_path: Path) -> WorkingTree:
    tree = WorkingTree(SandboxRoot(tmp_path / "work"), ["main", "master"])
    tree.init(initial_head="main")
    tree.write_file("README.md", "one\ntwo\n")
    tree.add(".")
    tree.commit("Initial commit")
    tree.checkout_branch("feature", create=True)
    return tree


@pytest.fixture
def tools(tree: WorkingTree) -> dict[str, Tool]:
    return by_name(sandbox_tools(tree))


async def call(tools: dict[str, Tool], name: str, args: Any, metadata: Any = None) -> Any:
    return await tools[name].invoke(args, agent_input(metadata))


async def error_of(tools: dict[str, Tool], name: str, args: Any, metadata: Any = None) -> BeamError:
    with pytest.raises(BeamError) as exc:
        await call(tools, name, args, metadata)
    return exc.value


def test_specs_in_order() -> None:
    specs = [tool.spec() for tool in sandbox_tools(None)]
    got = [
        (s.name, s.description, s.parameters["properties"], s.parameters["required"], s.confirm_required)
        for s in specs
    ]
    assert got == EXPECTED_SPECS
    assert list(specs[0].parameters) == ["type", "properties", "required"]
    assert specs[3].to_json()["parameters"] == {"type": "object", "properties": {}, "required": []}


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("name", "args", "missing"),
    [
        ("read_file", {}, "path"),
        ("read_file", {"path": 3}, "path"),
        ("read_file", None, "path"),
        ("write_file", {}, "path"),
        ("write_file", {"body": "x"}, "path"),
        ("write_file", {"path": "x.txt"}, "body"),
        ("write_file", {"path": "x.txt", "body": None}, "body"),
        ("git_add", {"path": ["."]}, "path"),
        ("git_commit", {}, "message"),
    ],
)
async def test_required_arguments_are_bem_108(
    tools: dict[str, Tool], tree: WorkingTree, name: str, args: Any, missing: str
) -> None:
    err = await error_of(tools, name, args)
    assert err.code == "BEM-108"
    assert err.data == {"detail": missing}
    assert not (tree.sandbox.path / "x.txt").exists()


@pytest.mark.anyio
async def test_file_tools_round_trip(tools: dict[str, Tool]) -> None:
    assert await call(tools, "write_file", {"path": "docs/a.md", "body": "A\n"}) == {
        "path": "docs/a.md",
        "written": True,
    }
    assert await call(tools, "read_file", {"path": "./docs/a.md"}) == {"path": "./docs/a.md", "body": "A\n"}
    assert await call(tools, "list_tree", {}) == {"paths": ["README.md", "docs/a.md"]}
    assert await call(tools, "list_tree", {"path": 7}) == {"paths": ["README.md", "docs/a.md"]}
    assert await call(tools, "list_tree", {"path": "docs"}) == {"paths": ["docs/a.md"]}


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("name", "args", "code"),
    [
        ("read_file", {"path": "../outside.txt"}, "BEM-301"),
        ("read_file", {"path": "/etc/hostname"}, "BEM-300"),
        ("read_file", {"path": ".git/config"}, "BEM-337"),
        ("write_file", {"path": ".git/hooks/pre-commit", "body": "#!/bin/sh\n"}, "BEM-337"),
        ("write_file", {"path": "sub/.GIT/config", "body": "x"}, "BEM-337"),
        ("list_tree", {"path": ".git"}, "BEM-337"),
        ("git_add", {"path": ".git/config"}, "BEM-337"),
        ("read_file", {"path": "missing.txt"}, "BEM-307"),
        ("list_tree", {"path": "README.md"}, "BEM-306"),
    ],
)
async def test_jail_holds_through_the_tools(
    tools: dict[str, Tool], tree: WorkingTree, name: str, args: Any, code: str
) -> None:
    config = (tree.sandbox.path / ".git" / "config").read_text()
    assert (await error_of(tools, name, args)).code == code
    assert (tree.sandbox.path / ".git" / "config").read_text() == config
    assert not (tree.sandbox.path / ".git" / "hooks" / "pre-commit").exists()


@pytest.mark.anyio
@pytest.mark.parametrize("view", ["disk", "objects"])
@pytest.mark.parametrize(
    ("name", "args", "code"),
    [
        ("read_file", {"path": "../outside.txt"}, "BEM-301"),
        ("read_file", {"path": "/etc/hostname"}, "BEM-300"),
        ("read_file", {"path": ".git/config"}, "BEM-337"),
        ("read_file", {"path": "sub/.GIT/config"}, "BEM-337"),
        ("list_tree", {"path": ".git"}, "BEM-337"),
        ("read_file", {"path": "missing.txt"}, "BEM-307"),
        ("list_tree", {"path": "README.md"}, "BEM-306"),
    ],
)
async def test_jail_holds_through_the_read_tools_on_both_views(
    tree: WorkingTree, view: str, name: str, args: Any, code: str
) -> None:
    """The same refusals when a review reads the commit's objects instead of a checkout (issue 43)."""
    bound: ToolTree = tree if view == "disk" else CommitTree(tree.sandbox.path, "HEAD")
    tools = by_name(sandbox_tools(bound))
    assert (await error_of(tools, name, args)).code == code
    if view == "objects":
        assert (await call(tools, "read_file", {"path": "README.md"}))["body"] == "one\ntwo\n"
        assert (await error_of(tools, "write_file", {"path": "x.txt", "body": "x"})).code == "BEM-342"
        assert not (tree.sandbox.path / "x.txt").exists()


@pytest.mark.anyio
async def test_caps_through_the_tools(tmp_path: Path) -> None:
    tree = WorkingTree(SandboxRoot(tmp_path / "w"), [], max_file_bytes=10, max_list_entries=2)
    tools = by_name(sandbox_tools(tree))
    assert (await error_of(tools, "write_file", {"path": "a.txt", "body": "x" * 11})).code == "BEM-319"
    assert not (tmp_path / "w" / "a.txt").exists()
    (tmp_path / "w" / "big.txt").write_text("x" * 11)
    assert (await error_of(tools, "read_file", {"path": "big.txt"})).code == "BEM-319"
    (tmp_path / "w" / "c.txt").write_text("c")
    (tmp_path / "w" / "d.txt").write_text("d")
    assert (await error_of(tools, "list_tree", {})).code == "BEM-319"


@pytest.mark.anyio
async def test_git_tools_flow(tools: dict[str, Tool], tree: WorkingTree, tmp_path: Path) -> None:
    await call(tools, "write_file", {"path": "README.md", "body": "one\nTWO\n"})
    await call(tools, "write_file", {"path": "new/file.txt", "body": "n\n"})
    assert await call(tools, "git_status", {}) == {"paths": ["README.md", "new/"]}
    diff = (await call(tools, "git_diff", {}))["diff"]
    assert "-two\n+TWO\n" in diff and " one\n" in diff
    assert await call(tools, "git_add", {"path": "."}) == {"staged": "."}
    result = await call(tools, "git_commit", {"message": "Edit readme"})
    assert list(result) == ["oid", "message"]
    assert result["message"] == "Edit readme" and result["oid"] == tree.head_oid()
    assert await call(tools, "git_status", None) == {"paths": []}
    assert await call(tools, "git_log", {}) == {"commits": ["Edit readme", "Initial commit"]}

    bare = tmp_path / "remote.git"
    pygit2.init_repository(str(bare), bare=True).free()
    tree.add_origin(str(bare))
    assert await call(tools, "git_push", {}) == {"pushed": "HEAD"}
    assert await call(tools, "git_push", {"ref": "refs/heads/feature"}) == {"pushed": "refs/heads/feature"}
    err = await error_of(tools, "git_push", {"ref": "HEAD:main"})
    assert (err.code, err.data) == ("BEM-328", {"detail": "main"})
    remote = pygit2.Repository(str(bare))
    assert list(remote.references) == ["refs/heads/feature"]
    remote.free()


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("limit", "count"), [(None, 20), (0, 0), (3, 3), (-1, 20), ("3", 20), (2.0, 20), (True, 20), (100, 25)]
)
async def test_git_log_limit(tools: dict[str, Tool], tree: WorkingTree, limit: Any, count: int) -> None:
    for i in range(24):
        tree.commit(f"commit {i}")
    args = {} if limit is None else {"limit": limit}
    commits = (await call(tools, "git_log", args))["commits"]
    assert len(commits) == count
    if count:
        assert commits[0] == "commit 23"


@pytest.mark.anyio
async def test_bound_tree_ignores_metadata(tools: dict[str, Tool], tmp_path: Path) -> None:
    other = tmp_path / "chosen-by-the-request"
    metadata = {"sandbox_root": str(other), "protected_refs": []}
    assert await call(tools, "list_tree", {}, metadata) == {"paths": ["README.md"]}
    assert not other.exists()
    assert (await error_of(tools, "git_push", {"ref": "main"}, metadata)).code == "BEM-328"


# -- unbound mode: the seed's documented (unsafe) behaviour ------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("metadata", [None, {}, {"sandbox_root": 5}, ["x"]])
async def test_unbound_without_root_is_bem_107(metadata: Any) -> None:
    tools = by_name(sandbox_tools(None))
    for name in ("list_tree", "git_status"):
        err = await error_of(tools, name, {}, metadata)
        assert (err.code, err.data) == ("BEM-107", None)


@pytest.mark.anyio
async def test_unbound_takes_root_and_protection_from_metadata(tmp_path: Path) -> None:
    root = tmp_path / "created" / "root"
    tools = by_name(sandbox_tools(None))
    meta: dict[str, Any] = {"sandbox_root": str(root)}
    await call(tools, "write_file", {"path": "a.txt", "body": "a"}, meta)
    assert (root / "a.txt").read_text() == "a"  # the root was created on demand
    assert (await error_of(tools, "read_file", {"path": "../x"}, meta)).code == "BEM-301"
    repo = pygit2.init_repository(str(root), initial_head="main")
    repo.free()
    await call(tools, "git_add", {"path": "a.txt"}, meta)
    await call(tools, "git_commit", {"message": "m"}, meta)
    # Default protection: main and master.
    for ref in ("main", "master"):
        assert (await error_of(tools, "git_push", {"ref": ref}, meta)).code == "BEM-328"
    # Non-string entries are dropped.
    custom = {**meta, "protected_refs": ["feature", 7]}
    assert (await error_of(tools, "git_push", {"ref": "feature"}, custom)).code == "BEM-328"
    assert (await error_of(tools, "git_push", {"ref": "main"}, custom)).code == "BEM-329"
    # An empty list is the documented "no protection" mode: only the missing origin stops it.
    unsafe = {**meta, "protected_refs": []}
    assert (await error_of(tools, "git_push", {"ref": "main"}, unsafe)).code == "BEM-329"
