"""Triage: which real GitHub deliveries can lead to work, and agreement with the worker's router."""

from __future__ import annotations

import pytest

from bot.app.webhooks.routing import Ignore, decide, parse_comment_event
from bot.app.webhooks.triage import can_lead_to_work
from tests.support.webhooks import (
    event_of,
    issue_comment_payload,
    load_payload,
    payload_names,
    pull_request_payload,
    review_comment_payload,
)

BODIES = [
    "nice work",
    "/beam review",
    "/BEAM summarize",
    "   /beam ask why?",
    "thanks!\n/beam commit-notes",
    "/beam",
    "/beam deploy",
    "/beam help",
    "/beamish is not a command",
    "> /beam review\nquoted, so not a command",
    "```\n/beam review\n```",
    "see /beam review in the docs",
    "",
]


@pytest.mark.parametrize("name", payload_names())
def test_every_real_payload_gets_a_decision(name: str) -> None:
    expected = {
        # The example comments carry no `/beam` line, and edits or deletions never trigger.
        "issue_comment.created.issue.json": False,
        "issue_comment.created.issue.with-installation.json": False,
        "issue_comment.created.pull_request.json": False,
        "issue_comment.deleted.issue.json": False,
        "issue_comment.edited.issue.json": False,
        "pull_request_review_comment.created.json": False,
        # `closed` ends held pushes and automatic reviews; opened and synchronize may start one.
        "pull_request.closed.json": True,
        "pull_request.opened.json": True,
        "pull_request.opened.with-null-body.json": True,
        "pull_request.synchronize.json": True,
    }
    # Events triage does not know (installation, push, ping, ...) keep their job, as before.
    assert can_lead_to_work(event_of(name), load_payload(name)) is expected.get(name, True)


@pytest.mark.parametrize("body", BODIES)
def test_a_comment_the_router_would_act_on_always_gets_a_job(body: str) -> None:
    for data in (issue_comment_payload(body), review_comment_payload(body)):
        parsed = parse_comment_event(data)
        assert parsed is not None
        acts = not isinstance(decide(parsed, "beam-bot"), Ignore)
        if acts:
            assert can_lead_to_work("issue_comment", data)
        # Triage may keep a job the router then ignores (quoted or fenced lines), never the reverse.
        if not can_lead_to_work("issue_comment", data):
            assert not acts


def test_commands_by_bots_and_edits_make_no_job() -> None:
    assert can_lead_to_work("issue_comment", issue_comment_payload("/beam review"))
    assert can_lead_to_work("pull_request_review_comment", review_comment_payload("/beam ask why?"))
    bot = issue_comment_payload("/beam review", commenter="ci[bot]", commenter_type="Bot")
    assert not can_lead_to_work("issue_comment", bot)
    bot_without_type = issue_comment_payload("/beam review", commenter="beam-bot[bot]")
    assert not can_lead_to_work("issue_comment", bot_without_type)
    edited = issue_comment_payload("/beam review", on_pull_request=False, action="edited")
    assert not can_lead_to_work("issue_comment", edited)


def test_when_in_doubt_the_job_is_made() -> None:
    comment = issue_comment_payload("/beam review")
    without_comment = {k: v for k, v in comment.items() if k != "comment"}
    assert can_lead_to_work("issue_comment", without_comment)
    odd_body = dict(comment, comment=dict(comment["comment"], body=None))
    assert can_lead_to_work("issue_comment", odd_body)
    assert can_lead_to_work("pull_request", {"number": 1})
    assert can_lead_to_work("installation", load_payload("installation.created.json"))
    assert can_lead_to_work("some_future_event", {})
    assert can_lead_to_work("pull_request", pull_request_payload("synchronize"))
    assert not can_lead_to_work("pull_request", dict(pull_request_payload("opened"), action="assigned"))


def test_a_reply_in_a_review_thread_gets_a_job() -> None:
    """The bot answers in review threads it started without a `/beam` line (reviews/threads.py)."""
    reply = review_comment_payload("why is this wrong?")
    assert not can_lead_to_work("pull_request_review_comment", reply)
    reply["comment"]["in_reply_to_id"] = 7
    assert can_lead_to_work("pull_request_review_comment", reply)
