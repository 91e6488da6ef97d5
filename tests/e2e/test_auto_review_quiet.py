"""Issue 10 end to end, where automatic reviews must stay honest and quiet when things go wrong: an
invalid `.github/beam.yml`, a pull request too large on every push, and a GitHub error mid-review."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.review_support import CALC, REPO, Story, review_stack
from tests.support.bot_process import wait_for

LINE_F2 = 5
INVALID = "version: 1\nauto_review:\n  enabled: true\n  debounce: 1s\n  max_changed_lines: 0\n"
RANGE_ERROR = "auto_review.max_changed_lines: 0 is outside the allowed range; the minimum is 1"


def settle(story: Story) -> None:
    wait_for(story.review_jobs_done, timeout=30, what="every job to end")


def summary_edits(story: Story) -> int:
    [summary] = story.bot_comments()
    edits = story.bot.fake.calls_to("issues/update-comment")
    return sum(1 for call in edits if call.path.endswith(f"/{summary.id}"))


def test_an_invalid_config_is_said_once_in_the_summary_and_nothing_is_reviewed(tmp_path: Path) -> None:
    with review_stack(tmp_path, INVALID) as story:
        story.send("opened")
        summary = story.wait_summary("BEM-341")
        head = story.pull.head_sha
        said = f"`{head[:7]}`: no review; `.github/beam.yml` on the default branch is invalid (BEM-341)"
        assert said in summary
        assert RANGE_ERROR in summary
        assert story.reviews() == [] and story.checks() == [] and story.bot.llm.requests == []
        # Redeliveries and other events for the same head and the same file change nothing.
        edits = summary_edits(story)
        story.send("opened")
        story.send("reopened")
        story.send("ready_for_review")
        settle(story)
        assert story.summary() == summary and summary_edits(story) == edits
        # A push under the same broken file moves the one line to the new head; it adds none.
        story.push({"src/calc.py": CALC.replace("x + 2", "x - 2").replace("x + 4", "x * 4")})
        story.send("synchronize", before=head, after=story.pull.head_sha)
        summary = story.wait_summary(f"`{story.pull.head_sha[:7]}`: no review")
        assert summary.count("BEM-341") == 1 and head[:7] not in summary
        assert story.reviews() == [] and story.checks() == [] and story.bot.llm.requests == []
        # Fixed on the default branch: the next push is reviewed, and the summary says so below.
        story.bot.fake.set_file(REPO, "main", ".github/beam.yml", INVALID.replace(": 0", ": 100"))
        story.script_review([{"path": "src/calc.py", "line": LINE_F2, "body": "f2 subtracts."}])
        before = story.pull.head_sha
        story.push({"src/calc.py": CALC.replace("x + 2", "x - 2").replace("x + 4", "x * 4 ")})
        story.send("synchronize", before=before, after=story.pull.head_sha)
        summary = story.wait_summary("1 finding")
        assert summary.index("BEM-341") < summary.index("1 finding")
        assert len(story.reviews()) == 1 and len(story.bot_comments()) == 1


def test_an_invalid_config_is_said_only_where_automatic_reviews_may_be_on(tmp_path: Path) -> None:
    broken = "version: 1\nauto_review: {enabled: true\n"  # not even YAML: the server default decides
    with review_stack(tmp_path / "on", broken, BEAM_AUTO_REVIEW="true") as story:
        story.send("opened")
        summary = story.wait_summary("BEM-341")
        assert "YAML syntax error" in summary and story.checks() == []
    with review_stack(tmp_path / "off", broken) as story:
        story.send("opened")
        settle(story)
        assert story.bot_comments() == [] and story.checks() == []
    # The file still says `enabled: false`: the repository opted out, whatever else is wrong.
    opted_out = "version: 1\nauto_review:\n  enabled: false\n  drafts: maybe\n"
    with review_stack(tmp_path / "out", opted_out, BEAM_AUTO_REVIEW="true") as story:
        story.send("opened")
        settle(story)
        assert story.bot_comments() == [] and story.checks() == []


def test_a_pull_request_too_large_on_every_push_keeps_one_skip_line(tmp_path: Path) -> None:
    config = "auto_review:\n  enabled: true\n  debounce: 1s\n  max_changed_lines: 1\n"
    with review_stack(tmp_path, config) as story:
        story.send("opened")
        story.wait_summary("max_changed_lines")
        first = story.pull.head_sha
        story.push({"src/calc.py": CALC.replace("x + 2", "x - 2").replace("x + 4", "x * 4")})
        story.send("synchronize", before=first, after=story.pull.head_sha)
        summary = story.wait_summary(f"..{story.pull.head_sha[:7]}`: skipped")
        lines = [line for line in summary.splitlines() if line.startswith("- ")]
        assert len(lines) == 1, summary
        assert "4 changed lines is more than `auto_review.max_changed_lines` (1)" in lines[0]
        assert first[:7] not in summary
        # Each head still has its own check run, completed and neutral.
        checks = story.checks()
        assert [c.head_sha for c in checks] == [first, story.pull.head_sha]
        assert all(c.status == "completed" and c.conclusion == "neutral" for c in checks)
        assert all(c.output is not None and c.output["title"] == "Skipped: too large" for c in checks)
        assert story.reviews() == [] and story.bot.llm.requests == []


def test_a_github_error_mid_review_is_retried_on_the_same_check_run(tmp_path: Path) -> None:
    with review_stack(tmp_path, BEAM_GITHUB_OUTAGE_WAIT="30") as story:
        story.bot.fake.inject("POST", rf"^/repos/{REPO}/pulls/7/reviews$", status=502, times=1)
        finding = {"path": "src/calc.py", "line": LINE_F2, "body": "f2 subtracts."}
        # The first attempt's review is refused (502): the job waits for GitHub (1 s of a 30 s wait),
        # and the next try posts the review the model wrote, without asking it again.
        story.script_review([finding])
        story.send("opened")
        summary = story.wait_summary("1 finding", timeout=60)
        assert "failed" not in summary
        assert len(story.reviews()) == 1
        assert len(story.bot.llm.requests) == 1
        [check] = story.checks()  # one check run for the head: the retry reused it
        assert check.head_sha == story.pull.head_sha
        assert check.status == "completed" and check.conclusion == "neutral"
        # Each try starts it again: the refused one, the retry that waits until the refused write
        # cannot land (the review goes through effects/writer.py's journal), the one that posts.
        assert check.history[0] == "queued" and check.history[-1] == "completed"
        assert set(check.history[1:-1]) == {"in_progress"} and len(check.history) >= 4
        assert check.output is not None and check.output["title"] == "1 finding"


def test_an_error_no_retry_can_mend_completes_the_check_run_neutral(tmp_path: Path) -> None:
    with review_stack(tmp_path) as story:
        story.bot.fake.inject("POST", rf"^/repos/{REPO}/pulls/7/reviews$", status=422, times=1)
        story.script_review([{"path": "src/calc.py", "line": LINE_F2, "body": "f2 subtracts."}])
        story.send("opened")
        settle(story)
        [check] = story.checks()
        assert check.status == "completed" and check.conclusion == "neutral"
        assert check.history == ["queued", "in_progress", "completed"]
        assert check.output is not None and check.output["title"] == "The review failed"
        assert story.reviews() == []
