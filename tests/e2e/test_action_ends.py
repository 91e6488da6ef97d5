"""Issue 42, the Action that cleans up after itself: how a `beam-bot action` step ends, as a process
on the fake GitHub with real git (test_action.py's runner). A cancelled job (SIGTERM while the model
is slow) and the `if: always()` step's `--finish`; the step summary and outputs after a review; a
last line that names what failed; one line for a bad token or GitHub down; the `provider` input."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from tests.e2e.review_support import Story
from tests.e2e.test_action import (
    AUTO,
    LINE_F2,
    NUMBER,
    REPO,
    Runner,
    actions_runner,
    pull_request_event,
    seed_fix_pull,
)
from tests.support.openai_server import chat_response, tool_call, tool_calls_message, usage

ACTION = [sys.executable, "-m", "bot.cli", "action"]
WAIT = 60.0  # seconds any one wait may take


@pytest.fixture
def runner(tmp_path: Path) -> Iterator[Runner]:
    with actions_runner(tmp_path) as runner:
        seed_fix_pull(runner)
        yield runner


def run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ACTION, *args], env=env, capture_output=True, text=True, timeout=180, check=False)


def beam_lines(stream: str) -> list[str]:
    """The lines the action says itself (the log's other lines are the logger's)."""
    return [line for line in stream.splitlines() if line.startswith("beam-bot action:")]


def outputs(path: Path) -> dict[str, str]:
    """GITHUB_OUTPUT as the runner reads it: `name<<DELIMITER`, the value's lines, `DELIMITER`."""
    found: dict[str, str] = {}
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    i = 0
    while i < len(lines):
        name, delimiter = lines[i].split("<<", 1)
        end = lines.index(delimiter, i + 1)
        found[name] = "\n".join(lines[i + 1 : end])
        i = end + 1
    return found


def with_runner_files(env: dict[str, str], tmp: Path, tag: str) -> tuple[Path, Path]:
    summary, output = tmp / f"summary-{tag}.md", tmp / f"output-{tag}.txt"
    env["GITHUB_STEP_SUMMARY"], env["GITHUB_OUTPUT"] = str(summary), str(output)
    return summary, output


def script_review(runner: Runner, *, delay: float = 0.0) -> None:
    """One review: the model reads the file (after `delay` seconds), then posts one finding."""
    spent = usage(1200, 300)
    read = tool_calls_message([tool_call("read_file", {"path": "src/calc.py"})])
    runner.llm.enqueue(chat_response(read, usage=spent), delay=delay)
    review = {
        "body": "The fix is missing a test.",
        "comments": [{"path": "src/calc.py", "line": 2, "body": "Check for overflow."}],
    }
    runner.llm.enqueue(chat_response(tool_calls_message([tool_call("review_change", review)]), usage=spent))
    runner.llm.enqueue(
        chat_response({"role": "assistant", "content": "Reviewed: `src/calc.py:2` now adds."}, usage=spent)
    )


