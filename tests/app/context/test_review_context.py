"""Focused passes in the plan of a review's calls (issue 30): calls of about `FOCUS_TOKENS` while the
change is small, grown to fit `max_calls` before anything is left out, a file's hunks split across
calls only when it is larger than one, a shuffled order per pass; and the sources read from a real
checkout, never through a symlink out of it."""

from __future__ import annotations

import difflib
import os
from pathlib import Path

import pytest

from bot.app.context.budget import estimate_tokens
from bot.app.context.linters import LintFinding, LintReport
from bot.app.context.review_context import (
    FOCUS_TOKENS,
    MAX_SOURCE_BYTES,
    DiffPlan,
    ReviewContext,
    left_out_lines,
    plan_diff,
    review_context,
)
from bot.app.github.models import PullFile
from bot.app.limits.policy import Limits
from bot.app.repo_config.review_rules import ReviewRules
from bot.beam.jail import SandboxRoot


def module(functions: int, lines: int, prefix: str = "f") -> str:
    """A Python module of `functions` functions of `lines` lines each."""
    return "\n\n".join(
        f"def {prefix}_{i}(x):\n"
        + "".join(f"    x = x + {i * 1000 + n}  # step {n} of {prefix}_{i}\n" for n in range(lines))
        + "    return x\n"
        for i in range(functions)
    )


def changed_module(path: str, functions: int, lines: int, prefix: str = "f") -> tuple[PullFile, str]:
    """A file whose every function has its middle line changed, and its head's text."""
    before = module(functions, lines, prefix)
    after = before
    for i in range(functions):
        step = f"# step {lines // 2} of {prefix}_{i}\n"
        after = after.replace(step, step.replace("# step", "# (changed) step"))
    diff = list(difflib.unified_diff(before.splitlines(True), after.splitlines(True), n=3))[2:]
    item = PullFile(
        filename=path, status="modified", additions=functions, deletions=functions, patch="".join(diff)
    )
    return item, after


def headers(plan: DiffPlan) -> list[str]:
    """The block headers of every call, in the order the calls show them."""
    return [
        row
        for chunk in plan.chunks
        for line in chunk.lines
        for row in line.split("\n")
        if row.startswith("@@")
    ]


def tokens(plan: DiffPlan) -> list[int]:
    return [estimate_tokens("\n".join(chunk.lines)) for chunk in plan.chunks]


def focused(files: list[tuple[PullFile, str]], **budget: int) -> tuple[list[PullFile], ReviewContext]:
    context = ReviewContext(sources={item.filename: text for item, text in files}, **budget)
    return [item for item, _ in files], context


def test_a_small_change_is_one_call_of_whole_definitions() -> None:
    files, context = focused([changed_module("src/a.py", 1, 12)])
    plan = plan_diff(files, context, overhead=300)
    assert plan.shape == "whole" and len(plan.chunks) == 1 and plan.left_out == []
    assert headers(plan) == ["@@ -5 +5 @@ in function `f_0` (lines 1-14; the diff: 5-11)"]
    assert tokens(plan)[0] < FOCUS_TOKENS


def test_files_over_the_focus_size_go_one_call_each_group_never_split() -> None:
    files, context = focused([changed_module(f"src/m{i}.py", 1, 60, f"m{i}") for i in range(4)])
    plan = plan_diff(files, context, overhead=300)
    assert plan.shape == "per file" and len(plan.chunks) == 2 and plan.left_out == []
    names = [name for chunk in plan.chunks for name in chunk.files]
    assert sorted(names) == [f"src/m{i}.py" for i in range(4)]  # each file in exactly one call
    assert all(size <= FOCUS_TOKENS + 200 for size in tokens(plan))
    # Unfocused, the same files are one call: the budget's room, not the focus size, decides.
    unfocused = plan_diff(files, ReviewContext(), overhead=300)
    assert unfocused.shape == "whole" and len(unfocused.chunks) == 1


def test_one_big_file_has_its_definitions_split_across_calls() -> None:
    item, text = changed_module("src/big.py", 6, 60)
    lint = LintReport(
        [
            LintFinding("ruff", "src/big.py", 31, "F841", "x"),
            LintFinding("ruff", "src/big.py", 350, "E1", "y"),
        ]
    )
    context = ReviewContext(sources={"src/big.py": text}, lint=lint)
    plan = plan_diff([item], context, overhead=300)
    assert plan.shape == "per hunk" and len(plan.chunks) == 3 and plan.left_out == []
    assert all(chunk.files == ["src/big.py"] for chunk in plan.chunks)
    shown = headers(plan)
    assert len(shown) == 6 and sorted(shown) == sorted(set(shown))  # every definition once
    assert [f"f_{i}`" in " ".join(shown) for i in range(6)] == [True] * 6
    texts = ["\n".join(chunk.lines) for chunk in plan.chunks]
    assert all("of this file's hunks; another call of this review shows the rest" in t for t in texts)
    assert left_out_lines(plan, 1) == ["This is part 2 of 3 of the review; other parts read: src/big.py"]
    # A linter finding goes with the call that shows its line, and with no other.
    assert [("F841" in t, "E1" in t) for t in texts] == [(True, False), (False, False), (False, True)]


