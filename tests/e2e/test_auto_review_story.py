"""Issue 10 end to end: automatic reviews on the fake GitHub with real git and `beam-bot serve`.

One pull request lives through opened, a redelivery, two quick pushes, a merge of its base, a
force-push and `closed`; each step asserts what the bot posted (reviews, the one summary comment,
the `beam / review` check runs) and what it did not.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.review_support import CALC, NUMBER, REPO, Story, review_stack
from tests.support.bot_process import wait_for

# Lines of CALC: f{n} is defined on line 3n-2 and returns on line 3n-1.
LINE_F2 = 5  # "    return x - 2" after the first commit
LINE_F4 = 11


@pytest.fixture
def story(tmp_path: Path) -> Iterator[Story]:
    with review_stack(tmp_path) as story:
        story.bot.llm.fallback_text = "Done."
        yield story


def test_opened_gives_one_review_a_summary_and_a_neutral_check_run(story: Story) -> None:
    story.script_review(
        [
            {
                "path": "src/calc.py",
                "line": LINE_F2,
                "body": "This subtracts; f2 should add.",
                "suggestion": "    return x + 2\n",
            },
            {"path": "src/calc.py", "line": 40, "body": "Not a changed line."},
        ]
    )
    story.send("opened")
    summary = story.wait_summary("finding")
    reviews = story.reviews()
    assert len(reviews) == 1
    review = reviews[0]
    assert review.event == "COMMENT" and review.commit_id == story.pull.head_sha
    assert "Automatic review of the whole pull request" in review.body
    assert "model `fake-model` · " in review.body and " output tokens · 1 model call · " in review.body
    [comment] = story.review_comments(review)
    assert comment.path == "src/calc.py" and comment.line == LINE_F2
    # The suggestion is a committable block replacing exactly the commented line.
    assert "```suggestion\n    return x + 2\n```" in comment.body
    assert "<!-- beam-finding:" in comment.body
    # The summary names the range and links the review.
    head, base = story.pull.head_sha[:7], story.pull.base_sha[:7]
    assert f"`{base}..{head}` (full review): [1 finding](" in summary
    assert f"pullrequestreview-{review.id}" in summary
    # The check run went queued -> in_progress -> completed, neutral, and links the review.
    [check] = story.checks()
    assert check.name == "beam / review" and check.head_sha == story.pull.head_sha
    assert check.history == ["queued", "in_progress", "completed"]
    assert check.conclusion == "neutral"
    assert check.output is not None and check.output["title"] == "1 finding"
    assert check.details_url is not None and f"pullrequestreview-{review.id}" in check.details_url

    # Redelivery of the same event (same id: a duplicate; a new id: an already reviewed head).
    requests = len(story.bot.llm.requests)
    story.send("opened")
    story.send("reopened")
    wait_for(story.review_jobs_done, what="the redeliveries to be handled")
    assert len(story.reviews()) == 1 and len(story.checks()) == 1
    assert len(story.bot.llm.requests) == requests
    assert len(story.bot_comments()) == 1


def test_two_quick_pushes_give_one_incremental_review_of_the_latest_head(story: Story) -> None:
    story.script_review([{"path": "src/calc.py", "line": LINE_F2, "body": "f2 subtracts."}])
    story.send("opened")
    story.wait_summary("1 finding")
    first_head = story.pull.head_sha

    story.push({"src/calc.py": CALC.replace("x + 2", "x - 2").replace("x + 4", "x * 4")}, "f4 multiplies")
    middle = story.pull.head_sha
    story.send("synchronize", before=first_head, after=middle)
    story.push(
        {"src/calc.py": CALC.replace("x + 2", "x - 2").replace("x + 4", "x * 4").replace("x + 5", "x ** 5")}
    )
    last = story.pull.head_sha
    # The model repeats its first finding (same line content, same words), comments on a line the
    # new commits did not change, and on one they did.
    story.script_review(
        [
            {"path": "src/calc.py", "line": LINE_F2, "body": "F2 subtracts!"},
            {"path": "src/calc.py", "line": LINE_F4, "body": "f4 now multiplies; intended?"},
        ]
    )
    story.send("synchronize", before=middle, after=last)
    summary = story.wait_summary(f"{first_head[:7]}..{last[:7]}")
    wait_for(story.review_jobs_done, what="the review job to end")
    reviews = story.reviews()
    assert len(reviews) == 2, [r.body for r in reviews]
    second = reviews[1]
    assert second.commit_id == last
    assert f"Automatic review of the commits `{first_head[:7]}..{last[:7]}`" in second.body
    assert [(c.line, c.body.split("\n")[:2]) for c in story.review_comments(second)] == [
        (LINE_F4, ["**minor**", "f4 now multiplies; intended?"])
    ]
    # The prompt told the model which lines changed since the last review.
    prompt = story.bot.llm.requests[-2]["messages"][1]["content"]
    assert f"up to commit {first_head[:12]}" in prompt and "src/calc.py: lines 11" in prompt
    assert f"`{first_head[:7]}..{last[:7]}` (new commits): [1 finding]" in summary
    assert middle[:7] not in summary  # the middle head was never reviewed on its own
    # The middle head's queued check run was superseded; the last one completed with the review.
    checks = story.checks()
    assert [c.head_sha for c in checks] == [first_head, middle, last]
    assert [c.conclusion for c in checks] == ["neutral"] * 3
    assert checks[1].history == ["queued", "completed"] and checks[1].output is not None
    assert checks[1].output["title"] == "Superseded by a newer push"
    assert len(story.bot_comments()) == 1


def test_merge_of_base_gives_no_review_and_force_push_a_full_review(story: Story) -> None:
    story.script_review([{"path": "src/calc.py", "line": LINE_F2, "body": "f2 subtracts."}])
    story.send("opened")
    story.wait_summary("1 finding")
    reviewed = story.pull.head_sha
    requests = len(story.bot.llm.requests)

    story.merge_base({"README.md": "Demo, with more words\n"})
    merged = story.pull.head_sha
    story.send("synchronize", before=reviewed, after=merged)
    summary = story.wait_summary("merged or rebased the base branch")
    assert f"`{reviewed[:7]}..{merged[:7]}`: no review" in summary
    assert len(story.reviews()) == 1 and len(story.bot.llm.requests) == requests

    # A force-push drops the reviewed head: the whole pull request is reviewed again.
    # The model repeats its finding on f2 (same line content, same words): it is not posted again.
    story.push(
        {"src/calc.py": CALC.replace("x + 2", "x - 2").replace("x + 3", "x - 3")}, "Redo", parent=story.main
    )
    forced = story.pull.head_sha
    story.script_review(
        [
            {"path": "src/calc.py", "line": LINE_F2, "body": "F2   subtracts!"},
            {"path": "src/calc.py", "line": 8, "body": "f3 subtracts now."},
        ]
    )
    story.send("synchronize", before=merged, after=forced)
    summary = story.wait_summary(f"..{forced[:7]}` (full review)")
    reviews = story.reviews()
    assert len(reviews) == 2 and "the whole pull request" in reviews[1].body
    assert [c.line for c in story.review_comments(reviews[1])] == [8]
    assert len(story.bot_comments()) == 1


def test_closed_cancels_a_running_review(story: Story) -> None:
    # The model takes a while to answer: the pull request is closed meanwhile.
    story.script_review([{"path": "src/calc.py", "line": LINE_F2, "body": "late"}], delay=4.0)
    story.send("opened")
    wait_for(lambda: story.bot.llm.received or None, what="the model to be asked")
    story.pull.state = "closed"
    story.send("closed")
    summary = story.wait_summary("cancelled")
    assert "the pull request was closed" in summary
    wait_for(story.review_jobs_done, timeout=30, what="the review job to end")
    assert story.reviews() == []
    [check] = story.checks()
    assert check.status == "completed" and check.conclusion == "neutral"
    assert check.output is not None and check.output["title"] == "Cancelled"


def test_no_findings_posts_no_review(story: Story) -> None:
    story.script_review([], body="Nothing to add.")
    story.send("opened")
    head, base = story.pull.head_sha[:7], story.pull.base_sha[:7]
    summary = story.wait_summary("no new findings")
    assert f"no new findings in `{base}..{head}`" in summary
    assert story.reviews() == []
    [check] = story.checks()
    assert check.output is not None and check.output["title"] == "No new findings"
    assert story.pull.number == NUMBER and REPO == "octo/demo"


def test_a_push_stops_a_running_review_which_the_summary_marks_superseded(story: Story) -> None:
    story.script_review([{"path": "src/calc.py", "line": LINE_F2, "body": "stale"}], delay=4.0)
    story.send("opened")
    wait_for(lambda: story.bot.llm.received or None, what="the model to be asked")
    first = story.pull.head_sha
    story.push({"src/calc.py": CALC.replace("x + 2", "x - 2").replace("x + 4", "x * 4")}, "f4 multiplies")
    story.script_review([{"path": "src/calc.py", "line": LINE_F4, "body": "f4 multiplies."}])
    story.send("synchronize", before=first, after=story.pull.head_sha)
    summary = story.wait_summary("1 finding")
    wait_for(story.review_jobs_done, timeout=30, what="the review jobs to end")
    summary = story.summary()
    assert f"..{first[:7]}`: stopped, superseded by a newer push" in summary
    # Nothing of the stopped review was posted; the new head got a full review.
    [review] = story.reviews()
    assert review.commit_id == story.pull.head_sha and "stale" not in review.body
    assert sorted(c.line for c in story.review_comments(review)) == [LINE_F4]
    checks = story.checks()
    assert [c.head_sha for c in checks] == [first, story.pull.head_sha]
    assert checks[0].history == ["queued", "in_progress", "completed"]
    assert checks[0].output is not None and checks[0].output["title"] == "Superseded by a newer push"
    assert all(c.conclusion == "neutral" for c in checks)
