"""An automatic review an earlier attempt finished but did not see posted (drafts.py
`finish_kept_review`): the next attempt posts the kept draft through its door, or finds that GitHub
made it after all and posts nothing; either way the draft is done with, and the model is not asked."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bot.app.effects.journal import Journal
from bot.app.github.models import Account, ReviewComment
from bot.app.jobs.signals import Reschedule
from bot.app.jobs.store import Store
from bot.app.limits.policy import Limits
from bot.app.reviews.drafts import FrameLines, KeptReview, finish_kept_review, keep_body, note_posted
from bot.app.reviews.findings import fresh_findings
from bot.app.runs.render import Usage
from bot.beam.completion import Completion, PendingToolCall
from bot.beam.results import TokenUsage
from tests.app.reviews.test_auto_review_limits import REPO as REPO_LIMITS
from tests.app.reviews.test_auto_review_limits import rigged
from tests.support.db import FakeClock, db_url_fixture, pg_database_url_fixture, store_fixture  # noqa: F401
from tests.support.fake_github_state import PullFile

pytestmark = pytest.mark.anyio

BOT = "beam-bot[bot]"
FINDING = {
    "path": "src/calc.py",
    "line": 5,
    "side": "RIGHT",
    "body": "f2 subtracts 2 where its callers add it.",
    "finding": "f2 subtracts 2 where its callers add it.",
    "line_text": "    return x - 2",
}


# What the attempt that finished the draft framed it with: a file no call read, its calls' usage.
LINES = FrameLines(["poetry.lock (lock file)"], [], Usage("qwen", 5100, 30, 2, 1, 41.5))


class Door:
    """A door that records what it was given and notes the draft posted, as the writer's does."""

    def __init__(self, journal: Journal, run_id: str) -> None:
        self.journal, self.run_id = journal, run_id
        self.posted: list[KeptReview] = []

    async def __call__(self, kept: KeptReview) -> int:
        self.posted.append(kept)
        await note_posted(self.journal, self.run_id, 77)
        return 77


def on_github(review_id: int, login: str) -> ReviewComment:
    """The finding as a posted inline comment of `login`, its marker on its last line."""
    [marked] = fresh_findings([dict(FINDING)], None, set())
    return ReviewComment(
        id=5,
        body=marked["body"],
        html_url="https://github.com/octo/demo/pull/7#discussion_r5",
        user=Account(login=login, id=1, type="Bot"),
        pull_request_review_id=review_id,
        path="src/calc.py",
        line=5,
    )


async def test_a_kept_draft_is_posted_once_through_the_door(store: Store) -> None:
    journal = Journal(store)
    door = Door(journal, "run-1")
    assert await finish_kept_review(journal, "run-1", [], BOT, door) is None  # nothing was kept

    await keep_body(journal, "run-1", "Two problems in calc.", [FINDING], LINES)
    # A comment of someone else's holding the same finding is not the bot's review.
    kept = await finish_kept_review(journal, "run-1", [on_github(41, "someone")], BOT, door)

    # The door is given the lines the finished attempt framed the draft with, read back whole.
    assert kept == KeptReview("Two problems in calc.", [FINDING], LINES, None)
    assert door.posted == [kept]
    assert await finish_kept_review(journal, "run-1", [], BOT, door) is None  # posted: done with


async def test_a_draft_github_made_after_all_is_noted_and_not_posted_again(store: Store) -> None:
    journal = Journal(store)
    door = Door(journal, "run-2")
    await keep_body(journal, "run-2", "Two problems in calc.", [FINDING], LINES)

    kept = await finish_kept_review(journal, "run-2", [on_github(41, BOT)], BOT, door)

    assert kept is not None and kept.made == (41, 1) and kept.comments == [FINDING]
    assert kept.lines == LINES
    assert door.posted == []
    entry = await journal.lookup("run-2:review-draft")
    assert entry is not None and entry.result == {"posted": 41}
    assert await finish_kept_review(journal, "run-2", [], BOT, door) is None


