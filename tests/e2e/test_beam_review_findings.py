"""Issue 21, item 5, for `/beam review`: its findings go into the same ledger as an automatic review's,
end to end on the fake GitHub with real git and `beam-bot serve`. A finding dismissed (a 👎, a
resolved thread) is not posted again by the next `/beam review` after a push that edits its line; a
fixed one is answered ("Fixed in `abc1234`.") and its thread resolved; the run's answer counts the
open, fixed and dismissed findings. No automatic reviews here: the config does not turn them on."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.review_support import BOT, CALC, NUMBER, REPO, Story, review_stack
from tests.e2e.test_review_findings import LINE_F2, LINE_F4, finding, resolved_payload
from tests.support.bot_process import SECRET, comment_payload, wait_for
from tests.support.fake_github_state import Comment, Review
from tests.support.openai_server import usage
from tests.support.webhooks import delivery, issue_comment_payload


@pytest.fixture
def story(tmp_path: Path) -> Iterator[Story]:
    with review_stack(tmp_path, "version: 1\n") as story:
        story.bot.llm.fallback_text = "Done."
        yield story


def ledger(story: Story) -> list[tuple[int, str, str | None]]:
    with sqlite3.connect(story.bot.work_dir / "beam.db") as db:
        return list(db.execute("SELECT line, state, reason FROM review_findings ORDER BY id"))


def runs_done(story: Story) -> bool:
    with sqlite3.connect(story.bot.work_dir / "beam.db") as db:
        states = [r[0] for r in db.execute("SELECT status FROM runs")]
    return bool(states) and all(s in ("succeeded", "failed", "cancelled", "interrupted") for s in states)


def beam_review(story: Story, comments: list[dict[str, Any]]) -> tuple[Review, str]:
    """A maintainer's `/beam review`, the model scripted to report `comments`: the review it posted
    and the run's final tracking comment."""
    story.script_review(comments)
    return send_beam_review(story)


def send_beam_review(story: Story) -> tuple[Review, str]:
    """`/beam review` from a maintainer, the model already scripted: the review and the final comment."""
    before = len(story.reviews())
    body = "/beam review"
    comment = story.bot.fake.add_comment(REPO, NUMBER, body, user="maintainer")
    payload = issue_comment_payload(
        body, repo=REPO, number=NUMBER, commenter="maintainer", comment_id=comment.id
    )
    story.bot.send(delivery("issue_comment", comment_payload(story.bot, payload, REPO), SECRET))
    wait_for(lambda: len(story.reviews()) > before and runs_done(story), timeout=40, what="the review")
    return story.reviews()[-1], story.bot_comments()[-1].body  # the newest run's tracking comment


def first_finding(story: Story, body: str) -> Comment:
    review, answer = beam_review(story, [finding(LINE_F2, body)])
    [comment] = story.review_comments(review)
    assert ledger(story) == [(LINE_F2, "open", None)]
    assert "Findings: 1 open, 0 fixed, 0 dismissed." in answer
    return comment


def test_a_thumbs_down_keeps_a_finding_out_of_the_next_beam_review(story: Story) -> None:
    root = first_finding(story, "f2 returns `x - 2`; it should add.")
    story.bot.fake.add_reaction(root.id, "reader", "-1")  # may not dismiss: ignored
    story.bot.fake.add_reaction(root.id, "maintainer", "-1")
    # The author edits the anchored line; the model repeats itself with the new value, and finds more.
    story.push({"src/calc.py": CALC.replace("x + 2", "x - 3").replace("x + 4", "x * 4")}, "f2 subtracts 3")
    review, answer = beam_review(
        story, [finding(LINE_F2, "F2 returns `x - 3`: it should add!"), finding(LINE_F4, "f4 multiplies.")]
    )
    assert [c.line for c in story.review_comments(review)] == [LINE_F4]
    assert ledger(story) == [(LINE_F2, "dismissed", "reaction"), (LINE_F4, "open", None)]
    assert "Findings: 1 open, 0 fixed, 1 dismissed." in answer
    # The model was told, as data, what was dismissed.
    prompt = [r["messages"][1]["content"] for r in story.bot.llm.requests][-2]
    assert "src/calc.py line 5: f2 returns `x - 2`; it should add." in prompt[prompt.index("untrusted") :]


