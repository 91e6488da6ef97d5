"""Can this delivery lead to work? One pure decision, shared by intake (job or not) and the worker.

GitHub sends every comment on every pull request of every installed repository, and almost none is
a command. Intake asks `can_lead_to_work` before it stores a delivery: a delivery that cannot is kept
for dedupe and audit without a job, so the workers never see it. The worker's router asks the same
function first, so both sides agree on what is ignored.

The decision is conservative: it only turns away what no feature could act on, and anything it
cannot read (an unknown event, a payload without the fields it looks at) still gets a job, where the
router decides as before. A feature that starts handling a new event or action must add it here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bot.app import commands
from bot.app.github.models import is_bot_login

COMMENT_EVENTS = frozenset({"issue_comment", "pull_request_review_comment"})
# pull_request actions a feature handles: `closed` ends held pushes and automatic reviews; the others
# may start or supersede an automatic review (reviews/trigger.py), or clear an ignore label.
REVIEW_ACTIONS = ("opened", "reopened", "ready_for_review", "synchronize", "labeled", "unlabeled")
PULL_REQUEST_ACTIONS = frozenset({"closed", *REVIEW_ACTIONS})


def can_lead_to_work(event: str, data: Mapping[str, Any]) -> bool:
    """False only when no handler could act on this delivery; True when it might, or when unsure."""
    if event in COMMENT_EVENTS:
        return _comment_may_command(data)
    if event == "pull_request_review_thread":  # a resolved thread dismisses a finding (issue 21)
        action = data.get("action")
        return not isinstance(action, str) or action == "resolved"
    if event == "pull_request":
        action = data.get("action")
        return not isinstance(action, str) or action in PULL_REQUEST_ACTIONS
    return True  # installation events and anything else: as before, the router decides


def _comment_may_command(data: Mapping[str, Any]) -> bool:
    action = data.get("action")
    if isinstance(action, str) and action != "created":
        return False  # edits and deletions never trigger (routing.decide)
    comment = data.get("comment")
    if not isinstance(comment, Mapping):
        return True
    if _is_bot(comment.get("user")) or _is_bot(data.get("sender")):
        return False  # the bot never answers a bot, itself included
    body = comment.get("body")
    if not isinstance(body, str):
        return True
    if comment.get("in_reply_to_id") is not None:
        return True  # a reply in a review thread: the bot answers in threads it started (reviews/threads.py)
    # The substring test keeps the common case (no command) to one scan of the body.
    return "/beam" in body.lower() and commands.parse(body) is not None


def _is_bot(account: object) -> bool:
    if not isinstance(account, Mapping):
        return False
    login = account.get("login")
    return account.get("type") == "Bot" or (isinstance(login, str) and is_bot_login(login))