# -- through the automatic review's job: the recovered draft says what the review covered -----------


def _module(name: str, count: int = 20) -> str:
    return "".join(f"def {name}{n}(x):\n    return x + {n}\n\n" for n in range(count))


def _added(text: str) -> str:
    lines = text.splitlines()
    return f"@@ -0,0 +1,{len(lines)} @@\n" + "".join(f"+{line}\n" for line in lines)


# Two modules, each under one call's budget, together over it (two calls), and a lock file no call
# reads: a review capped after its first call is partial, and its body names what it left out.
KEPT_FILES = {
    "poetry.lock": "[[package]]\nname = 'x'\n",
    "src/alpha.py": _module("alpha"),
    "src/beta.py": _module("beta"),
}
KEPT_LIMITS = Limits(review_tokens_per_call=2000, max_tokens_per_run=3000)
ALPHA_FINDING = {"path": "src/alpha.py", "line": 2, "body": "alpha0 adds zero: is that meant?"}
SECONDS = re.compile(r"\d+\.\d s")


def tokens(prompt: int, completion: int) -> TokenUsage:
    return TokenUsage(prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion)


async def test_a_kept_partial_draft_is_posted_with_the_lines_its_review_carried(
    db_url: str, fake_clock: FakeClock, tmp_path: Path
) -> None:
    async with rigged(db_url, fake_clock, tmp_path, KEPT_LIMITS) as rig:
        head = rig.git.commit(REPO_LIMITS, KEPT_FILES, branch="feature")
        rig.git.create_pull_ref(REPO_LIMITS, 7, head)
        pull = rig.fake.pull(REPO_LIMITS, 7)
        pull.head_sha = head
        pull.commits.append(head)
        pull.files = [
            PullFile(name, status="added", additions=len(text.splitlines()), patch=_added(text))
            for name, text in KEPT_FILES.items()
        ]
        # The first call finds one problem; its tokens pass the run's cap, so the second never runs.
        call = PendingToolCall("c1", "review_change", {"body": "One question.", "comments": [ALPHA_FINDING]})
        rig.llm.add(
            Completion.of_tool_calls([call], usage=tokens(2500, 20)),
            Completion.of_text("Reviewed.", usage=tokens(2600, 10)),
        )
        await rig.send("opened")
        job = await rig.queue.claim("worker", 60.0)
        assert job is not None
        # GitHub cannot take the review: the job waits for GitHub, the draft kept in the journal.
        failing = rig.fake.inject("POST", r"/pulls/7/reviews$", status=502, times=None)
        with pytest.raises(Reschedule):
            await rig.job(job)
        [tried] = rig.fake.calls_to("pulls/create-review")
        asked = len(rig.llm.requests)
        failing.times = 0
        rig.clock.advance(60)  # past the time the failed write could still land at GitHub

        await rig.job(job)  # the next attempt posts the kept draft; the model is not asked again

        assert len(rig.llm.requests) == asked
        [review] = rig.fake.reviews_on(REPO_LIMITS, 7)
        said = tried.body["body"]
        assert "**partial:** stopped by" in said and "after 1 of 2 files" in said
        assert "Not reviewed: `poetry.lock (lock file)`" in said
        assert "5,100 input / 30 output tokens · 2 model calls" in said
        # The recovered review says what the first attempt's would have said, word for word (the
        # footer's wall time aside).
        assert SECONDS.sub("", review.body) == SECONDS.sub("", said)
        # The summary says the same as for a partial review posted at once: what was left out, that
        # it is partial, and the head stays unreviewed so the next push reviews these commits again.
        summary = rig.summary()
        assert "not reviewed: `poetry.lock (lock file)`" in summary
        assert "**partial:** stopped by" in summary and "after 1 of 2 files" in summary
        state = await rig.job.states.get(REPO_LIMITS, 7)
        assert state is not None and state.reviewed_head is None
