"""The token budget (issue 21): which files a review reads, in which call, and what it names instead."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.app.context.budget import (
    CHARS_PER_TOKEN,
    Section,
    estimate_tokens,
    linguist,
    ordered,
    parse_gitattributes,
    plan_budget,
    rank_of,
    skip_reason,
)
from bot.app.context.review_context import ReviewContext, UntrustedSection, merge_parts, plan_diff
from bot.app.github.models import PullFile
from bot.app.reviews.votes import distinct

CALIBRATION = Path(__file__).parents[2] / "data" / "token_calibration.json"


def test_the_estimate_never_counts_fewer_tokens_than_the_measured_tokenizer() -> None:
    samples = json.loads(CALIBRATION.read_text())["samples"]
    assert len(samples) >= 4
    for sample in samples:
        assert estimate_tokens("x" * sample["chars"]) >= sample["tokens"], sample["sample"]
        assert sample["chars_per_token"] > CHARS_PER_TOKEN
    assert estimate_tokens("漢字のテキスト") == 7  # about one token a character outside ASCII


ATTRIBUTES = """
# generated clients
gen/** linguist-generated
*.pb.go linguist-generated=true
api/keep.pb.go -linguist-generated
third_party/** linguist-vendored=false
/docs/*.py linguist-documentation
assets/ linguist-vendored
"""


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("gen/client.py", "generated"),
        ("gen/deep/er/client.py", "generated"),
        ("src/gen/client.py", None),  # `gen/**` is anchored: a slash inside the pattern
        ("svc/api.pb.go", "generated"),
        ("api/keep.pb.go", None),  # unset by a later line: the name alone no longer decides
        ("web/app.min.js", "generated"),
        ("proto/msg_pb2.py", "generated"),
        ("vendor/lib/x.go", "vendored"),
        ("third_party/lib/x.c", None),  # the repository says it is its own code
        ("assets/logo.js", None),  # as in git, `dir/` matches no file inside: `dir/**` does
        ("package-lock.json", "lock file"),
        ("rust/Cargo.lock", "lock file"),
        ("go.sum", "lock file"),
        ("src/app.py", None),
    ],
)
def test_lock_generated_and_vendored_files_are_skipped(path: str, reason: str | None) -> None:
    assert skip_reason(path, parse_gitattributes(ATTRIBUTES)) == reason


def test_the_last_gitattributes_line_wins_and_unspecified_is_none() -> None:
    rules = parse_gitattributes("*.js linguist-generated\nsrc/*.js !linguist-generated\n")
    assert linguist("lib/a.js", rules, "linguist-generated") is True
    assert linguist("src/a.js", rules, "linguist-generated") is None
    assert linguist("a.py", rules, "linguist-generated") is None


def test_files_go_source_then_tests_then_other_then_docs() -> None:
    names = ["README.md", "docs/guide.md", "tests/test_app.py", "setup.cfg", "src/app.py", "web/ui.test.ts"]
    rules = parse_gitattributes(ATTRIBUTES)
    assert [rank_of(n, rules) for n in names] == ["docs", "docs", "tests", "other", "source", "tests"]
    assert rank_of("docs/conf.py", rules) == "docs"
    files = [PullFile(filename=n, status="modified") for n in names]
    assert [f.filename for f in ordered(files, rules)] == [
        "src/app.py",
        "tests/test_app.py",
        "web/ui.test.ts",
        "setup.cfg",
        "README.md",
        "docs/guide.md",
    ]


def section(name: str, tokens: int, hunks: int = 1) -> tuple[Section, list[str]]:
    item = PullFile(filename=name, status="modified")
    block = "h" * int(tokens * CHARS_PER_TOKEN / hunks)
    return Section(item, "x", tokens), [f"## {name}", *[block] * hunks]


def test_files_are_packed_first_fit_into_at_most_max_calls() -> None:
    plan = plan_budget(
        [section("a.py", 600), section("b.py", 600), section("c.py", 300), section("d.py", 700)],
        room=1000,
        max_calls=2,
    )
    assert [[s.item.filename for s in chunk] for chunk in plan.chunks] == [["a.py", "c.py"], ["b.py"]]
    assert plan.left_out == [("d.py", "over the token budget")]


def test_a_file_larger_than_a_call_is_read_by_whole_hunks() -> None:
    plan = plan_budget([section("big.py", 5000, hunks=10)], room=1000, max_calls=1)
    [[part]] = plan.chunks
    assert part.cut and part.tokens <= 1000 and plan.cut == ["big.py"]
    heading, *hunks, note = part.text.split("\n")
    assert heading == "## big.py" and len(hunks) == 1  # a hunk is 500 tokens: one fits with the heading
    assert note == "(the rest of this file is not shown)"


def test_deleted_and_skipped_files_are_named_in_every_call() -> None:
    files = [
        PullFile(filename="old.py", status="removed", deletions=40, patch="@@ -1,1 +0,0 @@\n-x"),
        PullFile(filename="yarn.lock", status="modified", patch="@@ -1 +1 @@\n-a\n+b"),
        PullFile(filename="a.py", status="modified", patch="@@ -1 +1 @@\n-a\n+b"),
    ]
    sections = [UntrustedSection("path instructions (from the maintainers)", "src/**: check errors")]
    plan = plan_diff(files, ReviewContext(sections=sections), overhead=100)
    [chunk] = plan.chunks
    assert chunk.files == ["a.py"]
    assert "deleted files (not shown): old.py" in chunk.lines
    assert plan.left_out == [("yarn.lock", "lock file")]
    assert chunk.lines[-2:] == ["path instructions (from the maintainers):", "src/**: check errors"]


def test_merged_calls_say_a_finding_once() -> None:
    one = {"path": "a.py", "line": 3, "body": "Off by one!", "finding": "Off by one!"}
    again = {"path": "a.py", "line": 4, "body": "off by ONE", "finding": "off by ONE"}
    other = {"path": "a.py", "line": 9, "body": "Off by one!", "finding": "Off by one!"}
    body, comments = merge_parts([("Part one.", [one]), ("Part two.", [again, other]), ("Part one.", [])])
    assert body == "Part one.\n\nPart two."
    assert comments == [one, again, other]  # every call's, in order; the pass posts each once:
    assert distinct(comments) == [one, other]
