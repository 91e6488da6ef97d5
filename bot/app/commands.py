"""The `/beam ...` grammar: what a comment asks for, decided without any I/O.

A command is a line that starts with `/beam` (after optional spaces), outside fenced code blocks and
quotes, so a maintainer quoting an earlier command in a reply does not run it again. The first such
line wins; the free text is the rest of that line plus the lines after it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Skill commands map to the framework's skill names; `ask` is the seed's `consume` skill.
SKILL_COMMANDS: dict[str, str] = {
    "review": "review",
    "summarize": "summarize",
    "commit-notes": "commit-notes",
    "ask": "consume",
    "author": "author",
    "docs": "author",  # the author skill, with a documentation prompt and only `docs.paths` writable
}
CONTROL_COMMANDS = ("help", "approve", "reject", "update")
NEEDS_TEXT = {"ask": "a question", "author": "instructions"}
NEEDS_ID = {"approve", "reject"}

HELP_LINES = (
    ("/beam review", "review the pull request and post a review with inline comments"),
    ("/beam summarize", "summarize the change"),
    ("/beam commit-notes", "draft a commit message for the change"),
    ("/beam ask <question>", "answer a question about the code, with citations"),
    ("/beam author <instructions>", "make a change on a bot branch; the push waits for your approval"),
    ("/beam docs <instructions>", "write documentation on a bot branch (on a PR, the text is optional)"),
    ("/beam update", "on the bot's own pull request: merge the base branch into it; the push waits too"),
    ("/beam approve <id>", "approve a held push"),
    ("/beam reject <id>", "reject a held push"),
    ("/beam help", "show this list"),
)

_COMMAND_LINE = re.compile(r"^[ \t]{0,3}/beam(?:[ \t]+(?P<rest>.*))?$", re.IGNORECASE)
_FENCE = re.compile(r"^[ \t]{0,3}(```|~~~)")
_PUSH_ID = re.compile(r"^[A-Za-z0-9-]{4,64}$")


@dataclass(frozen=True, slots=True)
class Command:
    """A well-formed command. `skill` is set for skill commands; `arg` for approve / reject."""

    name: str
    text: str = ""
    skill: str | None = None
    arg: str | None = None


@dataclass(frozen=True, slots=True)
class CommandError:
    """A `/beam` line we could not understand; `message` is shown to the commenter with the help."""

    message: str


def help_text() -> str:
    rows = "\n".join(f"| `{usage}` | {what} |" for usage, what in HELP_LINES)
    return f"| command | what it does |\n|---|---|\n{rows}"


def _command_lines(body: str) -> list[tuple[int, str]]:
    """Lines outside fenced code blocks and block quotes, with their index."""
    out: list[tuple[int, str]] = []
    fenced = False
    for index, line in enumerate(body.splitlines()):
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if fenced or line.lstrip().startswith(">"):
            continue
        out.append((index, line))
    return out


def parse(body: str) -> Command | CommandError | None:
    """The command in a comment body, an error for a malformed one, or None when there is none."""
    lines = body.splitlines()
    for index, line in _command_lines(body):
        match = _COMMAND_LINE.match(line.rstrip())
        if match is None:
            continue
        rest = (match.group("rest") or "").strip()
        if not rest:
            return CommandError("`/beam` needs a command.")
        word, _, tail = rest.partition(" ")
        name = word.lower()
        following = "\n".join(lines[index + 1 :]).strip()
        text = "\n".join(part for part in (tail.strip(), following) if part)
        return _build(name, text, word)
    return None


def _build(name: str, text: str, word: str) -> Command | CommandError:
    if name in SKILL_COMMANDS:
        if name in NEEDS_TEXT and not text:
            return CommandError(f"`/beam {name}` needs {NEEDS_TEXT[name]}, for example `/beam {name} ...`.")
        return Command(name=name, text=text, skill=SKILL_COMMANDS[name])
    if name in ("help", "update"):
        return Command(name=name)
    if name in NEEDS_ID:
        arg = text.split()[0] if text.split() else ""
        if not _PUSH_ID.match(arg):
            return CommandError(
                f"`/beam {name}` needs the id of a held push, for example `/beam {name} 1a2b3c4d`."
            )
        return Command(name=name, arg=arg)
    shown = (word if len(word) <= 40 else word[:40] + "…").replace("`", "'")
    return CommandError(f"`{shown}` is not a beam command.")
