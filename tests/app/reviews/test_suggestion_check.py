"""Checked suggestions (issue 21): a suggestion is offered only when the file at the head still parses
with it applied (Python with `ast`, JavaScript, TypeScript and Go with tree-sitter), and, with the
linters on, when ruff finds no new syntax error; otherwise it is plain code with the reason."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from bot.app.reviews.diffmap import DiffMap
from bot.app.reviews.review_tool import CheckedSuggestions, ReviewChangeTool
from bot.app.reviews.suggestion_check import breaks_parse, parser_for
from bot.app.runs.host_tools import ToolReport
from bot.beam.sandbox import SandboxRoot
from bot.beam.types import AgentInput

CASES = [
    ("a.py", "def f(x):\n    return x + 1\n", "def f(x):\n    return x - 1\n", "def f(x):\n    return x +\n"),
    (
        "a.js",
        "function f(x) { return x + 1; }\n",
        "function f(x) { return x - 1; }\n",
        "function f(x) { return x + ; }\n",
    ),
    (
        "a.ts",
        "const f = (x: number): number => x + 1;\n",
        "const f = (x: number) => x - 1;\n",
        "const f = (x: number => x;\n",
    ),
    (
        "a.tsx",
        "const A = () => <div>{1}</div>;\n",
        "const A = () => <span>{1}</span>;\n",
        "const A = () => (<div>{1}</div>;\n",
    ),
    (
        "a.go",
        "package a\n\nfunc F(x int) int { return x + 1 }\n",
        "package a\n\nfunc F(x int) int { return x - 1 }\n",
        "package a\n\nfunc F(x int) int { return x + }\n",
    ),
]


@pytest.mark.parametrize(("path", "before", "good", "bad"), CASES, ids=[c[0] for c in CASES])
def test_a_change_that_breaks_the_parse_is_caught(path: str, before: str, good: str, bad: str) -> None:
    assert parser_for(path) is not None
    assert not breaks_parse(path, before, good)
    assert breaks_parse(path, before, bad)
    assert not breaks_parse(path, bad, bad)  # already broken at the head: not the suggestion's doing


def test_languages_without_a_parser_are_not_checked() -> None:
    assert parser_for("a.rb") is None
    assert not breaks_parse("a.rb", "x = 1\n", "x = (\n")


SOURCE = "def add(a, b):\n    total = a - b\n    return total\n"
PATCH = "@@ -1,3 +1,3 @@\n def add(a, b):\n-    total = a + b\n+    total = a - b\n     return total"
INPUT = AgentInput(content=[], session_id=uuid.uuid4(), run_id=uuid.uuid4())


async def suggest(tmp_path: Path, suggestion: str, checked: CheckedSuggestions, start: int = 2) -> str:
    name = "calc.py"
    (tmp_path / name).write_text(SOURCE)
    posted: list[list[dict[str, Any]]] = []

    async def post(body: str, comments: list[dict[str, Any]]) -> int | None:
        posted.append(comments)
        return 1

    diff = DiffMap.from_files([(name, PATCH)])
    tool = ReviewChangeTool(diff, ToolReport(), post, SandboxRoot(tmp_path), checked=checked)
    item = {"path": name, "start_line": start, "line": 2, "body": "Adds.", "suggestion": suggestion}
    await tool.invoke({"body": "R", "comments": [item]}, INPUT)
    [[comment]] = posted
    return str(comment["body"])


@pytest.mark.anyio
async def test_review_change_offers_only_suggestions_that_parse(tmp_path: Path) -> None:
    on = CheckedSuggestions(ruff=True)
    assert "```suggestion\n    total = a + b\n```" in await suggest(tmp_path, "    total = a + b\n", on)
    body = await suggest(tmp_path, "    total = (a + b\n", on)
    assert "Suggested code (not offered as a suggestion: it would not parse):" in body
    assert "```suggestion" not in body
    # Unchecked (the check turned off), the same block is offered.
    assert "```suggestion" in await suggest(tmp_path, "    total = (a + b\n", CheckedSuggestions(parse=False))


@pytest.mark.anyio
async def test_ruff_refuses_what_ast_accepts_but_python_would_not_compile(tmp_path: Path) -> None:
    # `ast.parse` accepts a duplicate parameter (the compiler's symbol table refuses it); ruff reports
    # it as a syntax error, so with the linters on the suggestion is not offered.
    fix = "def add(a, a):\n    total = a + a\n"
    body = await suggest(tmp_path, fix, CheckedSuggestions(ruff=True), start=1)
    assert "not offered as a suggestion: ruff finds a syntax error in the file with it applied" in body
    assert "```suggestion" in await suggest(tmp_path, fix, CheckedSuggestions(ruff=False), start=1)
