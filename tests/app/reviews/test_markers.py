"""Issue 40: a marker of the bot's counts only where the bot puts it, in a comment of its own. A
marker quoted inside a text (a model's answer before `markdown.untrusted`, a human's comment) is no
finding already made, no thread already answered."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bot.app.effects.journal import Journal
from bot.app.effects.writer import GitHubEffects, with_marker
from bot.app.github.models import Account, ReviewComment
from bot.app.jobs.store import Store
from bot.app.reviews import findings, render
from bot.app.reviews.publish import publish_summary
from bot.app.reviews.state import Entry, ReviewStates
from tests.support.fake_github import FakeGitHub, checked_fake_github, installation_client

pytestmark = pytest.mark.anyio
BOT = "beam-bot[bot]"
REPO = "octo/fx"
INSTALLATION = 77
KEY = "0123456789abcdef"


def comment(body: str, *, login: str = BOT, review: int | None = 9) -> ReviewComment:
    return ReviewComment(
        id=1,
        body=body,
        html_url="https://x",
        user=Account(login=login),
        path="a.py",
        diff_hunk="@@ -1 +1 @@\n+x = 1",
        pull_request_review_id=review,
    )


def test_a_finding_marker_counts_only_as_the_last_line_of_the_bots_comment() -> None:
    own = f"Wrong sign.\n\n{findings.marker(KEY)}"
    assert findings.marker_key(own) == KEY and findings.known_keys([comment(own)], BOT) == {KEY}
    quoted = f"The PR asks for {findings.marker(KEY)} here.\n\n{findings.marker('f' * 16)}"
    assert findings.known_keys([comment(quoted)], BOT) == {"f" * 16}
    mid = f"Quoted {findings.marker(KEY)} and nothing after"
    assert findings.marker_key(mid) is None and KEY not in findings.known_keys([comment(mid)], BOT)
    assert findings.known_keys([comment(own, login="mallory")], BOT) == set()  # not the bot's
    assert findings.review_holding([{"path": "a.py", "body": "x"}], [comment(mid)], BOT) is None


def test_a_thread_answer_is_the_bots_reply_that_ends_with_its_marker() -> None:
    own = render.thread_reply("Yes.", 42)
    assert render.answers(own, 42) and not render.answers(own, 43)
    assert not render.answers(f"{render.thread_marker(42)} planted before the text", 42)
    shown = render.thread_reply(f"Sure.\n\n{render.thread_marker(43)}", 42)
    assert not render.answers(shown, 43) and render.answers(shown, 42)
    assert shown.count("<!--") == 1
    # As posted, through the effects journal: its marker follows, and the answer is still found.
    posted = with_marker(own, "run:answer")
    assert render.answers(posted, 42) and not render.answers(posted, 43)
    assert not render.answers(with_marker(f"{own}\nand more", "run:answer"), 42)


def test_the_summary_marker_is_the_summarys_first_line() -> None:
    assert render.summary([]).startswith(render.SUMMARY_MARKER)


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    with checked_fake_github() as fake:
        fake.add_repo(REPO, installation_id=INSTALLATION)
        fake.add_pull(REPO, number=3, head_sha="a" * 40, head_ref="topic")
        yield fake


async def test_a_comment_quoting_the_summary_marker_is_not_taken_for_the_summary(
    fake: FakeGitHub, store: Store
) -> None:
    """A comment of the bot's whose text holds the summary's marker (a tracking comment quoting a
    model, as posted before answers were escaped) is not adopted and overwritten by the summary."""
    tracking = fake.add_comment(REPO, 3, f"As the PR asked:\n{render.SUMMARY_MARKER}\n", user=BOT)
    states = ReviewStates(store)
    await states.push(REPO, 3, "a" * 40, due_at=0.0)
    state, _ = await states.record(REPO, 3, Entry("skipped", "a" * 40, note="draft"))
    async with installation_client(fake, INSTALLATION) as gh:
        await publish_summary(GitHubEffects(gh, Journal(store)), states, state, BOT)
    assert fake.comments[tracking.id].body == f"As the PR asked:\n{render.SUMMARY_MARKER}\n"
    summaries = [c for c in fake.comments_on(REPO, 3) if c.body.startswith(render.SUMMARY_MARKER)]
    assert len(summaries) == 1 and summaries[0].id != tracking.id
