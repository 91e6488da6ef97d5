"""Ctrl-C at each stage of each terminal command, typed into a pseudo-terminal against the real
`beam-bot` process (tests/support/terminal.py): one line, exit code 130, never a traceback, and
nothing left in the temporary directory (TMPDIR is a fresh one) or in the checkout's worktrees.

Each stage is held where it really waits, so the Ctrl-C lands inside it: a module of the run loading
slowly (a `sitecustomize` import hook on PYTHONPATH), git fetching (the git server holds the request)
or adding the worktree (a `post-checkout` hook in the checkout that waits), the model thinking (a
delayed reply), and the post in flight (the fake GitHub holds it, then carries it out as GitHub
does, so the stop line must not claim that nothing was posted).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.openai_server import chat_response, text_message
from tests.support.pull_request_stack import NUMBER, REPO, URL, Stack, pull_request_stack
from tests.support.terminal import Terminal, screen_lines

COMMANDS = ("run", "review", "summarize", "ask", "check-model")
STAGES = ("imports", "checkout", "model", "posting")
# `run` posts nothing (its push is asked first, and Ctrl-C at that question is
# tests/local/test_terminal.py's); `check-model` only loads and asks.
NOT_THERE = {("run", "posting"), ("check-model", "checkout"), ("check-model", "posting")}
CASES = [(command, stage) for command in COMMANDS for stage in STAGES if (command, stage) not in NOT_THERE]
HOLD = 30.0  # how long a held stage waits at most: far past every Ctrl-C, short of a hung test


def slow_module(command: str) -> str:
    """A module the command loads after it read its arguments: the imports Ctrl-C can land in."""
    return "bot.local.check_model" if command == "check-model" else "bot.local.change_run"


SITECUSTOMIZE = f"""
import os, sys, time

class _Slow:
    def find_spec(self, name, path=None, target=None):
        if name == os.environ.get("TEST_SLOW_IMPORT"):
            sys.stderr.write("loading " + name + "\\n")
            sys.stderr.flush()
            time.sleep({HOLD})
        return None

sys.meta_path.insert(0, _Slow())
"""


def git(cwd: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t"}
    env.update(GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t")
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout


def checkout(root: Path, held: Path) -> Path:
    """A checkout with a change to describe, whose `post-checkout` hook (run by `git worktree add`)
    marks `held` and waits."""
    work = root / "work"
    git(root, "init", "-q", "-b", "main", str(work))
    (work / "README.md").write_text("Helo world\n", encoding="utf-8")
    git(work, "add", ".")
    git(work, "commit", "-qm", "first commit")
    (work / "README.md").write_text("Hello world\n", encoding="utf-8")
    git(work, "commit", "-qam", "fix the greeting")
    hook = work / ".git" / "hooks" / "post-checkout"
    hook.write_text(f"#!/bin/sh\ntouch '{held}'\nsleep {HOLD:g}\n", encoding="utf-8")
    hook.chmod(0o755)
    return work


def wait_for(what: str, done: Callable[[], bool], term: Terminal) -> None:
    deadline = time.monotonic() + HOLD
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError(f"never {what}; the terminal showed:\n{term.text}")
        term.read_for(0.05)


def argv(command: str, stage: str, work: Path) -> list[str]:
    if command == "check-model":
        return [command]
    if command == "run":
        skill = (
            ["author", "--branch", "beam/t", "add a line"] if stage == "checkout" else ["commit-notes", "n"]
        )
        return ["run", skill[0], "--repo", str(work), *skill[1:]]
    question = ["what changed?"] if command == "ask" else []
    return [command, URL, *question, "--post"]


def script(stack: Stack, command: str, stage: str) -> None:
    if command == "check-model":  # its calls are the ones to hold, not answered as a start check is
        stack.llm.answers_checks = False
    if stage == "model":
        stack.llm.enqueue(chat_response(text_message("late")), delay=HOLD)
    elif stage == "posting" and command == "review":
        stack.script_review()
    elif stage == "posting":
        stack.llm.reply_text("It makes add add.")
    if stage == "posting":  # held, then carried out: GitHub does not undo a request whose client left
        stack.fake.inject(
            "POST", rf"/issues/{NUMBER}/comments$|/pulls/{NUMBER}/reviews$", status=None, delay=2
        )


@pytest.mark.parametrize(("command", "stage"), CASES)
def test_ctrl_c_at_each_stage_of_each_command_is_one_line_and_130(
    tmp_path: Path, command: str, stage: str
) -> None:
    fresh, hooks, held = tmp_path / "tmp", tmp_path / "hooks", tmp_path / "held"
    fresh.mkdir()
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")
    work = checkout(tmp_path, held)
    release = threading.Event()

    def hold_fetch() -> None:
        if stage == "checkout" and command != "run":
            held.touch()
            release.wait(HOLD)

    with pull_request_stack(tmp_path / "stack", hold_fetch) as stack:
        script(stack, command, stage)
        env = stack.env(TMPDIR=str(fresh), TERM="xterm")
        if stage == "imports":
            env.update(PYTHONPATH=str(hooks), TEST_SLOW_IMPORT=slow_module(command))
        try:
            with Terminal([sys.executable, "-m", "bot.cli", *argv(command, stage, work)], env) as term:
                if stage == "imports":
                    term.expect(f"loading {re.escape(slow_module(command))}")
                elif stage == "checkout":
                    wait_for("reached the checkout", held.exists, term)
                elif stage == "model":
                    wait_for("asked the model", lambda: bool(stack.llm.requests), term)
                else:
                    wait_for("posted", lambda: any(c.method == "POST" for c in stack.fake.calls), term)
                term.ctrl_c()
                code = term.wait(timeout=HOLD)
        finally:
            release.set()
        posted = stack.fake.reviews_on(REPO, NUMBER) + stack.fake.comments_on(REPO, NUMBER)

    assert code == 130, term.text
    assert "Traceback" not in term.text
    shown = [line.removeprefix("^C") for line in screen_lines(term.text)]  # the terminal echoes Ctrl-C
    said = [line for line in shown if line.startswith(("beam-bot", "✗"))]
    assert len(said) == 1 and "stopped by SIGINT (Ctrl-C)" in said[0], term.text
    if stage == "posting":
        what = "review" if command == "review" else "comment"
        assert f"while posting: the {what} may be on the pull request" in said[0], said
    elif stage != "imports" and command in ("review", "summarize", "ask"):
        assert "nothing was posted" in said[0] and posted == [], said
    assert list(fresh.iterdir()) == [], "the command left a temporary directory behind"
    assert git(work, "worktree", "list", "--porcelain").count("worktree ") == 1
