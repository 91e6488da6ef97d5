"""What dismisses a finding from its thread, decided without I/O (the replies and the resolved-thread
payload), and the schema upgrade that adds the ledger to a version-6 database."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from sqlalchemy import inspect, select, text

from bot.app.jobs.migrations import SCHEMA_VERSION
from bot.app.jobs.schema import schema_version
from bot.app.reviews.dismissals import ThreadResolved, is_dismissal, is_dismissing_reply
from bot.app.webhooks.routing import parse_comment_event
from bot.app.webhooks.triage import can_lead_to_work
from tests.support.db import opened
from tests.support.webhooks import load_payload, review_comment_payload

SCHEMA = Path(__file__).parents[2] / "data/github/webhook-schemas/pull_request_review_thread.resolved.json"


@pytest.mark.parametrize(
    ("body", "dismisses"),
    [
        ("Won't fix.", True),
        ("won’t fix, this is on purpose", True),
        ("WONTFIX", True),
        ("wont-fix", True),
        ("That is not a bug: the API returns 0 here.", True),
        ("/beam dismiss", True),
        ("/beam dismiss it is intended\nmore text", True),
        ("I won't fixate on this, but please fix it", False),
        ("This is not a bugfix release", False),
        ("Good catch, fixed.", False),
        ("/beam review", False),
    ],
)
def test_which_replies_dismiss(body: str, dismisses: bool) -> None:
    assert is_dismissal(body) is dismisses


def test_only_a_human_reply_in_a_thread_dismisses() -> None:
    payload = review_comment_payload("won't fix", commenter="maintainer", comment_id=5)
    payload["comment"]["in_reply_to_id"] = 4
    event = parse_comment_event(payload)
    assert event is not None and is_dismissing_reply(event)
    payload["comment"]["in_reply_to_id"] = None  # a new thread, not a reply to a finding
    event = parse_comment_event(payload)
    assert event is not None and not is_dismissing_reply(event)
    bot = review_comment_payload("won't fix", commenter="ci-bot[bot]", comment_id=6, commenter_type="Bot")
    bot["comment"]["in_reply_to_id"] = 4
    event = parse_comment_event(bot)
    assert event is not None and not is_dismissing_reply(event)


def _resolved(sender: str, sender_type: str = "User") -> dict[str, object]:
    payload = load_payload("pull_request.synchronize.json")
    root = load_payload("pull_request_review_comment.created.json")["comment"]
    root.pop("in_reply_to_id", None)
    reply = {**root, "id": root["id"] + 1, "in_reply_to_id": root["id"]}
    payload["action"] = "resolved"
    payload["thread"] = {"node_id": "PRRT_kwDOA", "comments": [reply, root]}
    payload["sender"] = {**payload["sender"], "login": sender, "type": sender_type}
    jsonschema.validate(payload, json.loads(SCHEMA.read_text(encoding="utf-8")))
    return payload


def test_a_resolved_thread_names_its_first_comment_and_its_resolver() -> None:
    payload = _resolved("maintainer")
    event = ThreadResolved.parse(payload)
    root = load_payload("pull_request_review_comment.created.json")["comment"]["id"]
    assert event is not None
    assert (event.root_comment_id, event.sender, event.sender_is_bot) == (root, "maintainer", False)
    assert event.number == payload["pull_request"]["number"]  # type: ignore[index]
    bot = ThreadResolved.parse(_resolved("beam-bot[bot]", "Bot"))
    assert bot is not None and bot.sender_is_bot
    assert ThreadResolved.parse({"action": "resolved"}) is None
    assert can_lead_to_work("pull_request_review_thread", payload)
    assert not can_lead_to_work("pull_request_review_thread", {**payload, "action": "unresolved"})


@pytest.mark.anyio
async def test_a_version_6_database_gets_the_ledger(db_url: str) -> None:
    async with opened(db_url) as s, s.write() as conn:
        await conn.execute(text("DROP TABLE review_findings"))
        await conn.execute(schema_version.update().values(version=6))
    async with opened(db_url) as s:
        async with s.read() as conn:
            tables = set(await conn.run_sync(lambda c: inspect(c).get_table_names()))
            version = (await conn.execute(select(schema_version.c.version))).scalar_one()
        assert "review_findings" in tables and version == SCHEMA_VERSION >= 7