def test_a_change_over_the_calls_of_focus_size_grows_the_calls_instead_of_leaving_files_out() -> None:
    files, context = focused([changed_module(f"src/m{i:02}.py", 1, 60, f"m{i}") for i in range(12)])
    assert context.max_calls == 3
    plan = plan_diff(files, context, overhead=300)
    assert plan.left_out == [] and plan.budget.cut == [] and len(plan.chunks) == 3
    assert sorted(name for chunk in plan.chunks for name in chunk.files) == [
        f"src/m{i:02}.py" for i in range(12)
    ]
    assert max(tokens(plan)) > FOCUS_TOKENS  # grown past the focus size, within the budget
    assert max(tokens(plan)) < context.tokens_per_call


def test_a_change_over_the_whole_budget_still_names_what_no_call_shows() -> None:
    files, context = focused(
        [changed_module(f"src/m{i:02}.py", 1, 60, f"m{i}") for i in range(12)],
        tokens_per_call=6000,
        max_calls=2,
    )
    plan = plan_diff(files, context, overhead=300)
    assert len(plan.chunks) == 2 and plan.left_out
    assert all(why == "over the token budget" for _, why in plan.left_out)
    shown = {name for chunk in plan.chunks for name in chunk.files}
    assert shown.isdisjoint(name for name, _ in plan.left_out) and len(shown) + len(plan.left_out) == 12


@pytest.mark.parametrize(
    "files",
    [
        [changed_module("src/big.py", 6, 60)],
        [changed_module(f"src/m{i}.py", 2, 30, f"m{i}") for i in range(5)],
    ],
    ids=["one file", "several files"],
)
def test_an_order_shows_the_same_hunks_in_another_order_the_same_each_time(
    files: list[tuple[PullFile, str]],
) -> None:
    items, context = focused(files)
    first = plan_diff(items, context, overhead=300)
    shuffled = [
        plan_diff(items, ReviewContext(sources=context.sources, order=n), overhead=300) for n in (1, 2)
    ]
    for plan in shuffled:
        assert sorted(headers(plan)) == sorted(headers(first)) and headers(plan) != headers(first)
        assert plan.left_out == []
    assert headers(shuffled[0]) != headers(shuffled[1])
    again = plan_diff(items, ReviewContext(sources=context.sources, order=1), overhead=300)
    assert [c.lines for c in again.chunks] == [c.lines for c in shuffled[0].chunks]


def test_unfocused_an_order_shuffles_the_bare_hunks() -> None:
    items = [changed_module(f"src/m{i}.py", 3, 12, f"m{i}")[0] for i in range(4)]
    plain = plan_diff(items, ReviewContext(), overhead=300)
    shuffled = plan_diff(items, ReviewContext(order=3), overhead=300)
    assert all(" in function " not in h for h in headers(plain))
    assert sorted(headers(shuffled)) == sorted(headers(plain)) and headers(shuffled) != headers(plain)


@pytest.mark.anyio
async def test_review_context_reads_the_changed_files_of_a_real_checkout(tmp_path: Path) -> None:
    checkout = tmp_path / "checkout"
    (checkout / "src").mkdir(parents=True)
    (tmp_path / "secret.py").write_text("TOKEN = 'outside the checkout'\n")
    a, a_text = changed_module("src/a.py", 1, 12)
    (checkout / "src/a.py").write_text(a_text)
    os.symlink(tmp_path / "secret.py", checkout / "src/link.py")
    (checkout / "src/big.py").write_text("x = 1\n" * (MAX_SOURCE_BYTES // 6 + 10))
    (checkout / "src/latin.py").write_bytes(b"# caf\xe9\nx = 1\n")
    (checkout / "README.md").write_text("# readme\n")
    (checkout / "src/gone.py").write_text("left in the tree\n")
    files = [
        a,
        *(
            PullFile(filename=f"src/{n}.py", status="modified", patch="@@ -1 +1 @@\n-x\n+y")
            for n in ("link", "big", "latin")
        ),
        PullFile(filename="README.md", status="modified", patch="@@ -1 +1 @@\n-# old\n+# readme"),
        PullFile(filename="src/gone.py", status="removed"),
        PullFile(filename="src/missing.py", status="modified", patch="@@ -1 +1 @@\n-x\n+y"),
    ]
    root = SandboxRoot(checkout)
    context = await review_context(root, files, ReviewRules(focus=True), Limits(), lint=False, order=4)
    assert context.sources == {"src/a.py": a_text} and context.order == 4
    plan = plan_diff(files, context, overhead=300)
    assert "in function `f_0`" in "\n".join(plan.chunks[0].lines)
    assert "outside the checkout" not in "\n".join(line for chunk in plan.chunks for line in chunk.lines)
    off = await review_context(root, files, ReviewRules(focus=False), Limits(), lint=False)
    assert off.sources is None
    forced = await review_context(root, files, ReviewRules(focus=False), Limits(), lint=False, focus=True)
    assert forced.sources == {"src/a.py": a_text}
