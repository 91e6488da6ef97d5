"""Issue 3 end to end: `beam-bot serve` answers `/beam` commands on the fake GitHub, with real git."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.bot_process import (
    SECRET,
    BotProcess,
    bot_stack,
    comment_payload,
    deliveries_done,
    replay_finished_deliveries,
    wait_for,
)
from tests.support.fake_github_state import PullFile
from tests.support.openai_server import chat_response, tool_call, tool_calls_message
from tests.support.webhooks import delivery, issue_comment_payload

REPO = "octo/demo"
PATCH = "@@ -1,2 +1,3 @@\n def add(a, b):\n-    return a - b\n+    return a + b\n+# fixed\n"
BOT_LOGIN = "beam-bot[bot]"


def seed_pull(bot: BotProcess, extra: dict[str, str] | None = None) -> None:
    """The pull request every test here reviews: `add` fixed on `feature` (and `extra` on main)."""
    main = bot.git.seed(
        REPO, {"README.md": "Demo\n", "src/calc.py": "def add(a, b):\n    return a - b\n", **(extra or {})}
    )
    head = bot.git.commit(
        REPO,
        {"src/calc.py": "def add(a, b):\n    return a + b\n# fixed\n"},
        branch="feature",
        message="Fix add",
    )
    bot.git.create_pull_ref(REPO, 7, head)
    bot.fake.add_repo(REPO)
    bot.fake.add_collaborator(REPO, "maintainer", "write")
    bot.fake.add_collaborator(REPO, "reader", "read")
    bot.fake.add_pull(
        REPO,
        number=7,
        title="Fix add",
        head_ref="feature",
        head_sha=head,
        base_sha=main,
        files=[PullFile("src/calc.py", additions=2, deletions=1, patch=PATCH)],
    )


@pytest.fixture
def bot(tmp_path: Path) -> Iterator[BotProcess]:
    with bot_stack(tmp_path) as bot:
        seed_pull(bot)
        bot.start()
        yield bot


def command(bot: BotProcess, body: str, *, user: str = "maintainer") -> dict[str, object]:
    """The comment exists on the fake GitHub, and its webhook payload says so."""
    comment = bot.fake.add_comment(REPO, 7, body, user=user)
    payload = issue_comment_payload(body, repo=REPO, number=7, commenter=user, comment_id=comment.id)
    return comment_payload(bot, payload, REPO)


def bot_comments(bot: BotProcess) -> list[str]:
    return [c.body for c in bot.fake.comments_on(REPO, 7) if c.user == BOT_LOGIN]


def final_comment(bot: BotProcess) -> str | None:
    bodies = bot_comments(bot)
    return next(
        (b for b in bodies if "beam-run:" in b and "Working on" not in b and "retrying" not in b), None
    )


def script_review(bot: BotProcess) -> None:
    bot.llm.reply_tool_calls(("read_file", {"path": "src/calc.py"}))
    bot.llm.reply_tool_calls(
        (
            "review_change",
            {
                "body": "The fix is missing a test.",
                "comments": [
                    {"path": "src/calc.py", "line": 2, "body": "Check for overflow."},
                    {"path": "src/calc.py", "line": 40, "body": "Not in the diff."},
                ],
            },
        )
    )
    bot.llm.reply_text("Reviewed: `src/calc.py:2` now adds.")


def test_review_is_answered_on_github(bot: BotProcess) -> None:
    script_review(bot)
    sent = delivery("issue_comment", command(bot, "/beam review"), SECRET)
    assert bot.send(sent).status_code == 202

    final = wait_for(lambda: final_comment(bot), what="the final tracking comment")
    reviews = bot.fake.reviews_on(REPO, 7)
    assert len(reviews) == 1
    review = reviews[0]
    assert review.event == "COMMENT" and review.user == BOT_LOGIN
    assert review.commit_id == bot.fake.pull(REPO, 7).head_sha
    assert "The fix is missing a test." in review.body and "Not in the diff." in review.body
    assert len(review.comment_ids) == 1
    # One tracking comment, ending in the answer with a link at the head commit.
    assert len(bot_comments(bot)) == 1
    assert "Posted a review" in final
    assert f"/blob/{review.commit_id}/src/calc.py#L2" in final
    command_id = sent.json()["comment"]["id"]
    eyes = [r for r in bot.fake.reactions_on(command_id) if r.content == "eyes"]
    assert [r.user for r in eyes] == [BOT_LOGIN]
    # The config was asked once, at admission: the run job took that answer (here: no file), so its
    # tracking comment waits for no further round trip.
    assert [c.path for c in bot.fake.calls_to("repos/get-content")] == [
        "/repos/octo/demo/contents/.github/beam.yml"
    ]
    # The checkout went through git over HTTP with the installation token, and the model saw the file.
    assert any(r.authorized for r in bot.git.requests)
    assert not any(not r.authorized and r.path.endswith("git-upload-pack") for r in bot.git.requests)
    assert any(
        "return a + b" in m.get("content", "") for m in bot.llm.requests[1]["messages"] if m["role"] == "tool"
    )

    # A replayed delivery is acknowledged and changes nothing.
    again = bot.send(sent)
    assert again.status_code == 202 and again.json()["status"] == "duplicate"
    time.sleep(1.0)
    assert len(bot_comments(bot)) == 1 and len(bot.fake.reviews_on(REPO, 7)) == 1


def test_forged_delivery_is_refused_and_leaves_nothing(bot: BotProcess) -> None:
    forged = delivery("issue_comment", command(bot, "/beam review"), "not-the-secret")
    response = bot.send(forged)
    assert response.status_code == 401
    time.sleep(1.0)
    assert bot_comments(bot) == []
    assert bot.llm.requests == []


def test_non_collaborator_gets_a_polite_refusal(bot: BotProcess) -> None:
    sent = delivery("issue_comment", command(bot, "/beam review", user="reader"), SECRET)
    assert bot.send(sent).status_code == 202
    refusal = wait_for(lambda: next(iter(bot_comments(bot)), None), what="the refusal")
    assert "Sorry @reader" in refusal and "write" in refusal
    assert bot.fake.reviews_on(REPO, 7) == []
    assert bot.llm.requests == []


def test_unknown_command_gets_help(bot: BotProcess) -> None:
    sent = delivery("issue_comment", command(bot, "/beam deploy"), SECRET)
    assert bot.send(sent).status_code == 202
    reply = wait_for(lambda: next(iter(bot_comments(bot)), None), what="the help reply")
    assert "`deploy` is not a beam command" in reply and "/beam review" in reply


def test_llm_failure_ends_in_a_clear_failure(bot: BotProcess) -> None:
    bot.llm.reply_error(400, "model overloaded")
    sent = delivery("issue_comment", command(bot, "/beam summarize"), SECRET)
    assert bot.send(sent).status_code == 202
    final = wait_for(lambda: final_comment(bot), what="the failure comment")
    assert "failed (BEM-084)" in final and "Run id:" in final


def test_a_killed_server_still_answers_an_accepted_delivery(bot: BotProcess) -> None:
    bot.llm.enqueue({"never": "read"}, delay=6.0)  # the first attempt hangs on the model, then dies
    bot.llm.reply_text("Second attempt: looks good.")
    sent = delivery("issue_comment", command(bot, "/beam summarize"), SECRET)
    assert bot.send(sent).status_code == 202
    wait_for(lambda: bot.llm.received or None, what="the first model call")
    bot.stop(kill=True)
    bot.start()
    final = wait_for(lambda: final_comment(bot), timeout=45, what="the answer after the restart")
    assert "Second attempt: looks good." in final
    assert len(bot_comments(bot)) == 1, bot_comments(bot)


def test_a_large_pull_request_says_what_was_not_read(bot: BotProcess) -> None:
    pull = bot.fake.pull(REPO, 7)
    pull.files = [PullFile(f"gen/f{n}.txt", patch="@@ -0,0 +1 @@\n+x\n") for n in range(301)]
    pull.files.insert(0, PullFile("assets/logo.png", status="added", patch=None))
    bot.llm.reply_text("A big change.")
    sent = delivery("issue_comment", command(bot, "/beam summarize"), SECRET)
    assert bot.send(sent).status_code == 202
    final = wait_for(lambda: final_comment(bot), what="the final comment")
    assert "A big change." in final
    assert "This pull request changes 302 files; I looked at the first 300 only." in final
    assert "Skipped (binary or too large): `assets/logo.png`" in final
    prompt = bot.llm.requests[0]["messages"][-1]["content"]
    assert "files changed: 302" in prompt and "gen/f298.txt" in prompt and "gen/f299.txt" not in prompt


def test_a_retried_job_of_a_finished_run_changes_nothing(bot: BotProcess) -> None:
    script_review(bot)
    sent = delivery("issue_comment", command(bot, "/beam review"), SECRET)
    assert bot.send(sent).status_code == 202
    wait_for(lambda: final_comment(bot) and deliveries_done(bot), what="the review job to end")
    bot.stop(kill=True)
    # A finished run row whose job is queued again: the run must not be redone.
    replay_finished_deliveries(bot)
    with sqlite3.connect(bot.work_dir / "beam.db") as db:
        db.execute("UPDATE runs SET status = 'succeeded'")
    before = (
        len(bot.llm.requests),
        len(bot.fake.reviews_on(REPO, 7)),
        [c.body for c in bot.fake.comments_on(REPO, 7)],
    )
    bot.start()
    wait_for(lambda: deliveries_done(bot), timeout=45, what="the retried job to end")
    after = (
        len(bot.llm.requests),
        len(bot.fake.reviews_on(REPO, 7)),
        [c.body for c in bot.fake.comments_on(REPO, 7)],
    )
    assert after == before


def test_a_review_writes_no_work_tree(bot: BotProcess) -> None:
    """Issue 43: a review reads the head commit from the mirror's objects; under the runs directory
    only the change's file is written (for the linters), never `README.md`, which it does not touch.
    Its tools still read any file of the head commit."""
    message = tool_calls_message([tool_call("read_file", {"path": "README.md"})])
    bot.llm.enqueue(chat_response(message), delay=3)  # the run's files, looked at while it waits
    bot.llm.reply_text("Nothing to add.")
    sent = delivery("issue_comment", command(bot, "/beam review"), SECRET)
    assert bot.send(sent).status_code == 202
    wait_for(lambda: bot.llm.requests or None, what="the first model call")
    runs = bot.work_dir / "runs"
    written = sorted(p.name for p in runs.rglob("*") if p.is_file() and ".git" not in p.parts)
    assert written == ["calc.py"]
    wait_for(lambda: final_comment(bot), what="the final tracking comment")
    assert any("Demo" in m.get("content", "") for m in bot.llm.requests[1]["messages"] if m["role"] == "tool")
    assert not list(runs.rglob("calc.py"))  # the run's files are gone with the run


def test_a_file_past_the_fetch_cap_is_named_in_the_review(tmp_path: Path) -> None:
    """Issue 43: the mirror fetches a file's content when a tool reads it, at most
    BEAM_MAX_FETCH_BYTES per run; a file past it is refused to the model (BEM-357) and named."""
    with bot_stack(tmp_path, BEAM_MAX_FETCH_BYTES="1024") as bot:
        seed_pull(bot, {"big.txt": "x" * 5000})
        bot.start()
        bot.llm.reply_tool_calls(("read_file", {"path": "big.txt"}))
        bot.llm.reply_text("The fix is missing a test.")
        sent = delivery("issue_comment", command(bot, "/beam review"), SECRET)
        assert bot.send(sent).status_code == 202
        final = wait_for(lambda: final_comment(bot), what="the final tracking comment")
        told = [m["content"] for m in bot.llm.requests[1]["messages"] if m["role"] == "tool"]
        assert any("BEM-357" in text or "BEAM_MAX_FETCH_BYTES" in text for text in told), told
        assert "x" * 100 not in "".join(told)
        assert "BEAM_MAX_FETCH_BYTES" in final and "big.txt" in final, final
