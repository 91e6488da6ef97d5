"""The built-in skills: names, order and allowlists of the original (reference 7), and our prompts."""

from __future__ import annotations

import dataclasses

import pytest

from bot.beam.skills import Skill, builtin_skills, skill_by_name

ALLOWLISTS = {
    "author": [
        "list_tree",
        "read_file",
        "write_file",
        "git_status",
        "git_diff",
        "git_log",
        "git_add",
        "git_commit",
        "git_push",
        "remember",
        "search",
        "get_page",
        "get_block",
        "graph_neighbors",
        "open_change",
        "propose_suggestion",
        "commit_paths",
        "review_change",
        "run_checks",  # beam-bot's addition (issue 22): the repository's checks, offered by the host
    ],
    "consume": ["search", "get_page", "get_block", "graph_neighbors"],
    "summarize": ["list_tree", "read_file", "git_diff", "git_log", "search", "get_page", "get_block"],
    "commit-notes": ["git_status", "git_diff", "git_log"],
    "review": ["list_tree", "read_file", "git_diff", "git_log", "get_page", "review_change"],
    "gfs-publish": ["publish_docset"],
}


def test_builtins_in_order_with_their_allowlists() -> None:
    skills = builtin_skills()
    assert [s.name for s in skills] == list(ALLOWLISTS)
    for skill in skills:
        assert list(skill.tools) == ALLOWLISTS[skill.name]


@pytest.mark.parametrize("name", list(ALLOWLISTS))
def test_prompts_are_one_paragraph_and_treat_pr_text_as_data(name: str) -> None:
    skill = skill_by_name(name)
    assert skill is not None
    prompt = skill.system_prompt
    assert prompt and "\n" not in prompt and len(prompt) < 800
    assert "data" in prompt and "never instructions" in prompt


def test_prompts_name_their_key_steps() -> None:
    def prompt(name: str) -> str:
        skill = skill_by_name(name)
        assert skill is not None
        return skill.system_prompt

    author = prompt("author")
    assert author.index("git_status") < author.index("git_push")
    assert "run's own branch" in author and "commit" in author
    review = prompt("review")
    assert "review_change" in review and "path and line" in review
    assert "cite" in prompt("consume")
    assert "Do not commit" in prompt("commit-notes")
    assert "publish_docset" in prompt("gfs-publish")


def test_skill_by_name_is_exact_and_returns_a_copy() -> None:
    assert skill_by_name("Review") is None
    assert skill_by_name("review ") is None
    assert skill_by_name("nope") is None
    first, second = skill_by_name("review"), skill_by_name("review")
    assert first is not None and second is not None
    assert first == second and first is not second
    assert isinstance(first, Skill)
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.name = "changed"  # type: ignore[misc]
    assert builtin_skills()[0] is not builtin_skills()[0]


def test_the_sandbox_tool_names_are_the_tools_names() -> None:
    """`SANDBOX_TOOL_NAMES` lets `beam-bot run` check a skill's name without importing the tools."""
    from bot.beam.sandbox_tools import sandbox_tools
    from bot.beam.skills import SANDBOX_TOOL_NAMES

    assert {tool.spec().name for tool in sandbox_tools(None)} == SANDBOX_TOOL_NAMES
