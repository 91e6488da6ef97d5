"""The host's tools on a real checkout folder: search, get_page, review_change."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

from bot.app.reviews.diffmap import DiffMap
from bot.app.reviews.review_tool import ReviewChangeTool
from bot.app.runs.host_tools import MAX_PAGE_LINES, MAX_SEARCH_MATCHES, ToolReport, host_tools
from bot.beam.commit_tree import CommitTree
from bot.beam.errors import BeamError
from bot.beam.sandbox import SandboxRoot, WorkingTree
from bot.beam.tree_view import FileView
from bot.beam.types import AgentInput

pytestmark = pytest.mark.anyio
INPUT = AgentInput(content=[], session_id=uuid.uuid4(), run_id=uuid.uuid4())


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "tree"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("def handler():\n    return TODO\n# todo: later\n")
    (root / "big.txt").write_text("".join(f"line {n}\n" for n in range(1, 1001)))
    (root / "logo.png").write_bytes(b"\x89PNG\0\0TODO")
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("TODO secret\n")
    outside = tmp_path / "outside.txt"
    outside.write_text("TODO outside\n")
    os.symlink(outside, root / "link.txt")
    return root


@pytest.fixture(params=["disk", "objects"])
def view(request: pytest.FixtureRequest, tree: Path, tmp_path: Path) -> FileView:
    """The tree as a checkout, or as its commit read from the objects of a repository (issue 43)."""
    if request.param == "disk":
        return WorkingTree(SandboxRoot(tree), [])
    repo = tmp_path / "repo"
    shutil.copytree(tree, repo, symlinks=True, ignore=shutil.ignore_patterns(".git"))
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    ident = ["-c", "user.name=t", "-c", "user.email=t@example.com"]
    for args in (["init", "-q"], ["add", "-A"], [*ident, "commit", "-qm", "tree"]):
        subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True, timeout=60)
    return CommitTree(repo, "HEAD")


def tools(
    view: FileView | Path, posted: list[tuple[str, list[dict[str, Any]]]] | None = None
) -> dict[str, Any]:
    root = view if isinstance(view, Path) else Path("/nonexistent")

    async def post(body: str, comments: list[dict[str, Any]]) -> int:
        assert posted is not None
        posted.append((body, comments))
        return 99

    diff = DiffMap.from_files(
        [("src/app.py", "@@ -1,2 +1,3 @@\n def handler():\n-    pass\n+    return TODO\n+# x\n")]
    )
    report = ToolReport()
    files = WorkingTree(SandboxRoot(root), []) if isinstance(view, Path) else view
    found = host_tools(files, report, blob_url=lambda p, a, b: f"https://gh/o/r/blob/sha/{p}#L{a}-L{b}")
    if isinstance(view, Path):
        found.append(ReviewChangeTool(diff, report, post, SandboxRoot(root)))  # the review pass adds it
    return {t.spec().name: t for t in found}


async def test_search_finds_text_case_insensitively_and_skips_git_binaries_and_links(view: FileView) -> None:
    result = await tools(view)["search"].invoke({"query": "todo"}, INPUT)
    assert result == {
        "matches": [
            {"path": "src/app.py", "line": 2, "text": "    return TODO"},
            {"path": "src/app.py", "line": 3, "text": "# todo: later"},
        ],
        "truncated": False,
    }


async def test_search_is_capped_and_jailed(view: FileView) -> None:
    result = await tools(view)["search"].invoke({"query": "line"}, INPUT)
    assert len(result["matches"]) == MAX_SEARCH_MATCHES
    for bad, code in (
        ({"query": "x", "path": "../"}, "BEM-301"),
        ({"query": "x", "path": ".git"}, "BEM-337"),
        ({"query": "  "}, "BEM-108"),
        ({}, "BEM-108"),
    ):
        with pytest.raises(BeamError) as error:
            await tools(view)["search"].invoke(bad, INPUT)
        assert error.value.code == code


async def test_get_page_returns_numbered_lines_and_a_link(view: FileView) -> None:
    page = await tools(view)["get_page"].invoke({"path": "big.txt", "start": 10, "end": 12}, INPUT)
    assert page["text"] == "10: line 10\n11: line 11\n12: line 12"
    assert page["url"] == "https://gh/o/r/blob/sha/big.txt#L10-L12"
    assert page["total_lines"] == 1000 and page["truncated"] is False
    whole = await tools(view)["get_page"].invoke({"path": "big.txt"}, INPUT)
    assert whole["end"] == MAX_PAGE_LINES and whole["truncated"] is True


@pytest.mark.parametrize(
    ("path", "code"),
    [
        ("link.txt", "BEM-302"),
        (".git/config", "BEM-337"),
        ("../outside.txt", "BEM-301"),
        ("logo.png", "BEM-307"),
    ],
)
async def test_get_page_refuses_what_it_may_not_read(view: FileView, path: str, code: str) -> None:
    with pytest.raises(BeamError) as error:
        await tools(view)["get_page"].invoke({"path": path}, INPUT)
    assert error.value.code == code


async def test_review_change_posts_once_and_folds_lines_outside_the_diff(tree: Path) -> None:
    posted: list[tuple[str, list[dict[str, Any]]]] = []
    review = tools(tree, posted)["review_change"]
    args = {
        "body": "Summary.",
        "comments": [
            {"path": "src/app.py", "line": 2, "body": "inline"},
            {"path": "src/app.py", "line": 40, "body": "outside"},
            {"path": "other.py", "line": 1, "body": "not in the PR"},
            {"path": "src/app.py", "body": "no line"},
        ],
    }
    assert await review.invoke(args, INPUT) == {
        "posted": True,
        "inline_comments": 1,
        "folded_comments": 1,
        "dropped_outside_change": 1,
    }
    body, inline = posted[0]
    assert inline == [
        {
            "path": "src/app.py",
            "line": 2,
            "side": "RIGHT",
            "body": "**minor**\ninline",  # the severity's label first
            "finding": "inline",
            "severity": "minor",  # the model named none (issue 21: every finding carries one)
            "line_text": "    return TODO",
        }
    ]
    # A line outside the diff is folded; a file outside the change is dropped, and counted.
    assert "`src/app.py` line 40: outside" in body and "other.py" not in body
    assert "<sub>1 finding on a file outside the change was dropped.</sub>" in body
    again = await review.invoke({"body": "twice"}, INPUT)
    assert again["posted"] is False and len(posted) == 1
