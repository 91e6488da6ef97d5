"""Issue 32, end to end: commands posted while no `serve` answers, recovered once the bot is back.

The fake GitHub delivers each command to the hook URL itself (tests/support/fake_github_hooks.py),
so a delivery that finds no server is recorded as failed, as GitHub records it; the bot's sweep
finds it in `GET /app/hook/deliveries` and asks for it again.
"""

from __future__ import annotations

from collections.abc import Callable

from tests.e2e.crash_support import BOT
from tests.support.bot_process import SECRET, BotProcess, comment_payload, wait_for
from tests.support.fake_github import FakeGitHub
from tests.support.webhooks import Delivery, delivery, issue_comment_payload

HELP = "Here is what I can do"
RECOVERED = "beam-bot was unavailable when this command was posted"
INTERVAL = 2.0  # BEAM_REDELIVERY_INTERVAL in these tests


def post_command(bot: BotProcess, repo: str, number: int, body: str) -> Delivery:
    """A maintainer's command on the fake GitHub, delivered by the fake to its hook URL (which
    may answer nothing)."""
    comment = bot.fake.add_comment(repo, number, body, user="maintainer")
    payload = issue_comment_payload(
        body, repo=repo, number=number, commenter="maintainer", comment_id=comment.id
    )
    payload["repository"]["default_branch"] = "main"
    sent = delivery("issue_comment", comment_payload(bot, payload, repo), SECRET)
    bot.fake.hooks.deliver(sent)
    return sent


def answers(fake: FakeGitHub, repo: str, number: int, text: str) -> int:
    return sum(1 for c in fake.comments_on(repo, number) if c.user == BOT and text in c.body)


def sweeps(fake: FakeGitHub) -> int:
    return len(fake.calls_to("apps/list-webhook-deliveries"))


def recovered_once(
    fake: FakeGitHub, repo: str, number: int, sent: list[Delivery], wait: Callable[..., object] = wait_for
) -> None:
    """Every command in `sent` answered exactly once, after the line that says it was recovered,
    asked for in the first two sweeps; and a later sweep, and GitHub sending one again, change nothing."""
    count = len(sent)
    wait(lambda: answers(fake, repo, number, HELP) >= count, timeout=60, what=f"{count} answers")
    wait(lambda: answers(fake, repo, number, RECOVERED) >= count, timeout=30, what=f"{count} recovered lines")
    # Within two sweep intervals: every redelivery was asked for by the first two sweeps.
    asked = fake.calls_to("apps/redeliver-webhook-delivery")
    assert len(asked) == count, [c.path for c in asked]
    assert len(set(fake.hooks.redelivery_requests)) == count  # never twice for one delivery
    last_ask = max(fake.calls.index(c) for c in asked)
    listings_before = [c for c in fake.calls[:last_ask] if c.operation_id == "apps/list-webhook-deliveries"]
    assert 1 <= len(listings_before) <= 2, len(listings_before)
    for one in sent:
        attempts = fake.hooks.of(one.delivery_id)
        assert [a.status_code for a in attempts] == [0, 202], attempts
    # GitHub delivers one of them again (a person clicks "Redeliver"): the bot says duplicate.
    again = fake.hooks.deliver(sent[0])
    assert again.status_code == 202
    done = sweeps(fake)
    wait(lambda: sweeps(fake) >= done + 2, timeout=30, what="two more sweeps")
    assert len(fake.calls_to("apps/redeliver-webhook-delivery")) == count
    assert answers(fake, repo, number, HELP) == count
    assert answers(fake, repo, number, RECOVERED) == count
