"""`sandbox_tools(tree)`: the nine file and git tools of the seed, over a `WorkingTree` or a `CommitTree`.

Names, descriptions, parameter schemas, argument checks (BEM-108) and return shapes are
Riverbeam's (riverbeam-reference.md 5.2, 5.3). The rules (jail, caps, `.git`, blocked paths,
protected refs) live in the tree, so every way in is held to them; a review's read-only
`CommitTree` (commit_tree.py) refuses the writes (BEM-342). Each call runs the blocking
tree method in a worker thread.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio.to_thread

from bot.beam.errors import BeamError
from bot.beam.jail import SandboxRoot
from bot.beam.tools import FunctionTool, Tool, ToolSpec, json_params, string_arg
from bot.beam.tree_view import ToolTree
from bot.beam.types import AgentInput
from bot.beam.worktree import WorkingTree

DEFAULT_PROTECTED_REFS = ("main", "master")
DEFAULT_LOG_LIMIT = 20

_STRING = {"type": "string"}

Action = Callable[[ToolTree, Any], Any]


def sandbox_tools(tree: ToolTree | None) -> list[Tool]:
    """The nine sandbox tools, in the original's order.

    WARNING: with `tree=None` each call builds its tree from the request's metadata, as the seed
    documents: `metadata.sandbox_root` picks ANY host directory (and creates it), and
    `metadata.protected_refs: []` turns push protection off. That is only for local
    experiments; a service must bind a tree whose root and protected refs the host chose.
    """
    return [_tool(tree, *row) for row in _TOOLS]


def tree_from_metadata(input: AgentInput) -> WorkingTree:
    """The unbound mode's tree: root and protected refs taken from the request (unsafe, see above)."""
    root = input.meta("sandbox_root")
    if not isinstance(root, str):
        raise BeamError("BEM-107")
    refs = input.meta("protected_refs")
    protected = [r for r in refs if isinstance(r, str)] if isinstance(refs, list) else DEFAULT_PROTECTED_REFS
    return WorkingTree(SandboxRoot(root), protected)


def _tool(
    tree: ToolTree | None,
    name: str,
    description: str,
    properties: dict[str, Any],
    required: list[str],
    action: Action,
    confirm_required: bool,
) -> Tool:
    spec = ToolSpec(name, description, confirm_required, json_params(properties, required))

    async def invoke(args: Any, input: AgentInput) -> Any:
        bound: ToolTree = (
            tree if tree is not None else await anyio.to_thread.run_sync(tree_from_metadata, input)
        )
        for arg in required:
            string_arg(args, arg)
        return await anyio.to_thread.run_sync(action, bound, args)

    return FunctionTool(spec, invoke)


def _optional_string(args: Any, name: str) -> str | None:
    value = args.get(name) if isinstance(args, dict) else None
    return value if isinstance(value, str) else None


def _list_tree(tree: ToolTree, args: Any) -> Any:
    return {"paths": tree.list_files(_optional_string(args, "path") or "")}


def _read_file(tree: ToolTree, args: Any) -> Any:
    path = string_arg(args, "path")
    return {"path": path, "body": tree.read_file(path)}


def _write_file(tree: ToolTree, args: Any) -> Any:
    path = string_arg(args, "path")
    tree.write_file(path, string_arg(args, "body"))
    return {"path": path, "written": True}


def _git_status(tree: ToolTree, args: Any) -> Any:
    return {"paths": tree.status()}


def _git_diff(tree: ToolTree, args: Any) -> Any:
    return {"diff": tree.diff()}


def _git_log(tree: ToolTree, args: Any) -> Any:
    value = args.get("limit") if isinstance(args, dict) else None
    # As the original reads it: an unsigned integer, anything else (bool, float, negative) is 20.
    limit = DEFAULT_LOG_LIMIT
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        limit = value
    return {"commits": tree.log(limit)}


def _git_add(tree: ToolTree, args: Any) -> Any:
    return {"staged": tree.add(string_arg(args, "path"))}


def _git_commit(tree: ToolTree, args: Any) -> Any:
    message = string_arg(args, "message")
    return {"oid": tree.commit(message), "message": message}


def _git_push(tree: ToolTree, args: Any) -> Any:
    ref = _optional_string(args, "ref")
    tree.push(ref)
    return {"pushed": ref if ref is not None else "HEAD"}


# name, description, properties, required (checked in this order), action, confirm_required
_TOOLS: list[tuple[str, str, dict[str, Any], list[str], Action, bool]] = [
    ("list_tree", "List files under a relative path in the workspace sandbox.", {"path": _STRING}, [],
     _list_tree, False),
    ("read_file", "Read a text file from the sandbox.", {"path": _STRING}, ["path"], _read_file, False),
    ("write_file", "Write a text file in the sandbox.", {"path": _STRING, "body": _STRING}, ["path", "body"],
     _write_file, False),
    ("git_status", "Show dirty and untracked paths.", {}, [], _git_status, False),
    ("git_diff", "Show unstaged/index diff.", {}, [], _git_diff, False),
    ("git_log", "Recent commit summaries.", {"limit": {"type": "integer"}}, [], _git_log, False),
    ("git_add", "Stage a relative path (or '.').", {"path": _STRING}, ["path"], _git_add, False),
    ("git_commit", "Commit the index on the current branch.", {"message": _STRING}, ["message"],
     _git_commit, False),
    ("git_push", "Push the current (or named) branch to origin. Protected refs are denied.", {"ref": _STRING},
     [], _git_push, True),
]  # fmt: skip
