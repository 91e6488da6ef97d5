"""Issue 8: restarts, deploys and jobs that give up: work resumes, nothing is doubled, nothing is silent."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.crash_support import BOT, NUMBER, REPO, bot_comments, seed_review_pull, send
from tests.support.bot_process import BotProcess, bot_stack, wait_for
from tests.support.fleet import Fleet
from tests.support.openai_server import chat_response, text_message, tool_call, tool_calls_message


@pytest.fixture
def bot(tmp_path: Path) -> Iterator[BotProcess]:
    with bot_stack(tmp_path, BEAM_CONCURRENCY="1", BEAM_SWEEP_INTERVAL="0.5") as bot:
        seed_review_pull(bot)
        yield bot


def slow_review(bot: BotProcess, delay: float) -> None:
    """Three model rounds, each answered after `delay` seconds: a run long enough to be cut short."""
    for name, args in (
        ("read_file", {"path": "src/calc.py"}),
        ("review_change", {"body": "The fix is missing a test.", "comments": []}),
    ):
        bot.llm.enqueue(chat_response(tool_calls_message([tool_call(name, args)])), delay=delay)
    bot.llm.enqueue(chat_response(text_message("Reviewed.")), delay=delay)


def final_tracking(bot: BotProcess) -> Any:
    comments = [c for c in bot_comments(bot) if "beam-run:" in c.body and "Working on" not in c.body]
    return comments[0] if comments else None


def model_rounds_asked(bot: BotProcess) -> int:
    return len(bot.llm.requests)


def test_a_restarted_process_takes_its_jobs_back_at_once(bot: BotProcess) -> None:
    # A lease of ten minutes: only the restarted process's own identity can take the job back this
    # soon, not the lease running out.
    bot.extra_env["BEAM_LEASE_SECONDS"] = "600"
    bot.llm.fallback_text = "Reviewed."
    slow_review(bot, delay=30)
    fleet = Fleet(bot)
    fleet.start()
    send(bot, "/beam review")
    wait_for(lambda: model_rounds_asked(bot) >= 1, what="the run to ask the model")
    bot.stop(kill=True)
    bot.llm._replies.clear()  # the retried run gets quick answers
    slow_review(bot, delay=0)
    bot.start()
    final = wait_for(lambda: final_tracking(bot), timeout=30, what=f"the answer\n{bot.log()[-3000:]}")
    assert "Posted a review" in final.body
    assert "takes back 1 job(s) its previous incarnation held" in bot.log()
    assert len(bot_comments(bot)) == 1 and len(bot.fake.reviews_on(REPO, NUMBER)) == 1


def test_sigterm_during_a_long_run_resumes_it_with_one_review(bot: BotProcess) -> None:
    bot.extra_env["BEAM_SHUTDOWN_GRACE"] = "0.5"
    bot.llm.fallback_text = "Reviewed."
    slow_review(bot, delay=2)
    fleet = Fleet(bot)
    fleet.start()
    send(bot, "/beam review")
    wait_for(lambda: model_rounds_asked(bot) >= 2, what="the run to be halfway")
    assert bot.proc is not None
    bot.proc.send_signal(signal.SIGTERM)  # a deploy: the grace is shorter than the run
    bot.proc.wait(20)
    bot.start()
    wait_for(lambda: final_tracking(bot), timeout=40, what=f"the answer\n{bot.log()[-3000:]}")
    wait_for(fleet.jobs_done, what="the job done")
    assert len(bot.fake.reviews_on(REPO, NUMBER)) == 1
    assert len(bot_comments(bot)) == 1
    # The retry continued the conversation: the model was not asked the first round again.
    firsts = [r for r in bot.llm.requests if not any(m.get("role") == "tool" for m in r["messages"])]
    assert len(firsts) == 1


def test_sigterm_with_enough_grace_lets_the_run_finish_first(bot: BotProcess) -> None:
    bot.extra_env["BEAM_SHUTDOWN_GRACE"] = "30"
    slow_review(bot, delay=1)
    fleet = Fleet(bot)
    fleet.start()
    send(bot, "/beam review")
    wait_for(lambda: model_rounds_asked(bot) >= 1, what="the run to start")
    assert bot.proc is not None
    bot.proc.send_signal(signal.SIGTERM)
    bot.proc.wait(40)  # uvicorn re-raises the signal once it has shut down: the code is -15
    final = final_tracking(bot)
    assert final is not None and "Posted a review" in final.body
    assert len(bot.fake.reviews_on(REPO, NUMBER)) == 1 and len(bot_comments(bot)) == 1


def test_a_job_whose_worker_dies_on_every_attempt_ends_with_a_final_comment(bot: BotProcess) -> None:
    # Issue 23: the claim that buries the job reports its end at once; the periodic sweep (which
    # also runs when a process starts) must not be what makes the comment final.
    bot.extra_env["BEAM_SWEEP_INTERVAL"] = "600"
    bot.llm.fallback_text = "Reviewed."
    bot.llm.reply_tool_calls(("read_file", {"path": "src/calc.py"}))
    fleet = Fleet(bot)
    fleet.start("review:before")  # every attempt dies just before posting its review
    send(bot, "/beam review")
    for attempt in range(1, 6):  # the default max_attempts; the sixth claim buries the job
        wait_for(fleet.any_died, timeout=40, what=f"attempt {attempt} to die\n{bot.log()[-2000:]}")
        fleet.start("review:before" if attempt < 5 else None)

    def failed_comment() -> Any:
        comments = bot_comments(bot)
        return comments if comments and "BEM-339" in comments[0].body else None

    comments = wait_for(failed_comment, timeout=30, what=f"the final failure\n{bot.log()[-3000:]}")
    assert len(comments) == 1
    body = comments[0].body
    assert "failed (BEM-339)" in body and fleet.run_rows()[0]["id"] in body and "Working on" not in body
    assert [r["status"] for r in fleet.run_rows()] == ["failed"]
    assert bot.fake.reviews_on(REPO, NUMBER) == []
    assert all(r.user != BOT or r.content == "eyes" for r in bot.fake.reactions.values())


@pytest.mark.parametrize(
    ("args", "code"),
    [({"path": "src/missing.py"}, "BEM-307"), ({}, "BEM-108")],
    ids=["a missing file", 'no path at all (small models write {"name": "read_file"})'],
)
def test_a_tool_error_is_told_to_the_model_and_the_review_goes_on(
    bot: BotProcess, args: dict[str, Any], code: str
) -> None:
    bot.llm.reply_tool_calls(("read_file", args))
    bot.llm.reply_tool_calls(("review_change", {"body": "Looks right.", "comments": []}))
    bot.llm.reply_text("Reviewed.")
    Fleet(bot).start()
    send(bot, "/beam review")
    final = wait_for(lambda: final_tracking(bot), what=f"the answer\n{bot.log()[-3000:]}")
    assert "Posted a review" in final.body and "failed" not in final.body
    told = [m for m in bot.llm.requests[1]["messages"] if m["role"] == "tool"]
    assert told and code in told[-1]["content"]
    assert len(bot.fake.reviews_on(REPO, NUMBER)) == 1


def test_a_comment_github_completes_after_the_kill_is_adopted_not_posted_twice(bot: BotProcess) -> None:
    """Issue 23: the tracking comment's POST is in flight when the process is killed, and GitHub
    completes it 8 s after it arrived. The restarted process takes its job back at once, but must not look for
    the comment (and post a second one) until the request could no longer be alive."""
    bot.extra_env["BEAM_GITHUB_TIMEOUT"] = "10"  # the window: min(10, GitHub's 10 s) + 2 s
    bot.llm.fallback_text = "Reviewed."
    bot.llm.reply_tool_calls(("review_change", {"body": "Looks right.", "comments": []}))
    slow_post = bot.fake.inject("POST", r"/issues/\d+/comments$", status=None, delay=8.0, times=1)
    fleet = Fleet(bot)
    fleet.start()
    send(bot, "/beam review")
    wait_for(lambda: slow_post.hits >= 1, timeout=30, what="the tracking comment's POST")
    bot.stop(kill=True)  # the POST is still in flight at GitHub
    # A restart quicker than the POST's 8 s (an idle machine) would look too early without the window.
    bot.start()
    final = wait_for(lambda: final_tracking(bot), timeout=60, what=f"the answer\n{bot.log()[-3000:]}")
    assert "Posted a review" in final.body
    assert len(bot_comments(bot)) == 1, [c.body[:60] for c in bot_comments(bot)]
    assert len(bot.fake.reviews_on(REPO, NUMBER)) == 1
