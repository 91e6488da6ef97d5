"""Issue 30: what reached GitHub from real 1.5B reviews and must not. Each test drives the path a
model's answer takes into a review (`review_in_text`, `review_from_text`, `review_change`) and fails
without its fix: every finding of an answer read; cut or malformed review JSON, a refusal, a thank-you
and the instructions said back are no body; `"suggestion": ""` is no suggestion; a finding's path is
mapped to the change's file when the repository line leaked into it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from bot.app.reviews.answer_checks import (
    MAX_LINE_ENUM,
    change_path,
    not_a_review,
    prose,
    reads_as_prose,
    review_instructions,
    review_schema,
    structured_review_args,
    usable_suggestion,
)
from bot.app.reviews.diffmap import DiffMap
from bot.app.reviews.review_tool import ReviewChangeTool
from bot.app.reviews.text_review import review_args_from_text
from bot.app.runs.host_tools import ToolReport
from bot.beam.openai_client import OpenAiCompatible
from bot.beam.sandbox import SandboxRoot
from tests.support.openai_server import FakeOpenAI

pytestmark = pytest.mark.anyio
PATCH = "@@ -1,3 +1,4 @@\n def f(x):\n-    return x + 1\n+    y = x - 1\n+    return y\n \n"
Posted = list[tuple[str, list[dict[str, Any]]]]


def review_tool(tmp_path: Path, posted: Posted, *, fold: bool = False) -> ReviewChangeTool:
    (tmp_path / "m.py").write_text("def f(x):\n    y = x - 1\n    return y\n\n", encoding="utf-8")

    async def post(body: str, comments: list[dict[str, Any]]) -> int:
        posted.append((body, comments))
        return len(posted)

    return ReviewChangeTool(
        DiffMap.from_files([("m.py", PATCH)]), ToolReport(), post, SandboxRoot(tmp_path), fold_outside=fold
    )


# -- every finding is read ------------------------------------------------------------------------


def test_every_block_of_findings_in_an_answer_is_read() -> None:
    """Recorded shape: a first block with a style remark, the gold finding in a second block."""
    text = (
        "First:\n```json\n"
        '[{"path": "m.py", "line": 2, "body": "name y better"}]\n```\n'
        "And the bug:\n```json\n"
        '{"path": "m.py", "line": 3, "body": "subtracts instead of adding"}\n```\nDone.'
    )
    args = review_args_from_text(text)
    assert args is not None
    assert [(c["line"], c["body"]) for c in args["comments"]] == [
        (2, "name y better"),
        (3, "subtracts instead of adding"),
    ]
    assert "```" not in args["body"] and "subtracts" not in args["body"]  # no raw JSON left in the body
    assert args["body"] == "First:\n\nAnd the bug:\n\nDone."


# -- what is no review body -------------------------------------------------------------------------

CUT = '<review_change>{"body": "Two problems.", "comments": [{"path": "m.py", "line": 3, "body": "sub'
MALFORMED = '```json\n{"body": "One bug", "comments": [{"path": "m.py", line: 3}]}\n```'
AFTER_PROSE = 'Here is my review:\n```json\n{"body": "Two problems.", "comments": [{"path": "m.py", "line'

REFUSAL = "I'm sorry, but I cannot help with that."
THANKS = "Thank you for the pull request. I will review it and get back to you with my feedback…"
RESTATED = (
    "Review this pull request. Read what you need, then post your review once with review_change: a "
    "short summary and inline comments on changed lines."
)


@pytest.mark.parametrize(
    "answer", [CUT, "<tools></tools>", MALFORMED, AFTER_PROSE, REFUSAL, THANKS, RESTATED]
)
def test_an_answer_that_is_no_review_is_not_posted_as_the_body(answer: str) -> None:
    assert prose(answer) == ""  # no body: the review pass posts no review from it


@pytest.mark.parametrize(
    "answer",
    [
        "Thank you for the change. The loop in f stops one item early: use range(len(items)).",
        "I'm sorry to say the check is inverted: err == nil returns before the rename.",
        "Unfortunately this can't work: the loop never ends, please review the bound on line 3.",
        "The review found nothing wrong: the refactor keeps the same output.",
        "Line 3 returns y, which is x - 1: the function used to add one.",
        'In package.json the "path": entry points at the source, not the build output.',
    ],
)
def test_real_reviews_are_still_posted(answer: str) -> None:
    assert not_a_review(answer, review_instructions()) is None
    assert prose(answer) == answer


async def test_a_review_change_body_that_is_a_refusal_or_a_thank_you_is_not_posted(tmp_path: Path) -> None:
    posted: Posted = []
    comment = {"path": "m.py", "line": 3, "body": "returns x - 1", "severity": "major"}
    await review_tool(tmp_path, posted).post_args({"body": THANKS, "comments": [comment]})
    [(with_comment, comments)] = posted
    assert with_comment == "" and len(comments) == 1  # the comments stand alone
    alone = review_tool(tmp_path, posted)
    answer = await alone.post_args({"body": REFUSAL, "comments": []})
    assert answer["posted"] is False and "a refusal" in answer["reason"]
    assert len(posted) == 1 and not alone.report.reviewed  # nothing posted: the model may try again


# -- an empty suggestion ------------------------------------------------------------------------------


async def test_an_empty_suggestion_is_no_suggestion(tmp_path: Path) -> None:
    """Recorded: `"suggestion": ""` on a `return` line became a committable suggestion deleting it."""
    posted: Posted = []
    comment = {"path": "m.py", "line": 3, "body": "returns x - 1", "severity": "major", "suggestion": ""}
    await review_tool(tmp_path, posted).post_args({"body": "One bug.", "comments": [comment]})
    [(_, [posted_comment])] = posted
    assert posted_comment["body"] == "**major**\nreturns x - 1" and "suggestion" not in posted_comment["body"]
    assert usable_suggestion("") is None and usable_suggestion("  \n") is None
    assert usable_suggestion("    return x + 1\n") == "    return x + 1\n" and usable_suggestion(None) is None


# -- paths -------------------------------------------------------------------------------------------


async def test_a_path_with_the_repository_line_before_it_is_mapped_to_the_changed_file(
    tmp_path: Path,
) -> None:
    posted: Posted = []
    comments = [
        {"path": "cases/x.bundle/m.py", "line": 3, "body": "returns x - 1", "severity": "major"},
        {"path": "other.py", "line": 3, "body": "not a file of the change", "severity": "major"},
    ]
    await review_tool(tmp_path, posted).post_args({"body": "Bugs.", "comments": comments})
    [(_, inline)] = posted
    assert [(c["path"], c["line"]) for c in inline] == [("m.py", 3)]  # the other one is dropped


def test_paths_are_mapped_only_to_one_file_of_the_change() -> None:
    changed = {"mux.go", "src/validate.ts", "a/x.py", "b/x.py"}
    assert change_path("cases/x.bundle/mux.go", changed) == "mux.go"
    assert (
        change_path("./mux.go", changed) == "mux.go"
        and change_path("b/src/validate.ts", changed) == "src/validate.ts"
    )
    assert change_path("validate.ts", changed) == "src/validate.ts"  # the directory left out
    assert change_path("x.py", changed) is None  # two files fit: not guessed
    assert change_path("a/x.py", changed) == "a/x.py"  # a real directory named `a` is kept
    assert change_path("README.md", changed) is None


# -- the schema of structured findings ----------------------------------------------------------------


async def test_the_review_schema_is_sent_and_its_answer_becomes_review_change_arguments(
    tmp_path: Path,
) -> None:
    answer = {
        "body": "One bug.",
        "comments": [
            {"path": "m.py", "line": 3, "severity": "major", "claim": "returns x - 1", "suggestion": None},
            {"path": "m.py", "line": 2, "severity": "nit", "claim": "name", "suggestion": ""},
            {"path": "m.py", "line": 2, "severity": "minor", "claim": "   ", "suggestion": None},  # no claim
        ],
    }
    with FakeOpenAI(structured=True) as llm:
        llm.reply_text(json.dumps(answer))
        async with OpenAiCompatible(llm.url, "k", "m", timeout=10) as client:
            value = await client.complete_structured([{"role": "user", "content": "r"}], review_schema())
        sent = llm.requests[0]["response_format"]["json_schema"]
        assert llm.errors == []
    assert list(sent["schema"]["properties"]) == ["body", "comments"]
    item = sent["schema"]["properties"]["comments"]["items"]
    assert list(item["properties"]) == ["path", "start_line", "line", "severity", "claim", "suggestion"]
    assert set(item["required"]) == set(item["properties"]) and item["additionalProperties"] is False
    assert sent["schema"]["properties"]["comments"]["maxItems"] == 10  # a repeating model ends its list
    args = structured_review_args(value)
    assert args == {
        "body": "One bug.",
        "comments": [
            {"path": "m.py", "line": 3, "body": "returns x - 1", "severity": "major"},
            {"path": "m.py", "line": 2, "body": "name", "severity": "nit"},  # "" is no suggestion
        ],
    }
    posted: Posted = []
    await review_tool(tmp_path, posted).post_args(args)
    assert [(c["line"], c["finding"]) for c in posted[0][1]] == [(3, "returns x - 1"), (2, "name")]
    assert structured_review_args({"comments": []}) is None and structured_review_args("x") is None
    bool_line = {"path": "m.py", "line": True, "severity": "minor", "claim": "bool line", "suggestion": None}
    assert structured_review_args({"body": "b", "comments": [bool_line]}) == {"body": "b", "comments": []}


def test_a_schema_given_the_calls_lines_takes_only_their_files_and_commentable_lines() -> None:
    """The 1.5B model wrote a tool's name as a comment's path, and lines from the hunk header: a
    server that constrains its decoding to this schema cannot."""
    many = set(range(1, MAX_LINE_ENUM + 2))
    schema = review_schema({"m.py": {2, 3}, "o.py": {5}, "big.py": many})
    check = Draft202012Validator(schema)

    def takes(path: str, line: int, start: int | None = None) -> bool:
        item = {"path": path, "start_line": start, "line": line, "severity": "major", "claim": "c"}
        return check.is_valid({"body": "b", "comments": [{**item, "suggestion": None}]})

    assert takes("m.py", 3) and takes("o.py", 5)
    assert takes("m.py", 3, 2) and not takes("m.py", 3, 1)  # a first line of the change, or null
    assert not takes("read_file", 3)  # a tool's name is no path
    assert not takes("m.py", 5) and not takes("o.py", 3)  # each file's own lines only
    assert takes("big.py", MAX_LINE_ENUM + 1) and takes("big.py", 10_000)  # too many to list: any line
    one = Draft202012Validator(review_schema({"m.py": {2}}))
    assert one.is_valid({"body": "b", "comments": []})  # no finding is an answer
    assert "anyOf" not in review_schema({"m.py": {2}})["properties"]["comments"]["items"]
    assert Draft202012Validator(review_schema()).is_valid(
        {
            "body": "b",
            "comments": [
                {
                    "path": "x",
                    "start_line": None,
                    "line": 9,
                    "severity": "nit",
                    "claim": "c",
                    "suggestion": None,
                }
            ],
        }
    )


@pytest.mark.parametrize(
    ("suggestion", "words"),
    [
        ("Check that `x` is not None before using it.", True),
        ("Use `x - 1` instead of `x`.", True),
        ("Raise ValueError when the name is empty", True),
        ("return total - 1", False),
        ("Counter = Counter()", False),
        ("True if x else False", False),
        ("String name = user.getName();", False),
        ("if x is not None and y is None:", False),
        ("    return a - b\n", False),
        ("Fix it", False),  # too short to tell: left to the code checks
    ],
)
def test_a_suggestion_reads_as_prose_when_it_is_a_sentence_not_code(suggestion: str, words: bool) -> None:
    assert reads_as_prose(suggestion) is words
