"""What a comment asks of the bot, decided from real GitHub payloads without any I/O."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bot.app.commands import Command
from bot.app.github.payloads import CommentEvent
from bot.app.webhooks.routing import Act, Ignore, Reply, decide, parse_comment_event

WEBHOOKS = Path(__file__).resolve().parents[2] / "data" / "github" / "webhooks"


def load(name: str, **comment: Any) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((WEBHOOKS / name).read_text(encoding="utf-8"))
    data["comment"].update(comment)
    return data


def event(name: str, body: str) -> CommentEvent:
    parsed = parse_comment_event(load(name, body=body))
    assert parsed is not None
    return parsed


def test_pull_request_comment_payload_parses() -> None:
    parsed = event("issue_comment.created.pull_request.json", "/beam review")
    assert parsed.on_pull_request
    assert parsed.number == 7
    assert parsed.repository.full_name == "Azure/azure-sdk-fake"
    assert decide(parsed, "beam-bot") == Act(Command(name="review", skill="review"))


def test_review_comment_payload_parses_with_file_context() -> None:
    parsed = event("pull_request_review_comment.created.json", "/beam ask why this line?")
    assert parsed.is_review_comment and parsed.on_pull_request
    assert parsed.comment.path
    assert decide(parsed, "beam-bot") == Act(Command(name="ask", skill="consume", text="why this line?"))


def test_issue_comment_is_not_a_pull_request() -> None:
    parsed = event("issue_comment.created.issue.json", "/beam summarize")
    assert not parsed.on_pull_request


@pytest.mark.parametrize("name", ["issue_comment.edited.issue.json", "issue_comment.deleted.issue.json"])
def test_edits_and_deletions_never_trigger(name: str) -> None:
    parsed = event(name, "/beam review")
    assert isinstance(decide(parsed, "beam-bot"), Ignore)


def test_bots_and_ourselves_are_ignored() -> None:
    data = load("issue_comment.created.pull_request.json", body="/beam review")
    data["sender"] = {**data["sender"], "type": "Bot", "login": "dependabot[bot]"}
    assert decide(CommentEvent.model_validate(data), None) == Ignore("comment by a bot")
    data = load("issue_comment.created.pull_request.json", body="/beam review")
    data["comment"]["user"] = {**data["comment"]["user"], "login": "Beam-Bot"}
    assert decide(CommentEvent.model_validate(data), "beam-bot") == Ignore("our own comment")


def test_plain_comments_are_ignored_and_bad_commands_get_help() -> None:
    assert decide(event("issue_comment.created.pull_request.json", "nice work"), "b") == Ignore("no command")
    reply = decide(event("issue_comment.created.pull_request.json", "/beam deploy"), "b")
    assert isinstance(reply, Reply)
    assert "`deploy` is not a beam command" in reply.text and "/beam review" in reply.text
    help_reply = decide(event("issue_comment.created.pull_request.json", "/beam help"), "b")
    assert isinstance(help_reply, Reply) and "/beam author <instructions>" in help_reply.text


def test_payload_missing_fields_is_refused() -> None:
    assert parse_comment_event({"action": "created"}) is None
