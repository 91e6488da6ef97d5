"""Issues 10 and 11 end to end on `beam-bot serve`: automatic reviews count against the same daily
limits as commands, and a push over one is not reviewed; the one summary comment and the push's check
run say which limit and when it resets."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tests.e2e.review_support import CALC, review_stack

LINE_F2 = 5


def test_a_push_over_the_daily_repository_limit_is_skipped_and_the_summary_says_so(tmp_path: Path) -> None:
    with review_stack(tmp_path, BEAM_RUNS_PER_REPO_PER_DAY="1") as story:
        story.script_review([{"path": "src/calc.py", "line": LINE_F2, "body": "f2 subtracts."}])
        story.send("opened")
        story.wait_summary("1 finding")
        asked = len(story.bot.llm.requests)
        before = story.pull.head_sha
        story.push({"src/calc.py": CALC.replace("x + 2", "x - 2").replace("x + 4", "x * 4")})
        story.send("synchronize", before=before, after=story.pull.head_sha)
        summary = story.wait_summary("runs_per_repo_per_day")
        span = f"`{before[:7]}..{story.pull.head_sha[:7]}`"
        assert (
            f"- {span}: skipped; this would go over this repository's limit of 1 runs per day "
            "(`runs_per_repo_per_day`). It resets at " in summary
        )
        assert len(story.reviews()) == 1 and len(story.bot.llm.requests) == asked
        assert len(story.bot_comments()) == 1  # the summary, edited
        check = story.checks()[-1]
        head = story.pull.head_sha
        assert (check.head_sha, check.status, check.conclusion) == (head, "completed", "neutral")
        assert check.output is not None and check.output["title"] == "Skipped: over a limit"
        with sqlite3.connect(story.bot.work_dir / "beam.db") as db:
            found = db.execute("SELECT requester, status FROM runs WHERE skill = 'auto_review'").fetchall()
        assert found == [("contributor", "succeeded")]  # the author's review; a refusal is no run
