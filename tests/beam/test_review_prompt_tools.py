"""Issue 30: the review skill's prompt names only tools that work in a review run. It used to say
"read the diff with git_diff", which shows uncommitted changes and so returns nothing in the run's
clean worktree (the change is committed; the request carries it as numbered hunks)."""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from typing import Any

import pytest

from bot.beam.sandbox import SandboxRoot, WorkingTree
from bot.beam.sandbox_tools import sandbox_tools
from bot.beam.skills import builtin_skills, skill_by_name
from bot.beam.types import AgentInput, ContentPart

pytestmark = pytest.mark.anyio
# Arguments that make each sandbox tool read something that exists in the tree below.
ARGS: dict[str, dict[str, Any]] = {"read_file": {"path": "app.py"}, "list_tree": {}, "git_log": {}}


def every_tool_name() -> set[str]:
    names = {t.spec().name for t in sandbox_tools(None)}
    for skill in builtin_skills():
        names |= set(skill.tools)
    return names


def named_in(prompt: str) -> set[str]:
    return {n for n in every_tool_name() if re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-])", prompt)}


def clean_tree(tmp_path: Path) -> WorkingTree:
    """A review run's worktree: the change committed, nothing left uncommitted."""
    tree = WorkingTree(SandboxRoot(tmp_path / "work"), ["main"])
    tree.init(initial_head="main")
    tree.write_file("app.py", "print('base')\n")
    tree.add(".")
    tree.commit("base")
    tree.checkout_branch("change", create=True)
    tree.write_file("app.py", "print('head')\n")
    tree.add(".")
    tree.commit("the change")
    return tree


async def test_every_tool_the_review_prompt_names_is_offered_and_returns_something(tmp_path: Path) -> None:
    skill = skill_by_name("review")
    assert skill is not None
    named = named_in(skill.system_prompt)
    assert "git_diff" not in named  # it returns nothing in a clean worktree (below)
    assert named and named <= set(skill.tools), named - set(skill.tools)
    tools = {t.spec().name: t for t in sandbox_tools(clean_tree(tmp_path))}
    request = AgentInput(content=[ContentPart.text_part("r")], session_id=uuid.uuid4(), run_id=uuid.uuid4())
    for name in sorted(named & set(tools)):
        value = await tools[name].invoke(ARGS[name], request)
        assert any(value.values()), (name, value)  # something the model can use
    assert await tools["git_diff"].invoke({}, request) == {
        "diff": ""
    }  # why the prompt must not send it there
