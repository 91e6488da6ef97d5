"""`beam-bot run` end to end: the real command, a real git checkout, a local chat-completions server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pygit2
import pytest

from tests.support.openai_server import FakeOpenAI, usage


def git(cwd: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout


@pytest.fixture(name="checkout")
def checkout_fixture(tmp_path: Path) -> tuple[Path, Path]:
    """A working checkout on `main` whose origin is a local bare repository."""
    origin = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(origin))
    work = tmp_path / "work"
    git(tmp_path, "clone", "-q", str(origin), str(work))
    (work / "README.md").write_text("Helo world\n", encoding="utf-8")
    git(work, "add", ".")
    git(work, "commit", "-qm", "first commit")
    git(work, "push", "-q", "origin", "main")
    return work, origin


def run_cli(
    args: list[str], llm: FakeOpenAI | None, stdin: str = "", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    extra = env or {}
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BEAM_", "GFS_BEAM_", "NVIDIA_"))}
    if llm is not None:
        env.update(BEAM_API_KEY="test-key", BEAM_API_BASE_URL=llm.url, BEAM_MODEL="fake-model")
    env.update(extra)
    return subprocess.run(
        [sys.executable, "-m", "bot.cli", "run", *args],
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def refs(bare: Path) -> dict[str, str]:
    repo = pygit2.Repository(str(bare))
    return {
        name: str(repo.references[name].target) for name in repo.references if name.startswith("refs/heads/")
    }


def test_echo_client_without_a_key(checkout: tuple[Path, Path]) -> None:
    work, _ = checkout
    git(work, "config", "user.name", "maintainer")
    result = run_cli(["review", "--repo", str(work), "look at the last commit"], None)
    assert result.returncode == 0, result.stderr
    assert "using the echo client" in result.stdout
    # The echo client echoes the prompt, which carries the request and the change, as on GitHub.
    assert "Echo: Request from @maintainer: look at the last commit" in result.stdout
    assert "+Helo world" in result.stdout
    assert "✓ done (0 tool calls, 0 tokens)" in result.stdout
    assert "The model answered in plain text instead of calling `review_change`" in result.stdout


def test_review_runs_tool_calls_end_to_end(checkout: tuple[Path, Path]) -> None:
    work, _ = checkout
    with FakeOpenAI() as llm:
        llm.reply_tool_calls(("list_tree", {}))
        llm.reply_tool_calls(("git_log", {"limit": 5}), ("read_file", {"path": "README.md"}))
        llm.reply_text("README.md has a typo: Helo.")
        result = run_cli(["review", "--repo", str(work), "look at the last commit"], llm)
        assert result.returncode == 0, result.stderr
        lines = result.stdout.splitlines()
        assert "  · list_tree {}" in lines
        assert '  · read_file {"path":"README.md"}' in lines
        assert "README.md has a typo: Helo." in lines
        assert any(line.startswith("✓ done (3 tool calls,") for line in lines)
        # The model saw the tool results, and the review skill's allowlist only, as `/beam review`.
        last = llm.requests[-1]
        tool_messages = [m for m in last["messages"] if m["role"] == "tool"]
        assert any("Helo world" in m["content"] for m in tool_messages)
        assert {t["function"]["name"] for t in last["tools"]} == {
            "list_tree",
            "read_file",
            "git_diff",
            "git_log",
            "get_page",
            "review_change",
        }


def test_json_lines_are_wire_frames(checkout: tuple[Path, Path]) -> None:
    work, _ = checkout
    with FakeOpenAI() as llm:
        llm.reply_tool_calls(("git_status", {}), usage=usage(100, 7))
        llm.reply_text("Clean.", usage=usage(120, 3))
        result = run_cli(["commit-notes", "--repo", str(work), "--json", "notes please"], llm)
    assert result.returncode == 0, result.stderr
    frames = [json.loads(line) for line in result.stdout.splitlines()]
    assert [f["type"] for f in frames] == ["placeholder", "thinking", "tool", "chunk", "done"]
    assert frames[-1]["result"]["model_used"] == "fake-model"
    assert frames[-1]["result"]["token_usage"] == {
        "prompt_tokens": 220,
        "completion_tokens": 10,
        "total_tokens": 230,
    }


def author_script(llm: FakeOpenAI, push_ref: str) -> None:
    llm.reply_tool_calls(("write_file", {"path": "README.md", "body": "Hello world\n"}))
    llm.reply_tool_calls(("git_add", {"path": "README.md"}), ("git_commit", {"message": "Fix the typo"}))
    llm.reply_tool_calls(("git_push", {"ref": push_ref}))


def test_author_push_waits_for_approval_and_then_pushes(checkout: tuple[Path, Path]) -> None:
    work, origin = checkout
    before = refs(origin)
    with FakeOpenAI() as llm:
        author_script(llm, "fix-typo")
        result = run_cli(["author", "--repo", str(work), "--branch", "fix-typo", "fix the typo"], llm, "y\n")
    assert result.returncode == 0, result.stdout + result.stderr
    assert 'The agent wants to run git_push {"ref": "fix-typo"}. Allow? [y/N]' in result.stdout
    assert "⏸ waiting for approval" in result.stdout
    after = refs(origin)
    assert after["refs/heads/main"] == before["refs/heads/main"]
    pushed = pygit2.Repository(str(origin))[after["refs/heads/fix-typo"]]
    assert pushed.message.strip() == "Fix the typo"
    # The resume ran the stored push without asking the model again.
    assert len(llm.requests) == 3


def test_denied_push_sends_nothing(checkout: tuple[Path, Path]) -> None:
    work, origin = checkout
    before = refs(origin)
    with FakeOpenAI() as llm:
        author_script(llm, "fix-typo")
        result = run_cli(["author", "--repo", str(work), "--branch", "fix-typo", "--deny", "fix it"], llm)
    assert result.returncode == 0, result.stderr
    assert "git_push denied: nothing was run" in result.stdout
    assert refs(origin) == before


@pytest.mark.parametrize("ref", ["main", "refs/heads/main", "HEAD:main", "+main", "MASTER"])
def test_protected_push_is_refused_even_when_approved(checkout: tuple[Path, Path], ref: str) -> None:
    work, origin = checkout
    before = refs(origin)
    with FakeOpenAI() as llm:
        author_script(llm, ref)
        result = run_cli(["author", "--repo", str(work), "--branch", "fix-typo", "--approve", "fix it"], llm)
    assert result.returncode == 1
    # The error, and the run's final line, are on stderr.
    assert "BEM-328" in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("✗ failed: ") and "BEM-328" in last
    assert refs(origin) == before


def test_unknown_skill_is_a_usage_error(checkout: tuple[Path, Path]) -> None:
    work, _ = checkout
    result = run_cli(["deploy", "--repo", str(work), "go"], None)
    assert result.returncode == 2
    assert "unknown skill 'deploy'" in result.stderr
    assert result.stdout == ""
