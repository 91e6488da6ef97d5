"""`beam-bot run` end to end: the real command, a real git checkout, a local chat-completions server."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pygit2
import pytest

from tests.support.openai_server import FakeOpenAI, chat_response, text_message, usage, without_model_env


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
    env = without_model_env(os.environ)
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
    # One line says the answer is the prompt, and how to get a real model.
    first = result.stdout.splitlines()[0]
    assert "the prompt a real model would get" in first and "BEAM_API_KEY" in first
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
    # The question names the remote, the branch, the commit and its diff stat.
    work_refs = refs(work / ".git")
    commit = work_refs["refs/heads/fix-typo"]
    assert f"Push {commit[:12]} to branch fix-typo on origin ({origin})" in result.stdout
    assert "README.md | 2 +-" in result.stdout and "Allow? [y/N]" in result.stdout
    assert "⏸ waiting for approval" in result.stdout
    assert (
        result.stdout.splitlines()[-1] == f"→ 1 commit on branch fix-typo ({commit[:12]}), pushed to origin"
    )
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


def test_author_without_branch_keeps_its_commits_on_a_named_branch(checkout: tuple[Path, Path]) -> None:
    work, origin = checkout
    before = refs(origin)
    with FakeOpenAI() as llm:
        author_script(llm, "ignored")
        result = run_cli(["author", "--repo", str(work), "--deny", "fix the typo"], llm)
    assert result.returncode == 0, result.stderr
    made = {k: v for k, v in refs(work / ".git").items() if k.startswith("refs/heads/beam/author-")}
    assert len(made) == 1, refs(work / ".git")
    [(branch, tip)] = made.items()
    assert pygit2.Repository(str(work))[tip].message.strip() == "Fix the typo"
    name = branch.removeprefix("refs/heads/")
    assert result.stdout.splitlines()[-1].startswith(
        f"→ 1 commit on local branch {name} ({tip[:12]}), not pushed"
    )
    assert refs(origin) == before


def test_without_origin_the_branch_stays_local_and_nothing_is_asked(checkout: tuple[Path, Path]) -> None:
    work, _ = checkout
    git(work, "remote", "remove", "origin")
    with FakeOpenAI() as llm:
        author_script(llm, "fix-typo")
        result = run_cli(["author", "--repo", str(work), "--branch", "fix-typo", "fix it"], llm, "y\n")
    assert result.returncode == 0, result.stderr
    assert "Allow?" not in result.stdout
    assert "no `origin`; the commits stay on branch fix-typo" in result.stdout
    assert "refs/heads/fix-typo" in refs(work / ".git")
    assert result.stdout.splitlines()[-1].startswith("→ 1 commit on local branch fix-typo")


def test_done_counts_the_whole_run_across_the_approval(checkout: tuple[Path, Path]) -> None:
    work, _ = checkout
    with FakeOpenAI() as llm:
        llm.reply_tool_calls(
            ("write_file", {"path": "README.md", "body": "Hello world\n"}), usage=usage(100, 10)
        )
        llm.reply_tool_calls(
            ("git_add", {"path": "README.md"}), ("git_commit", {"message": "Fix"}), usage=usage(200, 20)
        )
        llm.reply_tool_calls(("git_push", {}), usage=usage(300, 30))  # resumed without the model
        result = run_cli(["author", "--repo", str(work), "--approve", "fix it"], llm)
    assert result.returncode == 0, result.stderr
    [done] = [line for line in result.stdout.splitlines() if line.startswith("✓ done")]
    assert done.startswith("✓ done (4 tool calls, 660 tokens"), done


def test_uncommitted_changes_are_named_or_reviewed_with_working_tree(checkout: tuple[Path, Path]) -> None:
    work, _ = checkout
    git(work, "checkout", "-qb", "feature")
    (work / "README.md").write_text("Hello world\n", encoding="utf-8")
    (work / "NEW.md").write_text("new\n", encoding="utf-8")
    status = git(work, "status", "--porcelain")
    result = run_cli(["review", "--repo", str(work), "--base", "main"], None)
    assert result.returncode == 2  # the committed change is empty: nothing to review
    assert "note: 2 uncommitted changes" in result.stderr and "--working-tree" in result.stderr

    result = run_cli(["review", "--repo", str(work), "--base", "main", "--working-tree"], None)
    assert result.returncode == 0, result.stderr
    assert "+Hello world" in result.stdout and "+new" in result.stdout  # the echo client shows the prompt
    assert git(work, "status", "--porcelain") == status  # the checkout and its index are as they were


def test_nothing_to_do_stops_before_any_model_call(checkout: tuple[Path, Path]) -> None:
    work, _ = checkout
    with FakeOpenAI() as llm:
        empty = run_cli(["review", "--repo", str(work), "--base", "HEAD"], llm)
        ask = run_cli(["ask", "--repo", str(work)], llm)
        author = run_cli(["author", "--repo", str(work), "  "], llm)
        assert llm.requests == []
    assert empty.returncode == 2 and "is empty: nothing to review" in empty.stderr
    assert ask.returncode == 2 and "ask needs a question" in ask.stderr
    assert author.returncode == 2 and "author needs instructions" in author.stderr
    assert "refs/heads/beam" not in " ".join(refs(work / ".git"))


def test_run_docs_writes_only_documentation(checkout: tuple[Path, Path]) -> None:
    work, _ = checkout
    with FakeOpenAI() as llm:
        llm.reply_tool_calls(("write_file", {"path": "docs/guide.md", "body": "# Guide\n"}))
        llm.reply_tool_calls(
            ("git_add", {"path": "docs/guide.md"}), ("git_commit", {"message": "Add a guide"})
        )
        llm.reply_text("Documented.")
        done = run_cli(["docs", "--repo", str(work), "--deny", "write a guide"], llm)
        assert "You write documentation only" in llm.requests[0]["messages"][-1]["content"]
        llm.reply_tool_calls(("write_file", {"path": "src/app.py", "body": "print(1)\n"}))
        llm.reply_text("Done.")
        refused = run_cli(["docs", "--repo", str(work), "--deny", "change the code"], llm)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1].startswith("→ 1 commit on local branch beam/docs-")
    assert "BEM-338" in refused.stdout + refused.stderr
    assert not (work / "src").exists()


def worktrees(work: Path) -> int:
    return git(work, "worktree", "list", "--porcelain").count("worktree ")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_removes_the_worktree_and_prints_one_line(
    checkout: tuple[Path, Path], sig: signal.Signals, tmp_path: Path
) -> None:
    work, _ = checkout
    # Files the change does not touch: a review never writes them anywhere (issue 43).
    for n in range(20):
        (work / f"unchanged-{n}.txt").write_text(f"{n}\n", encoding="utf-8")
    git(work, "add", ".")
    git(work, "commit", "-qm", "unchanged files")
    (work / "README.md").write_text("Hello world\n", encoding="utf-8")
    git(work, "commit", "-qam", "the change")
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    with FakeOpenAI() as llm:
        llm.enqueue(chat_response(text_message("late")), delay=30)
        env = without_model_env(os.environ)
        env.update(BEAM_API_KEY="test-key", BEAM_API_BASE_URL=llm.url, BEAM_MODEL="fake-model")
        env.update(TMPDIR=str(scratch))
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "bot.cli",
                "run",
                "review",
                "--repo",
                str(work),
                "--base",
                "HEAD~1",
                "look",
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 30
        while not llm.requests and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert llm.requests, "the run never called the model"
        # While the model thinks: no worktree was added, and on disk only the change's file.
        assert worktrees(work) == 1
        written = sorted(p.name for p in scratch.rglob("*") if p.is_file())
        assert written == ["README.md"]
        proc.send_signal(sig)
        _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 128 + sig.value, stderr
    assert "Traceback" not in stderr
    assert stderr.strip().splitlines() == [
        f"✗ stopped by {sig.name}{' (Ctrl-C)' if sig is signal.SIGINT else ''}: nothing was pushed, "
        "and the temporary worktree is removed"
    ]
    assert worktrees(work) == 1
    assert list(scratch.iterdir()) == []  # the scratch directory is gone too


def test_a_closed_pipe_prints_one_line_and_no_traceback(checkout: tuple[Path, Path]) -> None:
    work, _ = checkout
    with FakeOpenAI() as llm:
        llm.enqueue(chat_response(text_message("x" * 200 + "\n" * 0 + "\n".join(["line"] * 50_000))), delay=1)
        env = without_model_env(os.environ)
        env.update(BEAM_API_KEY="test-key", BEAM_API_BASE_URL=llm.url, BEAM_MODEL="fake-model")
        command = (
            f"{shlex.quote(sys.executable)} -m bot.cli run ask --repo {shlex.quote(str(work))} why | head -1"
        )
        done = subprocess.run(
            ["bash", "-c", command + "; exit ${PIPESTATUS[0]}"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr, done.stderr
    assert done.stderr.strip().splitlines() == [
        "✗ stopped: the output pipe was closed, and the temporary worktree is removed"
    ]
    assert done.returncode == 141
    assert worktrees(work) == 1
