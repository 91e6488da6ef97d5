"""The `/beam` grammar, decided without I/O."""

from __future__ import annotations

import pytest

from bot.app.commands import Command, CommandError, help_text, parse


@pytest.mark.parametrize(
    ("body", "name", "skill", "text"),
    [
        ("/beam review", "review", "review", ""),
        ("  /beam summarize", "summarize", "summarize", ""),
        ("/beam commit-notes", "commit-notes", "commit-notes", ""),
        ("/BEAM Review please look at auth", "review", "review", "please look at auth"),
        ("/beam ask why is this slow?", "ask", "consume", "why is this slow?"),
        ("/beam ask\nwhat does\nthis do?", "ask", "consume", "what does\nthis do?"),
        (
            "Thanks!\n/beam author fix the typo in README\nand the link",
            "author",
            "author",
            "fix the typo in README\nand the link",
        ),
    ],
)
def test_skill_commands(body: str, name: str, skill: str, text: str) -> None:
    command = parse(body)
    assert command == Command(name=name, skill=skill, text=text)


def test_no_command_in_plain_comment() -> None:
    assert parse("LGTM, merging") is None
    assert parse("please run /beam review later") is None


def test_quoted_and_fenced_commands_do_not_run() -> None:
    assert parse("> /beam author delete everything\nI disagree") is None
    assert parse("```\n/beam author rm -rf\n```") is None
    assert parse("~~~\n/beam review\n~~~\n/beam summarize") == Command(name="summarize", skill="summarize")


def test_first_command_wins() -> None:
    assert parse("/beam summarize\n/beam review") == Command(
        name="summarize", skill="summarize", text="/beam review"
    )


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ("/beam", "needs a command"),
        ("/beam deploy now", "`deploy` is not a beam command"),
        ("/beam ask", "needs a question"),
        ("/beam author", "needs instructions"),
        ("/beam approve", "needs the id"),
        ("/beam reject ../../etc", "needs the id"),
        ("/beam `x`", "'x'"),
    ],
)
def test_malformed_commands_explain(body: str, fragment: str) -> None:
    result = parse(body)
    assert isinstance(result, CommandError)
    assert fragment in result.message


def test_approve_and_reject_take_an_id() -> None:
    assert parse("/beam approve 1a2b3c4d") == Command(name="approve", arg="1a2b3c4d")
    assert parse("/beam reject 1a2b3c4d because no") == Command(name="reject", arg="1a2b3c4d")


def test_help_lists_every_command() -> None:
    assert parse("/beam help") == Command(name="help")
    text = help_text()
    for usage in (
        "/beam review",
        "/beam ask <question>",
        "/beam author <instructions>",
        "/beam approve <id>",
    ):
        assert usage in text


def test_docs_and_update() -> None:
    assert parse("/beam docs explain the config") == Command(
        name="docs", skill="author", text="explain the config"
    )
    assert parse("/beam docs") == Command(name="docs", skill="author", text="")  # on a PR: its change
    assert parse("/beam update") == Command(name="update")
    assert parse("/beam UPDATE now please") == Command(name="update")
    text = help_text()
    assert "/beam docs <instructions>" in text and "/beam update" in text
