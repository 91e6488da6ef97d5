"""Issue 10 end to end, the rules around a review: drafts, ignore labels, the server default, size
limits and ignored paths, forks, redelivered pushes, and answers in the bot's review threads."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from tests.e2e.review_support import BOT, CALC, CONFIG, NUMBER, REPO, Story, review_stack
from tests.support.bot_process import SECRET, wait_for
from tests.support.openai_server import chat_response, text_message, usage
from tests.support.webhooks import delivery, issue_comment_payload

LINE_F2 = 5


def settle(story: Story) -> None:
    wait_for(story.review_jobs_done, timeout=30, what="every job to end")


def test_a_draft_waits_for_ready_for_review(tmp_path: Path) -> None:
    with review_stack(tmp_path, draft=True) as story:
        story.send("opened")
        settle(story)
        assert story.reviews() == [] and story.checks() == [] and story.bot_comments() == []
        assert story.bot.llm.requests == []
        story.pull.draft = False
        story.script_review([{"path": "src/calc.py", "line": LINE_F2, "body": "f2 subtracts."}])
        story.send("ready_for_review")
        story.wait_summary("1 finding")
        assert len(story.reviews()) == 1


def test_an_ignore_label_skips_and_removing_it_reviews(tmp_path: Path) -> None:
    config = CONFIG + "  ignore_labels: [no-review]\n"
    with review_stack(tmp_path, config) as story:
        story.pull.labels = ["no-review"]
        story.send("opened")
        settle(story)
        assert story.reviews() == [] and story.checks() == [] and story.bot_comments() == []
        story.pull.labels = []
        story.script_review([{"path": "src/calc.py", "line": LINE_F2, "body": "f2 subtracts."}])
        story.send("unlabeled", label={"id": 1, "name": "no-review", "color": "ededed", "default": False})
        story.wait_summary("1 finding")
        # Labelling again stops nothing already done, and a push under the label is skipped and said so.
        story.pull.labels = ["no-review"]
        story.send("labeled", label={"id": 1, "name": "no-review", "color": "ededed", "default": False})
        before = story.pull.head_sha
        story.push({"src/calc.py": CALC.replace("x + 2", "x - 2").replace("x + 4", "x * 4")})
        story.send("synchronize", before=before, after=story.pull.head_sha)
        settle(story)
        assert len(story.reviews()) == 1
        assert "skipped (label `no-review`)" not in story.summary()  # no queued job on a skipped push


def test_automatic_reviews_follow_the_server_default(tmp_path: Path) -> None:
    with review_stack(tmp_path, None) as story:  # no .github/beam.yml, BEAM_AUTO_REVIEW unset
        story.send("opened")
        settle(story)
        assert story.reviews() == [] and story.checks() == [] and story.bot_comments() == []
    with review_stack(tmp_path / "on", None, BEAM_AUTO_REVIEW="true") as story:
        story.script_review([{"path": "src/calc.py", "line": LINE_F2, "body": "f2 subtracts."}])
        story.send("opened")
        story.wait_summary("1 finding")
    with review_stack(tmp_path / "off", "auto_review:\n  enabled: false\n", BEAM_AUTO_REVIEW="true") as story:
        story.send("opened")
        settle(story)
        assert story.reviews() == [] and story.checks() == []


def test_a_large_pull_request_gets_one_note_and_ignored_paths_are_never_read(tmp_path: Path) -> None:
    config = CONFIG + "  max_changed_lines: 3\n  ignore_paths: ['docs/**']\n"
    with review_stack(tmp_path, config) as story:
        story.send("opened")  # 2 changed lines: reviewed
        story.script_review([], body="Fine.")
        story.wait_summary("no new findings")
        before = story.pull.head_sha
        story.push({"docs/notes.md": "".join(f"line {n}\n" for n in range(50))}, "Docs")
        story.send("synchronize", before=before, after=story.pull.head_sha)
        settle(story)
        # docs/** is ignored: not counted, not shown to the model; the diff left is the same.
        assert "merged or rebased" in story.summary()
        big = story.pull.head_sha
        story.push({"src/calc.py": CALC.replace("x + ", "x - ")}, "Everything")
        story.send("synchronize", before=big, after=story.pull.head_sha)
        summary = story.wait_summary("max_changed_lines")
        assert "skipped; 20 changed lines is more than `auto_review.max_changed_lines` (3)" in summary
        assert story.reviews() == []
        prompts = [m["content"] for r in story.bot.llm.requests for m in r["messages"] if m["role"] == "user"]
        assert prompts and not any("docs/notes.md" in p for p in prompts)
        assert len(story.bot_comments()) == 1


def test_a_fork_is_reviewed_read_only_and_a_redelivered_push_does_nothing(tmp_path: Path) -> None:
    with review_stack(tmp_path, CONFIG.replace("2s", "1s")) as story:
        story.pull.head_repo = "stranger/demo-fork"
        story.bot.fake.add_repo("stranger/demo-fork", installation_id=9)
        story.script_review([{"path": "src/calc.py", "line": LINE_F2, "body": "f2 subtracts."}])
        first = story.pull.head_sha
        story.push({"src/calc.py": CALC.replace("x + 2", "x - 2").replace("x + 9", "x - 9")})
        sent = story.send("synchronize", before=first, after=story.pull.head_sha)
        again = story.send("synchronize", delivery_id=sent.request.headers["X-GitHub-Delivery"])
        assert again.json()["status"] == "duplicate"
        story.send("synchronize", before=first, after=story.pull.head_sha)  # redelivered with a new id
        story.wait_summary("finding")
        settle(story)
        assert len(story.reviews()) == 1 and len(story.checks()) == 1
        # Only the base repository was read (git fetches refs/pull/N/head there); nothing was pushed.
        assert all("demo-fork" not in r.path for r in story.bot.git.requests)
        assert not any(r.path.endswith("git-receive-pack") for r in story.bot.git.requests)
        story.send("synchronize", before=first, after=story.pull.head_sha)  # after the review: nothing
        settle(story)
        assert len(story.reviews()) == 1 and len(story.checks()) == 1


def test_a_reply_in_the_bots_thread_is_answered_there(tmp_path: Path) -> None:
    with review_stack(tmp_path) as story:
        story.script_review([{"path": "src/calc.py", "line": LINE_F2, "body": "f2 subtracts."}])
        story.send("opened")
        story.wait_summary("1 finding")
        [finding] = story.review_comments(story.reviews()[0])
        story.bot.fake.set_file(REPO, story.pull.head_sha, "src/calc.py", CALC.replace("x + 2", "x - 2"))
        story.bot.llm.reply_text("Yes: f2 should return x + 2, as the other functions add.")
        story.reply_in_thread(finding, "@beam-bot is this really wrong?")
        answer = wait_for(
            lambda: next(
                (c for c in story.bot.fake.comments.values() if c.in_reply_to and c.user == BOT), None
            ),
            what="the answer in the thread",
        )
        assert answer.in_reply_to == finding.id and "f2 should return x + 2" in answer.body
        prompt = story.bot.llm.requests[-1]["messages"][1]["content"]
        assert "@beam-bot is this really wrong?" in prompt and "f2 subtracts." in prompt
        assert "5:     return x - 2" in prompt  # the code around the line, at the head
        # A bot's reply, a reply that does not ask the bot, and a reader's question get nothing or a refusal.
        asked = len(story.bot.llm.requests)
        story.reply_in_thread(finding, "@beam-bot thoughts?", user="ci-bot[bot]")
        story.reply_in_thread(finding, "I agree with this.")
        story.reply_in_thread(finding, "/beam why?", user="reader")
        refusal = wait_for(
            lambda: next(
                (c for c in story.bot.fake.comments.values() if c.user == BOT and "Sorry @reader" in c.body),
                None,
            ),
            what="the refusal",
        )
        assert refusal.in_reply_to == finding.id
        time.sleep(1.0)
        assert len(story.bot.llm.requests) == asked
        answers = [c for c in story.bot.fake.comments.values() if c.in_reply_to and c.user == BOT]
        assert len(answers) == 2


def test_a_thread_answer_is_a_run_that_cancel_stops_and_usage_reports(tmp_path: Path) -> None:
    """Issue 41: each answer in a thread is a run: its footer says what it used, `beam-bot usage`
    counts it for whoever asked, and `/beam cancel` stops it while the model is still writing."""
    with review_stack(tmp_path) as story:
        story.script_review([{"path": "src/calc.py", "line": LINE_F2, "body": "f2 subtracts."}])
        story.send("opened")
        story.wait_summary("1 finding")
        [finding] = story.review_comments(story.reviews()[0])
        bot = story.bot

        def in_thread(text: str) -> Callable[[], str | None]:
            def found() -> str | None:
                replies = (c for c in bot.fake.comments.values() if c.in_reply_to == finding.id)
                return next((c.body for c in replies if c.user == BOT and text in c.body), None)

            return found

        asked = len(bot.llm.received)
        bot.llm.enqueue(chat_response(text_message("never posted"), usage=usage(500, 50)), delay=6.0)
        story.reply_in_thread(finding, "@beam-bot is this really wrong?")
        wait_for(lambda: len(bot.llm.received) > asked or None, what="the answer's model call")
        cancel = bot.fake.add_comment(REPO, NUMBER, "/beam cancel", user="maintainer")
        payload = issue_comment_payload(
            "/beam cancel", repo=REPO, number=NUMBER, commenter="maintainer", comment_id=cancel.id
        )
        payload["repository"]["default_branch"] = "main"
        assert bot.send(delivery("issue_comment", payload, SECRET)).status_code == 202
        cancelled = wait_for(
            in_thread("was cancelled by @maintainer"), timeout=30, what="the cancelled answer"
        )
        assert "never posted" not in cancelled
        # The cut call read its prompt: the footer counts it, as estimated, with no output.
        read = re.search(r"· ([\d,]+) input / 0 output tokens · 1 model call · ", cancelled)
        assert read is not None and int(read[1].replace(",", "")) > 100
        cut = int(read[1].replace(",", ""))
        assert any("asked to cancel an answer in a review thread" in c.body for c in story.bot_comments())

        bot.llm.reply_text("Yes: f2 should add 2.", usage=usage(1200, 80))
        story.reply_in_thread(finding, "@beam-bot and now?")
        answer = wait_for(in_thread("f2 should add 2"), timeout=30, what="the answer")
        assert "1,200 input / 80 output tokens · 1 model call" in answer
        report = subprocess.run(
            [sys.executable, "-m", "bot.cli", "usage", "--since", "1d", "--repo", REPO],
            env=bot.env(),
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout
        row = next(line for line in report.splitlines() if line.split()[:2] == [REPO, "maintainer"])
        # Both answers are runs; the cancelled one counts the prompt its model call read.
        assert row.split()[2:5] == ["2", f"{1200 + cut:,}", "80"]


def test_the_summary_names_the_files_it_did_not_review(tmp_path: Path) -> None:
    with review_stack(tmp_path, CONFIG + "  ignore_paths: ['docs/**']\n") as story:
        story.push(
            {"assets/logo.png": b"\x89PNG\r\n\x1a\n\x00\x00binary", "docs/notes.md": "Changed\n"}, "Logo"
        )
        story.script_review([{"path": "src/calc.py", "line": LINE_F2, "body": "f2 subtracts."}])
        story.send("opened")
        summary = story.wait_summary("1 finding")
        assert "  - not reviewed: `assets/logo.png`, `docs/notes.md (ignore_paths)`" in summary
        prompt = story.bot.llm.requests[0]["messages"][1]["content"]
        assert "not shown (binary, too large or past the file limit): assets/logo.png" in prompt
        assert "docs/notes.md" not in prompt
