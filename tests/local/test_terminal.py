"""`beam-bot run` on a terminal: the live line while the model works, plain text on a pipe, and
Ctrl-C at each stage, typed into a pseudo-terminal as a person types it (tests/support/terminal.py).

Every stop must leave one line, the exit code 130 and an empty temporary directory (TMPDIR points at
a fresh one), whatever the run was doing.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.openai_server import FakeOpenAI, chat_response, text_message, usage, without_model_env
from tests.support.terminal import Terminal, screen_lines


def git(cwd: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t"}
    env.update(GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t")
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout


@pytest.fixture(name="work")
def work_fixture(tmp_path: Path) -> Path:
    """A checkout on `main` with a second commit, so the change to review or describe is not empty."""
    work = tmp_path / "work"
    git(tmp_path, "init", "-q", "-b", "main", str(work))
    (work / "README.md").write_text("Helo world\n", encoding="utf-8")
    git(work, "add", ".")
    git(work, "commit", "-qm", "first commit")
    (work / "README.md").write_text("Hello world\n", encoding="utf-8")
    git(work, "commit", "-qam", "fix the greeting")
    return work


@pytest.fixture(name="tmpdir_env")
def tmpdir_env_fixture(tmp_path: Path) -> Path:
    """A fresh TMPDIR: what a run leaves behind in it is visible."""
    fresh = tmp_path / "tmp"
    fresh.mkdir()
    return fresh


def cli_env(llm: FakeOpenAI | None, tmpdir: Path, **extra: str) -> dict[str, str]:
    env = without_model_env(os.environ)
    if llm is not None:
        env.update(BEAM_API_KEY="test-key", BEAM_API_BASE_URL=llm.url, BEAM_MODEL="fake-model")
    env.update(TMPDIR=str(tmpdir), TERM="xterm", **extra)
    return env


def beam_bot(*args: str) -> list[str]:
    return [sys.executable, "-m", "bot.cli", *args]


def test_the_live_line_moves_while_a_slow_model_answers(work: Path, tmpdir_env: Path) -> None:
    with FakeOpenAI() as llm:
        llm.reply_tool_calls(("git_status", {}), usage=usage(100, 7))
        llm.enqueue(chat_response(text_message("Fix the greeting."), usage=usage(120, 3)), delay=3.5)
        argv = beam_bot("run", "commit-notes", "--repo", str(work), "notes please")
        with Terminal(argv, cli_env(llm, tmpdir_env)) as term:
            # The second call is in flight: the line counts it, with the first call's tokens.
            term.expect(r"⋯ 1 s · model call 2 · 107 tokens so far", timeout=30)
            term.expect(r"⋯ 2 s · model call 2 · 107 tokens so far", timeout=10)
            code = term.wait(timeout=30)
    assert code == 0, term.text
    # Redrawn in place on the terminal (a carriage return and an erase), and erased at the end.
    assert "\r\x1b[K⋯ " in term.text
    shown = screen_lines(term.text)
    assert not any(line.startswith("⋯") for line in shown), shown
    assert "  · git_status {}" in shown
    assert any(line.startswith("✓ done (1 tool calls, 230 tokens") for line in shown), shown
    assert list(tmpdir_env.iterdir()) == []


def test_the_live_line_counts_the_tokens_a_streaming_model_writes(work: Path, tmpdir_env: Path) -> None:
    answer = " ".join(["Fix the greeting: the README said Helo."] * 4)
    with FakeOpenAI() as llm:
        llm.enqueue(chat_response(text_message(answer), usage=usage(120, 41)), chunk_delay=0.15)
        argv = beam_bot("run", "commit-notes", "--repo", str(work), "notes please")
        with Terminal(argv, cli_env(llm, tmpdir_env)) as term:
            first = term.expect(r"⋯ \d+ s · model call 1 · (\d+) tokens streamed", timeout=30)
            later = term.expect(rf"⋯ \d+ s · model call 1 · (?!{first.group(1)}\b)(\d+) tokens streamed")
            code = term.wait(timeout=30)
    assert code == 0, term.text
    assert int(later.group(1)) > int(first.group(1))
    assert llm.requests[0]["stream"] is True
    shown = screen_lines(term.text)
    assert answer in shown and any(line.startswith("✓ done (0 tool calls, 161 tokens") for line in shown)
    assert list(tmpdir_env.iterdir()) == []


def test_the_live_line_is_plain_text_when_stdout_is_not_a_terminal(work: Path, tmpdir_env: Path) -> None:
    # 30 events 0.4 s apart: the answer streams for 12 s, past the plain line's 10 s.
    answer = " ".join(["Fix the greeting."] * 6)
    with FakeOpenAI() as llm:
        llm.enqueue(chat_response(text_message(answer), usage=usage(120, 3)), chunk_delay=0.4)
        done = subprocess.run(
            beam_bot("run", "commit-notes", "--repo", str(work), "notes please"),
            env=cli_env(llm, tmpdir_env),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert done.returncode == 0, done.stderr
    assert "\r" not in done.stdout and "\x1b" not in done.stdout
    lines = done.stdout.splitlines()
    plain = [
        i
        for i, line in enumerate(lines)
        if re.fullmatch(r"⋯ 10 s · model call 1 · \d+ tokens streamed", line)
    ]
    assert len(plain) == 1, lines
    assert plain[0] < lines.index(answer)


def test_a_summary_is_shown_as_text_and_json_keeps_its_markup(work: Path, tmpdir_env: Path) -> None:
    summary = "# Summary\n\nFixes the **greeting** in `README.md`.<!-- beam:x -->\n\n```\nHello world\n```"
    with FakeOpenAI() as llm:
        llm.reply_text(summary)
        llm.reply_text(summary)
        human, as_json = (
            subprocess.run(
                beam_bot("run", "summarize", "--repo", str(work), *extra),
                env=cli_env(llm, tmpdir_env),
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
            for extra in ([], ["--json"])
        )
    assert human.returncode == 0 and as_json.returncode == 0, human.stderr + as_json.stderr
    assert "\nSummary\n=======\n\nFixes the greeting in README.md.\n\n    Hello world\n" in human.stdout
    frames = [json.loads(line) for line in as_json.stdout.splitlines()]
    chunks = [frame["data"]["content"][0]["text"] for frame in frames if frame["type"] == "chunk"]
    assert chunks == [summary]


def test_json_frames_carry_no_live_line(work: Path, tmpdir_env: Path) -> None:
    with FakeOpenAI() as llm:
        llm.enqueue(chat_response(text_message("Fix the greeting.")), delay=1.5)
        argv = beam_bot("run", "commit-notes", "--repo", str(work), "--json", "notes please")
        with Terminal(argv, cli_env(llm, tmpdir_env)) as term:
            code = term.wait(timeout=30)
    assert code == 0, term.text
    assert "⋯" not in term.text


def stopped_line(text: str) -> list[str]:
    return [line for line in screen_lines(text) if "stopped" in line]


@pytest.mark.parametrize("stage", ["starting", "model thinking", "approval question"])
def test_ctrl_c_at_each_stage_of_run_is_one_line_and_130(work: Path, tmpdir_env: Path, stage: str) -> None:
    with FakeOpenAI() as llm:
        if stage == "approval question":
            skill = ["author", "--branch", "beam/t", "push it"]
            llm.reply_tool_calls(("git_push", {"branch": "beam/t"}))
        else:
            skill = ["commit-notes", "notes please"]
            llm.enqueue(chat_response(text_message("late")), delay=30)
        git(work, "remote", "add", "origin", str(work))  # a push is asked for only with an origin
        argv = beam_bot("run", skill[0], "--repo", str(work), *skill[1:])
        with Terminal(argv, cli_env(llm, tmpdir_env)) as term:
            if stage == "starting":
                term.read_for(0.3)  # Python runs; the run's own modules are still loading
            elif stage == "model thinking":
                term.expect(r"⋯ 1 s · model call 1")
            else:
                term.expect(r"Allow\? \[y/N\]")
            term.ctrl_c()
            code = term.wait(timeout=30)
    assert code == 130, term.text
    assert "Traceback" not in term.text
    lines = stopped_line(term.text)
    assert len(lines) == 1 and "SIGINT (Ctrl-C)" in lines[0], term.text
    assert list(tmpdir_env.iterdir()) == [], "the run left a temporary directory behind"
    assert git(work, "worktree", "list", "--porcelain").count("worktree ") == 1


@pytest.mark.parametrize(
    "setting", ["BEAM_MODEL_TIMEOUT=-1", "BEAM_MODEL_EXTRA_BODY=nope", "BEAM_MODEL_MAX_TOKENS=0"]
)
def test_a_run_stopped_by_a_model_setting_leaves_no_temporary_directory(
    work: Path, tmpdir_env: Path, setting: str
) -> None:
    name, value = setting.split("=", 1)
    done = subprocess.run(
        beam_bot("run", "review", "--repo", str(work)),
        env=cli_env(None, tmpdir_env, BEAM_API_KEY="k", **{name: value}),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert f"(BEM-042): {name}" in done.stderr
    assert list(tmpdir_env.iterdir()) == []


@pytest.mark.parametrize("failure", ["bad key", "outage", "refused"])
def test_a_bad_key_an_outage_or_a_refused_call_is_one_failure_and_no_traceback(
    work: Path, tmpdir_env: Path, failure: str
) -> None:
    with FakeOpenAI() as llm:
        if failure == "bad key":
            llm.reply_error(401, "Incorrect API key provided")
            env = cli_env(llm, tmpdir_env)
        elif failure == "refused":
            llm.reply_error(400, "This model does not do that")
            env = cli_env(llm, tmpdir_env)
        else:
            env = cli_env(llm, tmpdir_env, BEAM_API_BASE_URL="http://127.0.0.1:9/v1")
        done = subprocess.run(
            beam_bot("run", "commit-notes", "--repo", str(work), "notes please"),
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    failed = [line for line in done.stderr.splitlines() if line.startswith("✗")]
    assert len(failed) == 1, done.stderr
    assert list(tmpdir_env.iterdir()) == []