def cancel_mid_review(runner: Runner, env: dict[str, str]) -> tuple[str, str, int]:
    """`beam-bot action` on `/beam review`, sent SIGTERM while the model is slow to answer."""
    script_review(runner, delay=45)  # the model is slow: the job is cancelled while it waits
    action = subprocess.Popen(ACTION, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + WAIT
        while not (runner.llm.requests and any("⏳ Working on" in b for b in runner.bot_comments())):
            assert action.poll() is None, action.communicate()
            assert time.monotonic() < deadline, "the run never reached the model"
            time.sleep(0.1)
        action.send_signal(signal.SIGTERM)  # what a cancelled job's step gets after SIGINT
        stdout, stderr = action.communicate(timeout=WAIT)
    finally:
        if action.poll() is None:
            action.kill()
            action.communicate(timeout=WAIT)
    return stdout, stderr, action.returncode


def test_a_cancelled_job_leaves_the_tracking_comment_final_with_the_run_link(runner: Runner) -> None:
    env = runner.env("issue_comment", runner.command("/beam review"))
    summary, output = with_runner_files(env, runner.tmp, "cancel")
    link = f"{runner.git.url}/{REPO}/actions/runs/{env['GITHUB_RUN_ID']}"
    stdout, stderr, code = cancel_mid_review(runner, env)
    assert code == 128 + signal.SIGTERM, stdout + stderr
    assert "Traceback" not in stderr
    assert beam_lines(stderr) == [stderr.strip().splitlines()[-1]]
    assert "BEM-396" in stderr and "SIGTERM" in stderr
    [working] = runner.bot_comments()
    assert working.startswith("⏳ Working on")  # what the job left: "working" for ever, until now

    # The `if: always()` step: same job, same RUNNER_TEMP, `job.status` in BEAM_JOB_STATUS.
    finished = run({**env, "BEAM_JOB_STATUS": "cancelled"}, "--finish")

    assert finished.returncode == 0, finished.stdout + finished.stderr
    assert "Traceback" not in finished.stderr
    [final] = runner.bot_comments()  # the same comment, edited: none posted beside it
    assert not final.startswith("⏳") and "Working on" not in final
    assert "❌ `/beam review` failed (BEM-395)" in final
    assert "cancelled" in final and f"]({link})" in final
    assert "beam-run:" in final  # still the run's own comment (its marker kept)
    assert outputs(output)["outcome"] == "cancelled"
    assert link in summary.read_text(encoding="utf-8")

    # Once final, the step finds nothing more to do (a second run of it changes nothing).
    again = run({**env, "BEAM_JOB_STATUS": "cancelled"}, "--finish")
    assert again.returncode == 0 and "nothing was left working" in again.stdout
    assert runner.bot_comments() == [final]


def test_the_finish_step_leaves_a_finished_run_alone(runner: Runner) -> None:
    runner.llm.reply_text("`add` adds.")
    env = runner.env("issue_comment", runner.command("/beam ask what does add do?"))
    done = run(env)
    assert done.returncode == 0, done.stderr
    before = runner.bot_comments()

    finished = run({**env, "BEAM_JOB_STATUS": "success"}, "--finish")

    assert finished.returncode == 0, finished.stderr
    assert runner.bot_comments() == before and "`add` adds." in before[0]


def test_a_review_with_findings_writes_the_step_summary_and_outputs(runner: Runner) -> None:
    script_review(runner)
    env = runner.env("issue_comment", runner.command("/beam review"))
    env.update(BEAM_PRICE_INPUT_PER_MTOK="3", BEAM_PRICE_OUTPUT_PER_MTOK="15")
    summary, output = with_runner_files(env, runner.tmp, "review")

    done = run(env)

    assert done.returncode == 0, done.stderr
    [review] = runner.fake.reviews_on(REPO, NUMBER)
    [tracking] = runner.bot_comments()
    linked = re.search(r"\(\[the review\]\(([^)]+)\)\)", tracking)
    assert linked, tracking
    assert outputs(output) == {"outcome": "success", "review-url": linked.group(1), "findings": "1"}
    text = summary.read_text(encoding="utf-8")
    assert "issue_comment on octo/demo#7" in text and "**Outcome:** success" in text
    # The run's row: what it used, as the run's footer says it (three calls of 1,200 / 300 tokens).
    row = next(line for line in text.splitlines() if line.startswith("| `/beam review`"))
    assert "succeeded" in row and "3,600" in row and "900" in row
    assert "$0.0243" in row  # 3,600 x $3 + 900 x $15 per million tokens
    assert f"]({linked.group(1)})" in text
    assert "`src/calc.py:2`" in text and "Check for overflow." in text
    assert f"/actions/runs/{env['GITHUB_RUN_ID']})" in text
    assert review.body in runner.fake.reviews_on(REPO, NUMBER)[0].body


def test_a_model_that_refuses_the_key_is_named_on_the_last_line(runner: Runner) -> None:
    runner.llm.reply_error(401, "Incorrect API key provided: sk-wrong")
    runner.llm.reply_error(401, "Incorrect API key provided: sk-wrong")
    env = runner.env("issue_comment", runner.command("/beam review"))
    _, output = with_runner_files(env, runner.tmp, "401")

    done = run(env)

    assert done.returncode == 1
    last = (done.stdout + done.stderr).strip().splitlines()[-1]
    assert last == done.stderr.strip().splitlines()[-1]
    assert last.startswith("beam-bot action: `/beam review` failed (BEM-084)")
    assert "401" in last and "Incorrect API key provided" in last
    assert "BEM-393" not in done.stderr and "still queued" not in done.stderr
    assert outputs(output)["outcome"] == "failure"


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


@pytest.mark.parametrize("trouble", ["bad token", "GitHub down"])
def test_a_bad_token_or_github_down_is_one_line_without_a_traceback(runner: Runner, trouble: str) -> None:
    env = runner.env("issue_comment", runner.command("/beam review"))
    if trouble == "bad token":
        env["GITHUB_TOKEN"] = "ghs_not_a_token"
    else:
        down = f"http://127.0.0.1:{closed_port()}"
        env.update(GITHUB_API_URL=down, GITHUB_SERVER_URL=down)

    done = run(env)

    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    [line] = beam_lines(done.stdout + done.stderr)
    assert line == done.stderr.strip().splitlines()[-1]
    assert "BEM-394" in line
    if trouble == "bad token":
        assert "refused the job's token" in line
    assert runner.llm.requests == []

    # The `if: always()` step after it: nothing was left working, and it says so in one line.
    finished = run({**env, "BEAM_JOB_STATUS": "failure"}, "--finish")
    assert finished.returncode == 0 and "Traceback" not in finished.stderr
    assert len(beam_lines(finished.stdout + finished.stderr)) == 1


def test_ctrl_c_while_the_model_is_slow_is_one_line(runner: Runner) -> None:
    runner.llm.enqueue(chat_response({"role": "assistant", "content": "late"}), delay=45)
    env = runner.env("issue_comment", runner.command("/beam ask what does add do?"))
    action = subprocess.Popen(ACTION, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + WAIT
        while not runner.llm.requests:
            assert action.poll() is None, action.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.1)
        action.send_signal(signal.SIGINT)
        stdout, stderr = action.communicate(timeout=WAIT)
    finally:
        if action.poll() is None:
            action.kill()
            action.communicate(timeout=WAIT)
    assert action.returncode == 128 + signal.SIGINT
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr
    [line] = beam_lines(stdout + stderr)
    assert "SIGINT" in line and line == stderr.strip().splitlines()[-1]


def test_the_provider_input_sends_the_key_as_that_providers_with_its_model(runner: Runner) -> None:
    runner.llm.reply_text("`add` adds.")
    env = runner.env("issue_comment", runner.command("/beam ask what does add do?"))
    for name in ("BEAM_API_KEY", "BEAM_API_BASE_URL", "BEAM_MODEL"):
        env.pop(name)
    # As action.yml passes `with: {api-key: ..., provider: openai}`: the other inputs are "". The
    # base URL is the stand-in's (this machine reaches no real API); the model is OpenAI's default.
    env.update(
        BEAM_ACTION_API_KEY="sk-openai-key",
        BEAM_ACTION_PROVIDER="openai",
        BEAM_ACTION_API_BASE_URL=runner.llm.url,
        BEAM_ACTION_MODEL="",
    )

    done = run(env)

    assert done.returncode == 0, done.stdout + done.stderr
    [request] = runner.llm.requests
    assert request["model"] == "gpt-4.1-mini"
    assert runner.llm.received[0].headers.get("authorization") == "Bearer sk-openai-key"
    assert any("`add` adds." in body for body in runner.bot_comments())


def test_a_provider_the_action_does_not_know_is_refused_with_exit_2(runner: Runner) -> None:
    env = runner.env("issue_comment", runner.command("/beam review"))
    env.update(BEAM_ACTION_API_KEY="k", BEAM_ACTION_PROVIDER="opneai")

    done = run(env)

    assert done.returncode == 2
    [line] = beam_lines(done.stderr)
    assert "BEM-390" in line and "openai, anthropic, gemini, openrouter, groq" in line
    assert runner.bot_comments() == [] and runner.llm.requests == []


def test_the_finish_step_with_github_down_says_so_in_one_line_and_can_run_again(runner: Runner) -> None:
    env = runner.env("issue_comment", runner.command("/beam review"))
    _, _, code = cancel_mid_review(runner, env)
    assert code == 128 + signal.SIGTERM
    down = f"http://127.0.0.1:{closed_port()}"

    failed = run({**env, "BEAM_JOB_STATUS": "cancelled", "GITHUB_API_URL": down}, "--finish")

    assert failed.returncode == 1 and "Traceback" not in failed.stderr
    [line] = beam_lines(failed.stdout + failed.stderr)
    assert "BEM-395" in line and "could not be made final" in line
    [working] = runner.bot_comments()
    assert working.startswith("⏳ Working on")

    # GitHub is back (a re-run of the job's last step, or the sweep of a later run): it is made final.
    again = run({**env, "BEAM_JOB_STATUS": "cancelled"}, "--finish")
    assert again.returncode == 0, again.stderr
    [final] = runner.bot_comments()
    assert "(BEM-395)" in final and "cancelled" in final


def test_a_cancelled_automatic_review_gets_its_check_run_completed(tmp_path: Path) -> None:
    # The review job's `cancel-in-progress`: a newer push cancels the run reviewing the older head.
    with actions_runner(tmp_path) as runner:
        story = Story(cast(Any, runner))
        story.seed(AUTO)
        story.script_review([{"path": "src/calc.py", "line": LINE_F2, "body": "f2 subtracts."}], delay=45)
        env = runner.env("pull_request", pull_request_event(story, "opened"))
        action = subprocess.Popen(ACTION, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + WAIT
            while not (runner.llm.requests and story.checks()):
                assert action.poll() is None, action.communicate()
                assert time.monotonic() < deadline, "the review never reached the model"
                time.sleep(0.1)
            action.send_signal(signal.SIGTERM)
            _, stderr = action.communicate(timeout=WAIT)
        finally:
            if action.poll() is None:
                action.kill()
                action.communicate(timeout=WAIT)
        assert action.returncode == 128 + signal.SIGTERM and "Traceback" not in stderr
        assert [c.status for c in story.checks()] != ["completed"]  # left running by the stopped step

        finished = run({**env, "BEAM_JOB_STATUS": "cancelled"}, "--finish")

        assert finished.returncode == 0, finished.stdout + finished.stderr
        assert "Traceback" not in finished.stderr
        [check] = story.checks()
        assert check.status == "completed" and check.conclusion == "neutral"
        # The head's line says why the review ended: the job, not the review, was stopped.
        assert "the review failed (BEM-395: the workflow job ended before the run finished" in story.summary()
