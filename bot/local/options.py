"""What `beam-bot run` was asked for: its options, and the skill they name (the GitHub command names,
`review`, `ask`, ..., or a framework skill this host can run)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from bot.beam.skills import SANDBOX_TOOL_NAMES, Skill, builtin_skills
from bot.local.git import UsageError, check_repository

# The GitHub command names (`/beam ask ...`), as bot.app.commands maps them to framework skills.
COMMAND_SKILLS = {
    "review": "review",
    "summarize": "summarize",
    "commit-notes": "commit-notes",
    "ask": "consume",
    "author": "author",
    "docs": "author",  # /beam docs's policy: the author skill, writing only `docs.paths`
}
# The skills that work on a change (`--base`..`--ref`) as their GitHub commands do on a pull request.
CHANGE_SKILLS = frozenset({"review", "summarize", "commit-notes", "consume"})
# The commands whose text is the whole request: without it there is nothing to ask.
NEEDS_TEXT = {
    "ask": 'ask needs a question: beam-bot run ask "what does this change do?"',
    "author": 'author needs instructions: beam-bot run author "fix the typo in README"',
}
# The tools the host provides beside the sandbox's (bot.app.runs.host_tools), for every change skill.
HOST_TOOLS = frozenset({"search", "get_page", "review_change"})


@dataclass(frozen=True, slots=True)
class RunOptions:
    skill: str
    repo: Path
    instructions: str = ""  # empty: the GitHub command's default task
    branch: str | None = None
    as_json: bool = False
    approve: bool | None = None  # None: ask on the terminal
    ref: str = "HEAD"
    base: str | None = None  # None: the merge base with the default branch (change skills)
    working_tree: bool = False  # include the uncommitted changes (a snapshot commit on HEAD)

    def with_ref(self, ref: str) -> RunOptions:
        return replace(self, ref=ref)


def local_skills(sandbox_names: set[str]) -> dict[str, Skill]:
    """The skills this host can run: those with at least one of their tools available here
    (so `gfs-publish`, whose only tool is the host's `publish_docset`, is not offered)."""
    offered: dict[str, Skill] = {}
    for skill in builtin_skills():
        available = sandbox_names | (HOST_TOOLS if skill.name in CHANGE_SKILLS else set())
        if available & set(skill.tools):
            offered[skill.name] = skill
    return offered


def resolve_skill(name: str, sandbox_names: set[str]) -> Skill:
    offered = local_skills(sandbox_names)
    skill = offered.get(COMMAND_SKILLS.get(name, name))
    if skill is None:
        commands = ", ".join(c for c, s in COMMAND_SKILLS.items() if s in offered)
        others = ", ".join(s for s in offered if s not in COMMAND_SKILLS.values())
        more = f" (or the framework's {others})" if others else ""
        raise UsageError(f"unknown skill {name!r}; choose from {commands}{more}")
    return skill


def check_arguments(options: RunOptions) -> tuple[Path, Skill]:
    """The checkout's top level and the skill, or UsageError: what `beam-bot run` can say is wrong
    before it loads the model client and the App's review code, so a typo is answered at once."""
    repo = check_repository(options.repo)
    skill = resolve_skill(options.skill, set(SANDBOX_TOOL_NAMES))
    if options.base is not None and skill.name not in CHANGE_SKILLS:
        raise UsageError(f"--base is for review, summarize, commit-notes and ask, not {options.skill}")
    if options.skill in NEEDS_TEXT and not options.instructions.strip():
        raise UsageError(NEEDS_TEXT[options.skill])
    return repo, skill
