"""Webhook routing: which event does what. Deciding is pure (`decide`); acting is in `runs` and `replies`.

Only `created` comments trigger: an edit never runs anything, and neither does a bot (our own App
included), so the bot can never talk to itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gidgethub import routing, sansio
from pydantic import ValidationError

from bot.app import commands
from bot.app.github.payloads import CommentEvent
from bot.app.runs.render import command_help
from bot.app.webhooks.triage import can_lead_to_work

router = routing.Router()


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


@router.register("issue_comment", action="created")
@router.register("pull_request_review_comment", action="created")
async def on_comment(event: sansio.Event, services: Any) -> None:
    parsed = parse_comment_event(event.data)
    if parsed is None:
        services.log.warning("delivery %s: comment payload without the fields we need", event.delivery_id)
        return
    await services.handle_comment(parsed)


@router.register("pull_request", action="closed")
async def on_pull_closed(event: sansio.Event, services: Any) -> None:
    """A closed pull request ends its held pushes; the approvals module decides what that means."""
    handler = getattr(services, "handle_pull_closed", None)
    if handler is not None:
        await handler(event.data)


async def dispatch(event_name: str, delivery_id: str, data: dict[str, Any], services: Any) -> None:
    if not can_lead_to_work(event_name, data):  # the same triage as intake (jobs stored before it)
        return
    await router.dispatch(sansio.Event(data, event=event_name, delivery_id=delivery_id), services)
