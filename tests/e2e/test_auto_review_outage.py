"""An automatic review that GitHub fails only by being down waits for GitHub, as a command's run does
(runs/outage.py): its review is posted once when GitHub is back, from the journal, without asking
the model again, and the waits spend none of the job's attempts. Past `BEAM_GITHUB_OUTAGE_WAIT` it
fails, and the summary and the check run say so."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tests.e2e.review_support import NUMBER, REPO, Story, review_stack
from tests.support.bot_process import wait_for

REVIEWS = rf"^/repos/{REPO}/pulls/{NUMBER}/reviews$"
LINE_F2 = 5  # "    return x - 2" on the pull request's head
FINDING = {"path": "src/calc.py", "line": LINE_F2, "body": "This subtracts; f2 should add."}


def review_posts(story: Story) -> int:
    calls = story.bot.fake.calls
    return len([c for c in calls if c.method == "POST" and c.path.endswith(f"/pulls/{NUMBER}/reviews")])


def review_job(story: Story) -> tuple[str, int]:
    """The review job's state and attempts (("", 0) before the debounce made it)."""
    with sqlite3.connect(story.bot.work_dir / "beam.db") as db:
        rows = list(db.execute("SELECT state, attempts FROM jobs WHERE kind = 'auto_review'"))
    assert len(rows) <= 1, rows
    return (str(rows[0][0]), int(rows[0][1])) if rows else ("", 0)


def test_an_automatic_review_refused_with_502s_waits_and_is_posted_once(tmp_path: Path) -> None:
    # Three 502s in a 30 s wait: tries again after 1 s, 2 s, then 4 s, well within it on a busy machine.
    with review_stack(tmp_path, BEAM_GITHUB_OUTAGE_WAIT="30") as story:
        story.bot.llm.fallback_text = "Done."
        story.bot.fake.inject("POST", REVIEWS, status=502, times=3)
        story.script_review([FINDING])
        story.send("opened")
        summary = story.wait_summary("1 finding", timeout=60)
        [review] = story.reviews()
        [comment] = story.review_comments(review)
        assert comment.line == LINE_F2 and "f2 should add" in comment.body
        assert review_posts(story) == 4  # three 502s, then the one that GitHub took
        assert len(story.bot.llm.requests) == 1  # posted from the journal: the model was asked once
        assert f"pullrequestreview-{review.id}" in summary
        assert review_job(story) == ("done", 1)  # the waits spent none of its attempts
        [check] = story.checks()
        assert check.status == "completed" and check.conclusion == "neutral"


def test_an_automatic_review_past_the_outage_wait_fails_and_says_so(tmp_path: Path) -> None:
    with review_stack(tmp_path, BEAM_GITHUB_OUTAGE_WAIT="3") as story:
        story.bot.llm.fallback_text = "Done."
        story.bot.fake.inject("POST", REVIEWS, status=502, times=None)
        story.script_review([FINDING])
        story.send("opened")
        wait_for(lambda: review_job(story)[0] in ("failed", "dead"), timeout=60, what="the job to give up")

        def said_so() -> bool:  # the summary is edited before the check run is completed
            checks = story.checks()
            return "BEM-380" in story.summary() and [c.status for c in checks] == ["completed"]

        wait_for(said_so, timeout=60, what=f"the summary and the check run\n{story.bot.log()[-3000:]}")
        summary = story.summary()
        assert "the review failed (BEM-380: GitHub was down for longer than" in summary, summary
        assert story.reviews() == []
        assert len(story.bot.llm.requests) == 1  # each wait's try posted the kept review, no new call
        [check] = story.checks()
        assert "BEM-380" in str(check.output), check.output


def test_an_automatic_review_whose_post_timed_out_is_not_posted_twice(tmp_path: Path) -> None:
    # Our client gives up after BEAM_GITHUB_TIMEOUT (5 s); GitHub makes the review at 9 s (it ends
    # requests at 10). The next try waits until nothing begun can land (7 s after the client gave
    # up), then finds the finding posted; a try at the backoff's 2 s would post it again.
    with review_stack(tmp_path, BEAM_GITHUB_OUTAGE_WAIT="60") as story:
        story.bot.llm.fallback_text = "Done."
        story.bot.fake.inject("POST", REVIEWS, status=None, delay=9.0, times=1)
        story.script_review([FINDING])
        story.send("opened")
        summary = story.wait_summary("1 finding", timeout=60)
        [review] = story.reviews()
        assert review_posts(story) == 1
        assert len(story.bot.llm.requests) == 1
        assert f"pullrequestreview-{review.id}" in summary  # adopted: its summary line links it
