"""Numbered hunks (issue 21): a table of real patches, made by git as GitHub makes its `patch` field
(the diff from the first `@@`), and what the model is shown for each."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from bot.app.context.diff_context import (
    MAX_REMOVED_SHOWN,
    OVERFLOW_CODE,
    DiffCut,
    added_lines,
    cut_diff,
    format_file,
    overflow_retry,
    parse_hunks,
)
from bot.app.github.models import PullFile
from bot.app.reviews.diffmap import commentable_lines
from bot.beam.errors import BeamError

CALC = "".join(f"def f{n}(x):\n    return x + {n}\n\n" for n in range(1, 7))


def git_patch(tmp_path: Path, before: str | None, after: str | None, name: str = "calc.py") -> str:
    """`git diff` of one file between two commits, from its first hunk: GitHub's `patch`."""
    repo = tmp_path / "repo"
    repo.mkdir(exist_ok=True)

    def git(*args: str) -> str:
        env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t"}
        env |= {"GIT_COMMITTER_EMAIL": "t@e", "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
        done = subprocess.run(
            ["git", "-C", str(repo), *args], capture_output=True, text=True, env=env, check=True
        )
        return done.stdout

    git("init", "-q")
    for text in (before, after):
        if text is None:
            (repo / name).unlink(missing_ok=True)
        else:
            (repo / name).write_text(text)
        git("add", "-A")
        git("commit", "-q", "--allow-empty", "-m", "c")
    out = git("diff", "HEAD~1", "HEAD", "--", name)
    return out[out.index("@@") :].rstrip("\n")


CASES = [
    (
        "one changed line",
        CALC,
        CALC.replace("x + 2", "x - 2"),
        "## calc.py (modified, +1 -1)\n@@ -2 +2 @@ def f1(x):\n"
        "2      return x + 1\n3  \n4  def f2(x):\n  -    return x + 2\n5 +    return x - 2\n"
        "6  \n7  def f3(x):\n8      return x + 3",
    ),
    (
        "a deletion-only hunk shows what it removed, in its place",
        CALC,
        CALC.replace("def f3(x):\n    return x + 3\n\n", ""),
        "## calc.py (modified, +0 -3)\n@@ -4 +4 @@ def f1(x):\n"
        "4  def f2(x):\n5      return x + 2\n6  \n  -def f3(x):\n  -    return x + 3\n  -\n"
        "7  def f4(x):\n8      return x + 4\n9  ",
    ),
    (
        "an added file is numbered from 1",
        None,
        "a = 1\nb = 2\n",
        "## calc.py (added, +2 -0)\n@@ -0 +1 @@\n1 +a = 1\n2 +b = 2",
    ),
    (
        "no newline at end of file is not a line",
        "a = 1",
        "a = 2",
        "## calc.py (modified, +1 -1)\n@@ -1 +1 @@\n  -a = 1\n1 +a = 2",
    ),
]


@pytest.mark.parametrize(("name", "before", "after", "shown"), CASES, ids=[c[0] for c in CASES])
def test_real_patches_are_numbered_on_the_new_side(
    tmp_path: Path, name: str, before: str | None, after: str, shown: str
) -> None:
    patch = git_patch(tmp_path, before, after)
    status = "added" if before is None else "modified"
    adds = sum(1 for line in patch.splitlines() if line.startswith("+"))
    dels = sum(1 for line in patch.splitlines() if line.startswith("-"))
    item = PullFile(filename="calc.py", status=status, additions=adds, deletions=dels, patch=patch)
    assert format_file(item) == shown


def test_the_numbers_shown_are_the_lines_github_takes_comments_on(tmp_path: Path) -> None:
    after = CALC.replace("x + 2", "x - 2").replace("def f5(x):\n", "def f5(x):\n    x = abs(x)\n")
    after = after.replace("def f6(x):\n    return x + 6\n\n", "") + "def g():\n    pass\n"
    patch = git_patch(tmp_path, CALC, after)
    text = format_file(PullFile(filename="calc.py", status="modified", patch=patch))
    shown = {int(m.group(1)) for m in re.finditer(r"^(\d+) [+ ]", text, re.MULTILINE)}
    assert shown == commentable_lines(patch)  # every number can carry a comment, and no other line
    assert added_lines(patch) == {n for h in parse_hunks(patch) for n in h.added}
    assert {5, 14} <= added_lines(patch)
    # The added lines read back from the file at the head under the numbers shown.
    lines = after.split("\n")
    for number, mark, code in (h for hunk in parse_hunks(patch) for h in hunk.new):
        assert lines[number - 1] == code, (number, mark)


def test_each_removed_line_is_shown_where_it_was(tmp_path: Path) -> None:
    """Read top to bottom without the added lines, the rows are the old side of each hunk: the
    1.5B model took a list of removed lines after the hunk for the new code (issue 30)."""
    after = CALC.replace("x + 2", "x - 2").replace("    return x + 4\n", "")
    after = after.replace("def f5(x):\n", "def f5(x):\n    x = abs(x)\n")
    patch = git_patch(tmp_path, CALC, after)
    rows = format_file(PullFile(filename="calc.py", status="modified", patch=patch)).split("\n")[1:]
    marked = [re.match(r"^ *\d* ([ +-])(.*)$", row) for row in rows if not row.startswith("@@")]
    old_side = [m.group(2) for m in marked if m is not None and m.group(1) != "+"]
    assert any(m is not None and m.group(1) == "-" for m in marked)
    old = CALC.split("\n")
    hunks = parse_hunks(patch)
    assert len(hunks) == 1
    start = hunks[0].old_start
    assert old_side == old[start - 1 : start - 1 + len(old_side)]


def test_a_long_removed_run_is_shown_in_part_and_counted(tmp_path: Path) -> None:
    before = "".join(f"x{n} = {n}\n" for n in range(100))
    patch = git_patch(tmp_path, before, "x0 = 0\n")
    text = format_file(PullFile(filename="calc.py", status="modified", patch=patch))
    removed = [row for row in text.split("\n") if row.lstrip().startswith("-")]
    assert removed[0].endswith("-x1 = 1") and len(removed) == MAX_REMOVED_SHOWN
    assert text.endswith(f"... ({99 - MAX_REMOVED_SHOWN} more lines removed)")
    assert "1  x0 = 0" in text  # the line left takes a comment


def test_a_file_without_a_patch_is_named_not_guessed() -> None:
    shown = format_file(PullFile(filename="logo.png", status="added"))
    assert (
        shown == "## logo.png (added, +0 -0)\n(no patch: binary or too large; read the file if you need it)"
    )
    for patch in ("", None):  # GitHub sends no patch for a pure rename
        moved = format_file(
            PullFile(filename="b.py", status="renamed", previous_filename="a.py", patch=patch)
        )
        assert moved == "## b.py (renamed, from a.py, +0 -0)\n(no line changed)"


# -- the context-overflow retry, written once for every skill (issue 41) ---------------------------


@dataclass
class Built:
    """What a skill built for its calls: the prompt of each, and the files each reads."""

    calls: list[str]
    call_files: list[list[str]]


def _big(name: str, hunks: int) -> PullFile:
    patch = "".join(
        f"@@ -{10 * n + 1},1 +{10 * n + 1},1 @@\n-old {n}\n+new {n} {'x' * 200}\n" for n in range(hunks)
    )
    return PullFile(filename=name, status="modified", additions=hunks, deletions=hunks, patch=patch)


class Overflowing:
    """A model whose context the first `overflows` calls overflow; it records every prompt."""

    def __init__(self, overflows: int) -> None:
        self.overflows = overflows
        self.prompts: list[str] = []

    async def __call__(self, built: Built, cut: DiffCut | None) -> str:
        self.prompts.append(built.calls[0])
        if len(self.prompts) <= self.overflows:
            raise BeamError(OVERFLOW_CODE, "maximum context length is 4096 tokens")
        return f"answered{' after the cut' if cut is not None else ''}"


def _builder(seen: list[tuple[list[str], bool]]) -> Callable[[list[PullFile], bool], Awaitable[Built]]:
    async def build(files: list[PullFile], one_call: bool) -> Built:
        seen.append(([f.filename for f in files], one_call))
        text = "\n".join(format_file(f) for f in files)
        return Built([text], [[f.filename for f in files]])

    return build


@pytest.mark.anyio
async def test_an_overflow_before_anything_ran_is_retried_once_with_half_the_diff_named() -> None:
    files = [_big("a.py", 8), _big("b.py", 8)]
    seen: list[tuple[list[str], bool]] = []
    cuts: list[DiffCut] = []
    model = Overflowing(overflows=1)

    answer = await overflow_retry(files, _builder(seen), model, ran=lambda: False, on_overflow=cuts.append)

    assert answer == "answered after the cut"
    assert [one_call for _, one_call in seen] == [False, True]  # the retry is one call
    [cut] = cuts
    assert cut.kept <= cut.sent // 2
    first, retry = model.prompts
    assert retry.startswith(cut.named()) and len(retry) < len(first)


@pytest.mark.anyio
async def test_an_overflow_after_a_tool_ran_or_a_second_one_ends_with_bem_092() -> None:
    files = [_big("a.py", 8)]
    with pytest.raises(BeamError) as ran:
        await overflow_retry(files, _builder([]), Overflowing(overflows=1), ran=lambda: True)
    assert ran.value.code == OVERFLOW_CODE
    twice = Overflowing(overflows=2)
    with pytest.raises(BeamError) as again:
        await overflow_retry(files, _builder([]), twice, ran=lambda: False)
    assert again.value.code == OVERFLOW_CODE and len(twice.prompts) == 2  # retried once, not more


@pytest.mark.anyio
async def test_an_earlier_cut_goes_straight_to_the_cut_diff() -> None:
    files = [_big("a.py", 8)]
    cut = cut_diff(files, ["a.py"])
    seen: list[tuple[list[str], bool]] = []
    model = Overflowing(overflows=0)
    assert (
        await overflow_retry(files, _builder(seen), model, ran=lambda: False, cut=cut)
        == "answered after the cut"
    )
    assert [one_call for _, one_call in seen] == [True] and model.prompts[0].startswith(cut.named())