def test_a_resolved_thread_keeps_a_finding_out_of_the_next_beam_review(story: Story) -> None:
    root = first_finding(story, "f2 subtracts 2 instead of adding.")
    payload = resolved_payload(story, root, "maintainer")
    assert story.bot.send(delivery("pull_request_review_thread", payload, SECRET)).status_code == 202
    wait_for(lambda: ledger(story)[0][1] == "dismissed", what="the dismissal")
    # A force-push that adds a line above f2 and edits f2's line: the model says it again, lower.
    text = "# calc\n" + CALC.replace("x + 2", "x - 20")
    story.push({"src/calc.py": text}, "rewritten", parent=story.main)
    review, answer = beam_review(story, [finding(LINE_F2 + 1, "f2 subtracts 20 instead of adding")])
    assert story.review_comments(review) == []
    assert ledger(story) == [(LINE_F2, "dismissed", "resolved")]
    assert "Findings: 0 open, 0 fixed, 1 dismissed." in answer


def test_a_fixed_finding_is_answered_and_its_thread_resolved(story: Story) -> None:
    root = first_finding(story, "f2 subtracts.")
    fixed = story.push({"src/calc.py": CALC.replace("x + 4", "x * 4")}, "fix f2")
    _, answer = beam_review(story, [finding(LINE_F4, "f4 multiplies.")])
    [reply] = [c for c in story.bot.fake.comments.values() if c.in_reply_to == root.id]
    assert reply.user == BOT and reply.body.startswith(f"Fixed in `{fixed[:7]}`.")
    assert story.bot.fake.resolved_threads == {root.id}  # GraphQL resolveReviewThread
    assert ledger(story) == [(LINE_F2, "fixed", fixed), (LINE_F4, "open", None)]
    assert "Findings: 1 open, 1 fixed, 0 dismissed." in answer
    # The next `/beam review`, with nothing changed, fixes nothing more and answers nothing twice.
    _, answer = beam_review(story, [finding(LINE_F4, "f4 multiplies.")])
    assert len([c for c in story.bot.fake.comments.values() if c.in_reply_to == root.id]) == 1
    assert "Findings: 2 open, 1 fixed, 0 dismissed." in answer


def test_a_review_answered_as_structured_output_records_what_it_used(tmp_path: Path) -> None:
    """On a server that answers to a schema, the review and (with `review.verify: true`) the check
    of its finding are two structured calls and no tool loop runs. The run's row took its usage and
    model from the tool loop's result, so such a review was recorded as having used nothing; verified,
    the row must also add up both calls."""
    with review_stack(tmp_path, "version: 1\nreview:\n  verify: true\n", structured=True) as story:
        story.bot.llm.fallback_text = "Done."
        _structured_review_records_its_usage(story)


def _structured_review_records_its_usage(story: Story) -> None:
    llm = story.bot.llm
    claim = {
        "path": "src/calc.py",
        "line": LINE_F2,
        "severity": "major",
        "claim": "f2 subtracts; it should add.",
    }
    llm.reply_text(json.dumps({"body": "One bug.", "comments": [claim]}), usage=usage(900, 60))
    llm.reply_text(json.dumps({"real": True, "line": LINE_F2, "evidence": "x - 2"}), usage=usage(300, 20))
    review, answer = send_beam_review(story)
    assert [(c.line, "it should add" in c.body) for c in story.review_comments(review)] == [(LINE_F2, True)]
    assert "model `fake-model` · 1,200 input / 80 output tokens · 2 model calls" in review.body
    assert "Findings: 1 open, 0 fixed, 0 dismissed." in answer
    with sqlite3.connect(story.bot.work_dir / "beam.db") as db:
        [(used, model)] = list(db.execute("SELECT usage, model_used FROM runs"))
    assert json.loads(used) == {"prompt_tokens": 1200, "completion_tokens": 80, "total_tokens": 1280}
    assert model == "fake-model"
    assert [bool(r.get("response_format")) for r in llm.requests] == [True, True]
