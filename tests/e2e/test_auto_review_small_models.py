"""Issue 21, the benchmark's lesson, end to end with `beam-bot serve`: an automatic review with a
model that behaves as small self-hosted ones do still posts what it found. A guessed path that does
not exist goes back to the model instead of ending the review, and findings the model wrote as JSON
in its answer (never calling `review_change`) are posted inline, under the tool's checks."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.review_support import Story, review_stack, tool_results
from tests.e2e.test_review_findings import LINE_F2, reviewed


@pytest.fixture
def story(tmp_path: Path) -> Iterator[Story]:
    with review_stack(tmp_path) as story:
        story.bot.llm.fallback_text = "Done."
        yield story


def test_a_guessed_path_goes_back_to_the_model(story: Story) -> None:
    story.bot.llm.reply_tool_calls(("read_file", {"path": "demo/src/calc.py"}))  # the repository's name
    story.script_review(
        [{"path": "src/calc.py", "line": LINE_F2, "body": "f2 subtracts.", "severity": "major"}]
    )
    story.send("opened")
    reviewed(story, 1)
    assert [c.line for c in story.review_comments(story.reviews()[0])] == [LINE_F2]
    errors = [json.dumps(r) for r in tool_results(story.bot) if isinstance(r, dict) and "error" in r]
    assert errors and all("BEM-30" in e for e in errors)  # told to the model as the tool's result


def test_findings_written_as_json_in_the_answer_are_posted(story: Story) -> None:
    findings = [
        {"file": "src/calc.py", "line": LINE_F2, "issue": "f2 subtracts instead of adding."},
        {"file": "src/calc.py", "line": 28, "issue": "not a changed line: dropped"},
    ]
    story.bot.llm.reply_text(f"Here is what I found:\n```json\n{json.dumps(findings)}\n```")
    story.send("opened")
    reviewed(story, 1)
    review = story.reviews()[0]
    [comment] = story.review_comments(review)
    # The severity's label (none named: `minor`), then the finding.
    assert (comment.line, comment.body.split("\n")[:2]) == (
        LINE_F2,
        ["**minor**", "f2 subtracts instead of adding."],
    )
    assert "```json" not in review.body
    story.wait_summary("Findings: 1 open, 0 fixed, 0 dismissed.")
