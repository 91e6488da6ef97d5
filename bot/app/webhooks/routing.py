"""What a comment asks of the bot, decided without any I/O (`decide`), and the typed payloads.

Only `created` comments trigger: an edit never runs anything, and neither does a bot (our own App
included), so the bot can never talk to itself. Acting on a decision is in handlers.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from bot.app import commands
from bot.app.github.payloads import CommentEvent, PullRequestEvent
from bot.app.runs.render import command_help


@dataclass(frozen=True, slots=True)
class Ignore:
    reason: str


@dataclass(frozen=True, slots=True)
class Reply:
    """Answer with text, no run (help, a malformed command)."""

    text: str


@dataclass(frozen=True, slots=True)
class Act:
    """A well-formed command from a human, still to be authorised."""

    command: commands.Command


Decision = Ignore | Reply | Act


def decide(event: CommentEvent, bot_login: str | None) -> Decision:
    """What a comment asks of the bot, before any permission check."""
    if event.action != "created":
        return Ignore(f"comment {event.action}")
    author = event.comment.user
    if event.sender.is_bot or author.is_bot:
        return Ignore("comment by a bot")
    if bot_login and author.login.lower() in {bot_login.lower(), f"{bot_login.lower()}[bot]"}:
        return Ignore("our own comment")
    parsed = commands.parse(event.comment.body)
    if parsed is None:
        return Ignore("no command")
    if isinstance(parsed, commands.CommandError):
        return Reply(command_help(parsed.message))
    if parsed.name == "help":
        return Reply(command_help())
    return Act(parsed)


def parse_comment_event(data: dict[str, Any]) -> CommentEvent | None:
    try:
        return CommentEvent.model_validate(data)
    except ValidationError:
        return None


def parse_pull_request_event(data: dict[str, Any]) -> PullRequestEvent | None:
    try:
        return PullRequestEvent.model_validate(data)
    except ValidationError:
        return None
