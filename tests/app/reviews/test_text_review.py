"""Findings a model wrote into its answer as JSON instead of calling `review_change`: read, and posted
through the tool with its checks (a line outside the diff is dropped or folded)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bot.app.reviews.diffmap import DiffMap
from bot.app.reviews.review_tool import ReviewChangeTool, review_in_text
from bot.app.reviews.text_review import review_args_from_text
from bot.app.runs.host_tools import ToolReport
from bot.beam.sandbox import SandboxRoot

pytestmark = pytest.mark.anyio
PATCH = "@@ -1,3 +1,3 @@\n def f(x):\n-    return x + 1\n+    return x - 1\n \n"


def test_the_arguments_without_the_call_fenced_after_prose() -> None:
    text = (
        "Here is my review.\n```json\n"
        '{"body": "One bug.", "comments": [{"path": "m.py", "line": 2, "body": "subtracts", '
        '"severity": "Major"}]}\n```'
    )
    assert review_args_from_text(text) == {
        "body": "One bug.",
        "comments": [{"path": "m.py", "line": 2, "body": "subtracts", "severity": "major"}],
    }


def test_a_bare_list_of_findings_with_other_key_names() -> None:
    text = 'Found this: [{"file": "./m.py", "line_number": "2", "issue": "wrong sign"}] - fix it.'
    assert review_args_from_text(text) == {
        "body": "Found this:  - fix it.",
        "comments": [{"path": "m.py", "line": 2, "body": "wrong sign"}],
    }


def test_a_wrapped_list_a_range_and_a_named_call_without_a_usable_name() -> None:
    assert review_args_from_text(
        '{"findings": [{"path": "a.go", "lines": [3, 5], "claim": "off by one"}]}'
    ) == {
        "body": "",
        "comments": [{"path": "a.go", "line": 5, "body": "off by one"}],
    }
    comment = {"path": "a", "line": 1, "body": "c"}
    text = json.dumps({"name": "post_review", "arguments": {"body": "b", "comments": [comment]}})
    assert review_args_from_text(text) == {"body": "b", "comments": [{"path": "a", "line": 1, "body": "c"}]}


@pytest.mark.parametrize(
    "text",
    [
        "The change subtracts on line 2 of m.py instead of adding.",  # prose: stays the body
        '```python\n{"path": "m.py", "line": 2, "body": "x"}\n```',  # code, not an answer
        '[{"path": "m.py", "body": "no line"}]',
        '{"path": "m.py", "line": 0, "body": "line zero"}',
        "[1, 2, 3]",
        "",
    ],
)
def test_text_without_usable_findings_is_not_a_review(text: str) -> None:
    assert review_args_from_text(text) is None


def test_a_body_with_no_comments_is_a_review_without_comments() -> None:
    assert review_args_from_text('{"body": "Looks fine.", "comments": []}') == {
        "body": "Looks fine.",
        "comments": [],
    }


def tool(tmp_path: Path, posted: list[tuple[str, list[dict[str, Any]]]], fold: bool) -> ReviewChangeTool:
    (tmp_path / "m.py").write_text("def f(x):\n    return x - 1\n\n", encoding="utf-8")

    async def post(body: str, comments: list[dict[str, Any]]) -> int:
        posted.append((body, comments))
        return 1

    diff = DiffMap.from_files([("m.py", PATCH)])
    return ReviewChangeTool(diff, ToolReport(), post, SandboxRoot(tmp_path), fold_outside=fold)


async def test_findings_in_the_text_go_through_the_tool_and_its_line_checks(tmp_path: Path) -> None:
    posted: list[tuple[str, list[dict[str, Any]]]] = []
    review = tool(tmp_path, posted, fold=False)
    answer = '[{"path": "m.py", "line": 2, "body": "subtracts"}, {"path": "m.py", "line": 40, "body": "far"}]'
    assert await review_in_text([review], answer) is not None
    [(_, comments)] = posted
    assert [(c["line"], c["finding"], c["severity"]) for c in comments] == [(2, "subtracts", "minor")]
    assert comments[0]["line_text"] == "    return x - 1"
    assert await review_in_text([review], answer) is None  # posted once: the run's one review


async def test_json_findings_off_the_diff_are_folded_and_prose_is_left_to_the_body(tmp_path: Path) -> None:
    posted: list[tuple[str, list[dict[str, Any]]]] = []
    review = tool(tmp_path, posted, fold=True)  # `/beam review` folds a comment off the diff
    args = await review_in_text([review], 'Done. [{"path": "m.py", "line": 9, "body": "far"}]')
    assert args == {"body": "Done.", "comments": [{"path": "m.py", "line": 9, "body": "far"}]}
    assert posted[-1][1] == [] and "`m.py` line 9: far" in posted[-1][0]
    other = tool(tmp_path, posted, fold=True)
    assert await review_in_text([other], "Line 2 subtracts.") is None
    assert not other.report.reviewed  # the pass posts the prose as the body (reviews/review_pass.py)


def test_an_answer_that_is_only_json_or_an_echo_is_no_review() -> None:
    """Recorded from the real 0.5B (`beam-bot run review`): its last answer echoed its tool result.
    Such an answer is no review: the pass ends "not reviewed" (issue 29), never "No comments."."""
    from bot.app.reviews.answer_checks import prose

    assert prose('{"paths":["stats.py"]}\n') == ""
    assert prose("The loop skips the first item.") == "The loop skips the first item."
    # Its answer in other runs (2026-12-01): the runner's request for prose, repeated.
    assert prose("No tool call, no JSON and no tags.") == ""
    assert (
        prose("No JSON here: the loop stops one item early.")
        == "No JSON here: the loop stops one item early."
    )
