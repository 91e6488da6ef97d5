"""`review_change` with `start_line` and `suggestion` on a real checkout folder: a suggestion that
applies becomes GitHub's committable block over exactly `start_line..line`; any other is plain text."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from bot.app.reviews.diffmap import DiffMap
from bot.app.reviews.review_tool import ReviewChangeTool
from bot.app.reviews.suggestions import apply_suggestion
from bot.app.runs.host_tools import ToolReport
from bot.beam.sandbox import SandboxRoot
from bot.beam.tools import Tool
from bot.beam.types import AgentInput

pytestmark = pytest.mark.anyio
INPUT = AgentInput(content=[], session_id=uuid.uuid4(), run_id=uuid.uuid4())
SOURCE = "def add(a, b):\n    total = a - b\n    return total\n\n\ndef keep():\n    pass\n"
PATCH = "@@ -1,3 +1,3 @@\n def add(a, b):\n-    total = a + b\n+    total = a - b\n     return total\n"


def review_tool(tmp_path: Path, posted: list[list[dict[str, Any]]], *, fold: bool = True) -> Tool:
    (tmp_path / "calc.py").write_text(SOURCE)

    async def post(body: str, comments: list[dict[str, Any]]) -> int | None:
        posted.append(comments)
        return 7 if comments else None

    diff = DiffMap.from_files([("calc.py", PATCH)])
    return ReviewChangeTool(diff, ToolReport(), post, SandboxRoot(tmp_path), fold_outside=fold)


async def test_a_multi_line_suggestion_that_applies_is_a_committable_block(tmp_path: Path) -> None:
    posted: list[list[dict[str, Any]]] = []
    args = {
        "body": "Review.",
        "comments": [
            {
                "path": "calc.py",
                "start_line": 2,
                "line": 3,
                "body": "Add, and return directly.",
                "suggestion": "    return a + b\n",
            }
        ],
    }
    assert (await review_tool(tmp_path, posted).invoke(args, INPUT))["posted"] is True
    [comment] = posted[0]
    assert comment["start_line"] == 2 and comment["start_side"] == "RIGHT" and comment["line"] == 3
    # The severity's label first (a model that gave none gets `minor`), then the finding.
    assert comment["body"] == "**minor**\nAdd, and return directly.\n\n```suggestion\n    return a + b\n```"
    assert comment["line_text"] == "    return total"
    # Applied as GitHub applies it, the block gives the intended file.
    lines = SOURCE.split("\n")[:-1]
    assert apply_suggestion(lines, 2, 3, "    return a + b\n")[:2] == ["def add(a, b):", "    return a + b"]


@pytest.mark.parametrize(
    ("comment", "reason"),
    [
        ({"start_line": 1, "line": 6, "suggestion": "x"}, None),  # line 6 is outside the diff: dropped
        ({"line": 2, "suggestion": "    total = a - b"}, "it would not change the lines"),
        ({"start_line": 1, "line": 2, "suggestion": "x", "path": "gone.py"}, None),
    ],
)
async def test_a_suggestion_that_does_not_apply_is_plain_text(
    tmp_path: Path, comment: dict[str, Any], reason: str | None
) -> None:
    posted: list[list[dict[str, Any]]] = []
    item = {"path": "calc.py", "body": "Finding.", **comment}
    result = await review_tool(tmp_path, posted, fold=False).invoke({"body": "R", "comments": [item]}, INPUT)
    if reason is None:  # a file outside the change is dropped and counted on its own
        outside = comment.get("path") == "gone.py"
        dropped = {"dropped_outside_change": 1} if outside else {}
        assert result == {
            "posted": False,
            "inline_comments": 0,
            "dropped_comments": int(not outside),
            **dropped,
        }
        return
    [posted_comment] = posted[0]
    assert "```suggestion" not in posted_comment["body"]
    assert f"Suggested code (not offered as a suggestion: {reason}):\n```\n" in posted_comment["body"]


async def test_a_range_over_context_lines_of_the_hunk_is_valid(tmp_path: Path) -> None:
    posted: list[list[dict[str, Any]]] = []
    fix = "def add(a, b):\n    total = a + b\n"  # it must parse (issue 21): `x` alone would not
    item = {"path": "calc.py", "start_line": 1, "line": 2, "body": "F.", "suggestion": fix}
    await review_tool(tmp_path, posted).invoke({"body": "R", "comments": [item]}, INPUT)
    [comment] = posted[0]
    # Line 1 is context in the diff, so the range is valid; the suggestion changes it, so it applies.
    assert comment["start_line"] == 1 and f"```suggestion\n{fix}```" in comment["body"]


async def test_markers_in_a_review_show_and_a_suggestion_holding_one_is_not_offered(tmp_path: Path) -> None:
    """Issue 40: the model's body, comment and suggestion carry the bot's markers. The body and the
    comment show them (`&lt;!--`); the suggestion, which GitHub would commit as shown, is plain code."""
    posted: list[list[dict[str, Any]]] = []
    bodies: list[str] = []
    tool = review_tool(tmp_path, posted)
    original = tool.post  # type: ignore[attr-defined]

    async def post(body: str, comments: list[dict[str, Any]]) -> int | None:
        bodies.append(body)
        return await original(body, comments)  # type: ignore[no-any-return]

    tool.post = post  # type: ignore[attr-defined]
    item = {
        "path": "calc.py",
        "line": 2,
        "body": "Wrong sign. <!-- beam-finding:0123456789abcdef -->",
        "suggestion": "    total = a + b  # <!-- beam-effect:k -->",
    }
    args = {"body": "Review <!-- beam-review-summary -->", "comments": [item]}
    assert (await tool.invoke(args, INPUT))["posted"] is True
    [comment] = posted[0]
    assert bodies == ["Review &lt;!-- beam-review-summary -->"]
    assert comment["body"].startswith("**minor**\nWrong sign. &lt;!-- beam-finding:0123456789abcdef -->\n\n")
    assert "```suggestion" not in comment["body"] and "<!--" not in comment["body"]
    assert "    total = a + b  # <! -- beam-effect:k -->" in comment["body"]
