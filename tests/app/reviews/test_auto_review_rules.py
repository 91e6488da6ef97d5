"""Issue 10 without I/O: the `auto_review` config keys, what a review looks at (scope.py), which
findings are new (findings.py), committable suggestions, and the summary comment's text."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.app.github.models import Account, Label, PullFile, PullRef, PullRequest, ReviewComment
from bot.app.repo_config import config_json_schema, parse_repo_config
from bot.app.repo_config.review_config import AutoReviewConfig, debounce_seconds
from bot.app.reviews import render
from bot.app.reviews.findings import finding_key, fresh_findings, known_keys, marker, normalise
from bot.app.reviews.scope import added_lines, diff_digest, scope_of, skip_reason, touches_paths
from bot.app.reviews.state import Entry
from bot.app.reviews.suggestions import apply_suggestion, check_suggestion
from bot.app.runs.render import suggestion_as_text, suggestion_block
from bot.app.webhooks.handlers import REVIEW_ACTIONS


def auto(text: str) -> AutoReviewConfig:
    result = parse_repo_config("auto_review:\n" + text)
    assert result.errors == [], result.errors
    return result.config.auto_review


def pull(*, draft: bool = False, user: str = "alice", labels: tuple[str, ...] = ()) -> PullRequest:
    ref = PullRef(ref="feature", sha="h" * 40)
    return PullRequest(
        number=1,
        title="t",
        state="open",
        draft=draft,
        html_url="https://github.com/o/r/pull/1",
        user=Account(login=user),
        head=ref,
        base=PullRef(ref="main", sha="b" * 40),
        labels=[Label(name=n) for n in labels],
    )


# -- config ------------------------------------------------------------------------------------------


def test_every_key_has_its_default_and_is_read() -> None:
    default = AutoReviewConfig()
    assert default.enabled is None and default.is_enabled(False) is False and default.is_enabled(True) is True
    assert default.events == ["opened", "reopened", "ready_for_review", "synchronize"]
    assert (default.drafts, default.ignore_authors, default.ignore_labels) == (False, [], [])
    assert (default.paths, default.ignore_paths, default.max_changed_lines) == ([], [], 3000)
    assert default.debounce_s == 60
    config = auto(
        "  enabled: false\n  events: [opened, opened, synchronize]\n  drafts: true\n"
        "  ignore_authors: ['dependabot[bot]']\n  ignore_labels: [no-review]\n  paths: ['src/**']\n"
        "  ignore_paths: ['**/*.lock']\n  max_changed_lines: 10\n  debounce: 1m30s\n"
    )
    assert config.is_enabled(True) is False
    assert config.events == ["opened", "synchronize"]
    assert config.drafts is True and config.ignore_authors == ["dependabot[bot]"]
    assert config.ignore_labels == ["no-review"] and config.paths == ["src/**"]
    assert config.ignore_paths == ["**/*.lock"] and config.max_changed_lines == 10
    assert config.debounce_s == 90


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("  enabeld: true\n", "auto_review.enabeld: unknown setting; did you mean 'enabled'?"),
        ("  events: [pushed]\n", "auto_review.events[0]: Input should be 'opened'"),
        ("  drafts: maybe\n", "auto_review.drafts: expected true or false"),
        ("  ignore_labels: no-review\n", "auto_review.ignore_labels: expected a list"),
        ("  paths: ['']\n", "auto_review.paths: '' is empty or not text"),
        ("  max_changed_lines: 0\n", "auto_review.max_changed_lines: 0 is outside the allowed range"),
        ("  debounce: soon\n", "auto_review.debounce: 'soon' is not a duration"),
        ("  debounce: 2h\n", "outside the allowed range of 0 seconds to 1 hour"),
    ],
)
def test_invalid_keys_are_reported_and_the_defaults_apply(text: str, message: str) -> None:
    result = parse_repo_config("auto_review:\n" + text)
    assert len(result.errors) == 1 and message in result.errors[0], result.errors
    assert result.config.auto_review == AutoReviewConfig()


def test_a_section_that_is_not_a_mapping_is_reported() -> None:
    assert parse_repo_config("auto_review: true\n").errors == [
        "auto_review: expected a mapping of settings (key: value), got true"
    ]


def test_the_schema_describes_the_section() -> None:
    schema = config_json_schema()
    section = schema["$defs"]["AutoReviewConfig"]
    assert set(section["properties"]) == set(AutoReviewConfig.model_fields)
    assert section["additionalProperties"] is False
    assert debounce_seconds("0") == 0 and debounce_seconds(5) == 5


def test_the_event_table_covers_every_review_action() -> None:
    assert set(REVIEW_ACTIONS) == {
        "opened",
        "reopened",
        "ready_for_review",
        "synchronize",
        "labeled",
        "unlabeled",
    }


# -- scope ----------------------------------------------------------------------------------------


def test_skip_reasons() -> None:
    config = auto("  ignore_authors: ['Dependabot[bot]']\n  ignore_labels: [No-Review]\n")
    assert skip_reason(pull(), config) is None
    assert skip_reason(pull(draft=True), config) == "draft"
    assert skip_reason(pull(draft=True), auto("  drafts: true\n")) is None
    assert skip_reason(pull(user="dependabot[bot]"), config) == "author @dependabot[bot] is ignored"
    assert skip_reason(pull(labels=("bug", "no-review")), config) == "label `no-review`"


def test_scope_ignores_paths_names_unread_files_and_counts_lines() -> None:
    files = [
        PullFile(
            filename="src/a.py", status="modified", additions=3, deletions=1, patch="@@ -1 +1 @@\n-a\n+b"
        ),
        PullFile(filename="poetry.lock", status="modified", additions=900, patch="@@ -1 +1 @@\n-a\n+b"),
        PullFile(filename="logo.png", status="added"),
    ]
    config = auto("  ignore_paths: ['**/*.lock']\n  paths: ['src/**']\n")
    scope = scope_of(files, 3, config)
    assert [f.filename for f in scope.files] == ["src/a.py"]
    assert scope.ignored == ["poetry.lock"] and scope.unread == ["logo.png"] and scope.changed_lines == 4
    assert touches_paths(scope, config)
    assert not touches_paths(scope_of(files[1:], 2, config), config)


def test_the_digest_ignores_hunk_positions_but_not_changes() -> None:
    one = PullFile(filename="a.py", status="modified", patch="@@ -10,2 +10,2 @@ def f():\n-x\n+y")
    moved = PullFile(filename="a.py", status="modified", patch="@@ -14,2 +14,2 @@ def f():\n-x\n+y")
    other = PullFile(filename="a.py", status="modified", patch="@@ -10,2 +10,2 @@ def f():\n-x\n+z")
    assert diff_digest([one]) == diff_digest([moved]) != diff_digest([other])


def test_added_lines_are_the_new_side_additions() -> None:
    patch = "@@ -1,3 +1,4 @@\n a\n-b\n+B\n+C\n c\n@@ -10 +11 @@\n-x\n+y"
    assert added_lines(patch) == {2, 3, 11}


# -- findings -------------------------------------------------------------------------------------


def test_a_finding_is_the_same_whatever_its_case_punctuation_or_suggestion() -> None:
    assert normalise("F2  subtracts!\n\n```suggestion\nx\n```") == normalise("f2 subtracts.")
    assert finding_key("a.py", "  return x ", "F2 subtracts!") == finding_key(
        "a.py", "return x", "f2 subtracts"
    )
    assert finding_key("a.py", "return y", "f2 subtracts") != finding_key("a.py", "return x", "f2 subtracts")


def test_known_keys_read_markers_and_diff_hunks_of_the_bots_comments_only() -> None:
    key = finding_key("a.py", "return x", "old finding")
    bot = Account(login="beam-bot[bot]", type="Bot")
    comments = [
        ReviewComment(id=1, html_url="u", user=bot, body=f"old finding\n\n{marker(key)}", path="a.py"),
        ReviewComment(
            id=2, html_url="u", user=bot, body="Hunk finding", path="b.py", diff_hunk="@@ -1 +1 @@\n+return y"
        ),
        ReviewComment(
            id=3, html_url="u", user=Account(login="alice"), body="human", path="a.py", diff_hunk="@@\n+z"
        ),
    ]
    assert known_keys(comments, "beam-bot[bot]") == {key, finding_key("b.py", "return y", "hunk finding")}


def test_fresh_findings_keep_new_findings_on_changed_lines_and_mark_them() -> None:
    seen = {finding_key("a.py", "return x", "known")}
    comments = [
        {"path": "a.py", "line": 2, "body": "known", "finding": "known", "line_text": "return x"},
        {"path": "a.py", "line": 3, "body": "new", "finding": "new", "line_text": "y"},
        {"path": "a.py", "line": 9, "body": "old line", "finding": "old line", "line_text": "z"},
        {"path": "a.py", "line": 3, "body": "new!", "finding": "new!", "line_text": "y"},
    ]
    kept = fresh_findings(comments, {"a.py": {2, 3}}, seen)
    assert [(c["line"], c["body"].split("\n")[0]) for c in kept] == [(3, "new")]
    assert marker(finding_key("a.py", "y", "new")) in kept[0]["body"]
    assert len(fresh_findings(comments, None, set())) == 3  # a full review: every line of the diff


# -- suggestions ------------------------------------------------------------------------------------


def test_a_suggestion_applies_only_to_lines_of_the_diff_that_it_changes() -> None:
    lines = ["a", "b", "c", "d"]
    in_diff = {2, 3}.__contains__
    assert check_suggestion(lines, 2, 3, "B\nC\n", in_diff).applies
    assert apply_suggestion(lines, 2, 3, "B\nC\n") == ["a", "B", "C", "d"]
    assert apply_suggestion(lines, 2, 2, "") == ["a", "c", "d"]  # an empty block deletes the line
    assert check_suggestion(lines, 1, 2, "x", in_diff).reason == "line 1 is not part of the diff"
    assert check_suggestion(lines, 2, 9, "x", lambda n: True).reason == "the file has 4 lines, not 9"
    assert check_suggestion(lines, 2, 2, "b\n", in_diff).reason == "it would not change the lines"
    assert (
        check_suggestion(None, 2, 2, "x", in_diff).reason == "the file could not be read at the head commit"
    )
    assert check_suggestion(lines, 3, 2, "x", in_diff).reason == "lines 3..2 are not a range"


def test_suggestion_blocks_cannot_be_closed_early() -> None:
    assert suggestion_block("x = 1\n") == "```suggestion\nx = 1\n```"
    assert suggestion_block("s = '```'") == "````suggestion\ns = '```'\n````"
    assert suggestion_as_text("y", "line 1 is not part of the diff") == (
        "Suggested code (not offered as a suggestion: line 1 is not part of the diff):\n```\ny\n```"
    )


# -- the summary ------------------------------------------------------------------------------------


def test_the_summary_lists_each_range_and_what_became_of_it() -> None:
    a, b, c, d = ("a" * 40, "b" * 40, "c" * 40, "d" * 40)
    entries = [
        Entry("reviewed", b, since=a, full=True, url="https://x/r1", findings=2, skipped_files=["logo.png"]),
        Entry("no_findings", c, since=b, full=False),
        Entry("unchanged", d, since=c, full=False),
        Entry("superseded", d, since=c, full=False),
        Entry("too_large", d, since=a, note=render.too_large(4000, 3000)),
    ]
    text = render.summary(entries)
    assert text.startswith(render.SUMMARY_MARKER)
    assert (
        "- `aaaaaaa..bbbbbbb` (full review): [2 findings](https://x/r1)\n  - not reviewed: `logo.png`" in text
    )
    assert "- `bbbbbbb..ccccccc` (new commits): no new findings in `bbbbbbb..ccccccc`" in text
    assert "- `ccccccc..ddddddd`: no review; the push only merged or rebased the base branch" in text
    assert "- `ccccccc..ddddddd`: stopped, superseded by a newer push" in text
    assert "4,000 changed lines is more than `auto_review.max_changed_lines` (3,000)" in text
    assert render.check_output(entries[0])["title"] == "2 findings"


def test_the_docs_show_a_summary_the_bot_would_write() -> None:
    page = (Path(__file__).parents[3] / "docs" / "automatic-reviews.md").read_text(encoding="utf-8")
    shown = page.split("The summary comment looks like this:\n\n```markdown\n", 1)[1].split("\n```", 1)[0]

    def sha(short: str) -> str:
        return short + "0" * 33

    entries = [
        Entry(
            "reviewed",
            sha("8be04d2"),
            since=sha("3f2a9c1"),
            url="https://github.com/octo/demo/pull/7#pullrequestreview-1001",
            findings=2,
            skipped_files=["assets/logo.png", "poetry.lock (ignore_paths)"],
        ),
        Entry("superseded", sha("c41d7e0"), since=sha("8be04d2"), full=False),
        Entry("no_findings", sha("d93e11a"), since=sha("8be04d2"), full=False),
        Entry("unchanged", sha("5a0c2f8"), since=sha("d93e11a"), full=False),
        Entry(
            "over_limit",
            sha("0b7e4aa"),
            since=sha("5a0c2f8"),
            full=False,
            note=render.over_limit("alice", "runs_per_user_per_day", 20, datetime(2026, 12, 1, tzinfo=UTC)),
        ),
    ]
    written = render.summary(entries).removeprefix(render.SUMMARY_MARKER + "\n").strip()
    assert " ".join(shown.split()) == " ".join(written.split())


def test_the_prompt_names_a_file_of_the_change_as_its_path_example() -> None:
    """A made-up example path (`src/app.py`) was read by a small model as a file to open (the 1.5B
    in bench/review_eval.py ended its review on the refusal); the example is the change's own file."""
    from bot.app.context.prompt import build_review_prompt

    patch = "@@ -1 +1 @@\n-a\n+b"
    files = [PullFile(filename="lib/greeting.js", status="modified", additions=1, patch=patch)]
    scope = scope_of(files, 1, auto("  enabled: true\n"))
    prompt = build_review_prompt("octo/demo", pull(), scope, None, None)
    assert "`read_file` takes `lib/greeting.js`, never `/lib/greeting.js`" in prompt
    assert "src/app.py" not in prompt
