"""The approval comment (bot/app/approvals/render.py) shows all that lands, and says first what it cuts
(issue 28): pure rendering, checked on the shapes the flow stores."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from bot.app.approvals import render
from bot.app.approvals.pushes import HeldPush, PushAction, PushContext
from tests.support.markdown_view import rendered_lines

SHA = "c0ffee" * 6 + "abcd"


def patch(path: str, lines: int) -> str:
    body = "".join(f"+line {n}\n" for n in range(lines))
    head = f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n"
    return f"{head}@@ -0,0 +1,{lines} @@\n{body}"


def files(*sizes: tuple[str, int]) -> list[dict[str, Any]]:
    return [{"path": path, "additions": n, "deletions": 0} for path, n in sizes]


def push(diffstat: dict[str, Any], *, fork: bool = False) -> HeldPush:
    return HeldPush(
        id="abcd1234",
        run_id="r",
        repo="octo/demo",
        number=7,
        base_sha=None,
        head_sha="0" * 40,
        commit_sha=SHA,
        branch="beam/pr-7/author-12345678",
        requester="maintainer",
        action=PushAction(action_id="a", args={"ref": "x"}, session_id="s", interaction_id="i"),
        context=PushContext(
            installation_id=1,
            clone_url="https://example.com/o/r.git",
            html_url="https://github.com/octo/demo",
            default_branch="main",
            on_pull_request=True,
            from_fork=fork,
            head_repo="mallory/demo" if fork else "octo/demo",
        ),
        created_at=0.0,
        expires_at=86400.0,
        diffstat=diffstat,
    )


def test_a_diff_that_fits_is_shown_whole() -> None:
    diff = patch("a.py", 3) + patch("b.py", 2)
    shown = render.shown_diff(diff, files(("a.py", 3), ("b.py", 2)))
    assert not shown.cut and shown.lines == diff.splitlines()


def test_a_cut_diff_names_the_file_in_part_and_every_file_after_it() -> None:
    diff = patch("CHANGELOG.md", 420) + patch("setup.py", 2) + patch("z.py", 1)
    shown = render.shown_diff(diff, files(("CHANGELOG.md", 420), ("setup.py", 2), ("z.py", 1)))
    assert len(shown.lines) == render.MAX_DIFF_LINES
    assert shown.partial_files == ["CHANGELOG.md"] and shown.hidden_files == ["setup.py", "z.py"]
    assert shown.total_lines == 425 + 7 + 6 and shown.hidden_lines == shown.total_lines - 400


def test_one_very_long_line_is_cut_like_many_lines_and_the_comment_stays_postable() -> None:
    """A minified file's one line of 100,000 characters made GitHub refuse the comment (a 422: a body
    holds 65,536 characters at most); it is cut and said, as a long diff is."""
    minified = "diff --git a/app.min.js b/app.min.js\n--- /dev/null\n+++ b/app.min.js\n@@ -0,0 +1 @@\n"
    minified += "+" + "x" * 100_000 + "\n"
    diff = patch("a.py", 2) + minified + patch("setup.py", 2)
    listed = files(("a.py", 2), ("app.min.js", 1), ("setup.py", 2))
    shown = render.shown_diff(diff, listed)
    assert shown.partial_files == ["app.min.js"] and shown.hidden_files == ["setup.py"]
    assert sum(len(line) for line in shown.lines) <= render.MAX_DIFF_CHARS
    body = render.approval_request(push({"files": listed}), diff, "Add the bundle")
    assert len(body) < 65_536
    assert "`setup.py`" in body.split("```")[0]  # named at the top, before the diff


def test_files_whose_patch_was_never_made_are_named_too() -> None:
    """The patch text is capped (MAX_PATCH_CHARS): files past the cap have no section at all."""
    shown = render.shown_diff(patch("a.py", 1), files(("a.py", 1), ("b.py", 7)))
    assert shown.hidden_files == ["b.py"] and shown.hidden_lines == 7


def test_the_cut_is_said_at_the_top_with_a_link_and_every_file_is_listed() -> None:
    stat = {"files": files(("CHANGELOG.md", 420), ("setup.py", 2)), "additions": 422, "deletions": 0}
    diff = patch("CHANGELOG.md", 420) + patch("setup.py", 2)
    url = "https://ghe.example.com/octo/demo/compare/abc...def"
    body = render.approval_request(push(stat), diff, "Update", compare_url=url)
    notice = body.index("⚠️ **This comment does not show the whole change.**")
    assert notice < body.index("Commit `") < body.index("| file |")
    top = body[notice : body.index("\n\n", notice)]
    assert (
        "32 of 432 diff lines are not shown" in top and "1 of 2 files is not shown at all (`setup.py`)" in top
    )
    assert f"]({url})" in top
    assert "| `setup.py` | +2 | -0 |" in body and "+line 1\n" in body and "setup.py b/setup.py" not in body
    assert "*(The diff is cut here: 32 more lines, see the top of this comment.)*" in body


def test_an_uncut_diff_has_no_notice() -> None:
    stat = {"files": files(("a.py", 1)), "additions": 1, "deletions": 0}
    body = render.approval_request(push(stat), patch("a.py", 1), "Fix")
    assert "does not show the whole change" not in body and "cut here" not in body


def test_every_commit_is_listed_with_its_author_and_subject_escaped() -> None:
    commits = [
        {
            "sha": "1" * 40,
            "author": "Mallory",
            "email": "m@evil.example",
            "subject": "# Approved <img>",
            "own": False,
        },
        {"sha": SHA, "author": "beam-bot[bot]", "email": "b@x", "subject": "Fix `it`", "own": True},
    ]
    stat = {"files": files(("a.py", 1)), "additions": 1, "deletions": 0, "commits": commits}
    body = render.approval_request(push(stat, fork=True), patch("a.py", 1), "Fix `it`")
    assert (
        "**Commits that would become new in `octo/demo`** (2; 1 from the fork `mallory/demo`, 1 made" in body
    )
    assert "- `111111111111` by `Mallory <m@evil.example>`: `# Approved <img>` (from the fork)" in body
    assert f"- `{SHA[:12]}` by `beam-bot[bot] <b@x>`: `` Fix `it` ``\n" in body
    assert "comes from the fork `mallory/demo`" in body
    assert not [line for line in rendered_lines(body) if line.startswith("#") or "<img" in line]


def test_more_files_than_a_comment_holds_is_said_at_the_top() -> None:
    many = files(*((f"f{n}.py", 1) for n in range(render.MAX_LISTED_FILES + 3)))
    stat = {"files": many, "additions": len(many), "deletions": 0}
    body = render.approval_request(replace(push(stat)), "", "Fix")
    assert "does not show the whole change" in body and "3 more files: see the full comparison" in body
