"""`beam-bot` as an operator meets it: --version, `run`'s guard rails, `pending`, clear start errors."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import tomllib
import urllib.request
from pathlib import Path

import pytest

from tests.local.test_run import checkout_fixture, git, run_cli  # noqa: F401 - the fixture, by its name
from tests.support.openai_server import FakeOpenAI, chat_response, text_message, without_model_env
from tests.support.terminal import Terminal, screen_lines

ROOT = Path(__file__).resolve().parent.parent


def clean_env(**values: str) -> dict[str, str]:
    env = without_model_env(os.environ)
    env.update(values)
    return env


def beam_bot(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bot.cli", *args],
        env=clean_env(**env),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def test_version() -> None:
    result = beam_bot("--version")
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert (result.returncode, result.stdout.strip()) == (0, f"beam-bot {version}")


# --- beam-bot run -----------------------------------------------------------------------------------


def test_run_refuses_a_missing_path_and_a_directory_that_is_not_git(tmp_path: Path) -> None:
    missing = run_cli(["review", "--repo", str(tmp_path / "nope"), "look"], None)
    assert missing.returncode == 2
    assert missing.stderr.strip() == f"beam-bot run: {tmp_path / 'nope'}: no such directory"
    plain = tmp_path / "plain"
    plain.mkdir()
    not_git = run_cli(["review", "--repo", str(plain), "look"], None)
    assert not_git.returncode == 2
    assert not_git.stderr.strip() == f"beam-bot run: {plain} is not a git repository (or a checkout of one)"
    assert missing.stdout == not_git.stdout == ""


def test_unknown_skill_lists_what_this_host_can_run(checkout: tuple[Path, Path]) -> None:
    work, _ = checkout
    result = run_cli(["deploy", "--repo", str(work), "go"], None)
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "beam-bot run: unknown skill 'deploy'; choose from review, summarize, commit-notes, ask, author, docs"
    )
    # No host here provides publish_docset, so gfs-publish is neither offered nor accepted.
    publish = run_cli(["gfs-publish", "--repo", str(work), "go"], None)
    assert publish.returncode == 2 and "unknown skill 'gfs-publish'" in publish.stderr


def test_ask_is_the_github_command_name(checkout: tuple[Path, Path]) -> None:
    work, _ = checkout
    with FakeOpenAI() as llm:
        llm.reply_tool_calls(("get_page", {"path": "README.md"}))
        llm.reply_text("It says Helo world.")
        result = run_cli(["ask", "--repo", str(work), "what does the README say?"], llm)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1].startswith("✓ done (1 tool calls,")
    # `ask` is the consume skill with the tools `/beam ask` gets: the host's search and get_page.
    tools = {t["function"]["name"] for t in llm.requests[0]["tools"]}
    assert tools == {"search", "get_page"}
    page = next(m for m in llm.requests[1]["messages"] if m["role"] == "tool")
    assert "Helo world" in page["content"]


def test_run_never_touches_the_users_checkout(checkout: tuple[Path, Path]) -> None:
    work, origin = checkout
    (work / "README.md").write_text("my unsaved edit\n", encoding="utf-8")
    (work / "notes.txt").write_text("untracked\n", encoding="utf-8")
    status_before = git(work, "status", "--porcelain")
    with FakeOpenAI() as llm:
        llm.reply_tool_calls(("write_file", {"path": "README.md", "body": "Hello world\n"}))
        llm.reply_tool_calls(("git_add", {"path": "README.md"}), ("git_commit", {"message": "Fix"}))
        llm.reply_tool_calls(("git_push", {"ref": "fix-typo"}))
        llm.reply_text("Pushed.")
        result = run_cli(["author", "--repo", str(work), "--branch", "fix-typo", "--approve", "fix it"], llm)
    assert result.returncode == 0, result.stderr
    assert git(work, "symbolic-ref", "HEAD").strip() == "refs/heads/main"
    assert (work / "README.md").read_text(encoding="utf-8") == "my unsaved edit\n"
    assert git(work, "status", "--porcelain") == status_before
    assert len(git(work, "worktree", "list").splitlines()) == 1  # the temporary worktree is gone
    # The run started from the commit, not from the unsaved edit, and its push arrived.
    assert git(origin, "show", "fix-typo:README.md") == "Hello world\n"
    assert "working in a temporary worktree at HEAD" in result.stdout


def test_ref_chooses_the_commit(checkout: tuple[Path, Path]) -> None:
    work, _ = checkout
    (work / "README.md").write_text("Second version\n", encoding="utf-8")
    git(work, "commit", "-qam", "second")
    with FakeOpenAI() as llm:
        llm.reply_tool_calls(("read_file", {"path": "README.md"}))
        llm.reply_text("ok")
        result = run_cli(["review", "--repo", str(work), "--ref", "HEAD~1", "look"], llm)
    assert result.returncode == 0, result.stderr
    tool_results = [m["content"] for m in llm.requests[-1]["messages"] if m["role"] == "tool"]
    assert any("Helo world" in content for content in tool_results)
    assert not any("Second version" in content for content in tool_results)
    bad = run_cli(["review", "--repo", str(work), "--ref", "no-such-ref", "look"], None)
    assert bad.returncode == 2 and "--ref 'no-such-ref' is not a commit" in bad.stderr


def test_frames_are_printed_as_they_happen(checkout: tuple[Path, Path], tmp_path: Path) -> None:
    work, _ = checkout
    scratch = tmp_path / "tmp"  # the run's own TMPDIR: what it leaves behind is seen, not left in /tmp
    scratch.mkdir()
    with FakeOpenAI() as llm:
        llm.reply_tool_calls(("list_tree", {}))
        # The model's second answer takes long: the tool frame must be on stdout before it comes.
        llm.enqueue(chat_response(text_message("late")), delay=60)
        env = clean_env(BEAM_API_KEY="k", BEAM_API_BASE_URL=llm.url, BEAM_MODEL="m", TMPDIR=str(scratch))
        process = subprocess.Popen(
            [sys.executable, "-m", "bot.cli", "run", "review", "--repo", str(work), "look"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        try:
            assert process.stdout is not None
            seen: list[str] = []
            while not any(line.startswith("  · list_tree") for line in seen):
                line = process.stdout.readline()
                assert line, f"stdout closed early: {seen}"
                seen.append(line)
            assert process.poll() is None  # still waiting for the model: the frame was not buffered
            # Stopped as a person stops it (Ctrl-C), not killed: a killed run cannot remove its
            # temporary directory, and a stopped one must.
            process.send_signal(signal.SIGINT)
            assert process.wait(30) == 130
        finally:
            if process.poll() is None:
                process.kill()
                process.wait(10)
            if process.stdout is not None:
                process.stdout.close()
    assert list(scratch.iterdir()) == []


# --- beam-bot pending ---------------------------------------------------------------------------------


def test_pending_reads_the_configured_work_dir_and_never_creates_a_database(tmp_path: Path) -> None:
    work = tmp_path / "somewhere"
    result = beam_bot("pending", BEAM_WORK_DIR=str(work))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == (
        f"no database at {work / 'beam.db'} (BEAM_WORK_DIR is {work}): no held pushes."
    )
    assert not work.exists()


def test_pending_says_which_database_it_read(tmp_path: Path) -> None:
    work = tmp_path / "work"
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "bot.cli", "serve", "--port", str(port)],
        env=clean_env(BEAM_WORK_DIR=str(work)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while not healthy(port):
            assert time.monotonic() < deadline and server.poll() is None
            time.sleep(0.05)
    finally:
        server.terminate()
        server.wait(30)
    result = beam_bot("pending", BEAM_WORK_DIR=str(work))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        f"Held pushes in SQLite database {work / 'beam.db'}:",
        "No held pushes.",
    ]


def serve_first_line(tmp_path: Path, **model: str) -> str:
    """What `beam-bot serve` prints first, once it answers /healthz."""
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "bot.cli", "serve", "--port", str(port)],
        env=clean_env(BEAM_WORK_DIR=str(tmp_path / "work"), **model),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not healthy(port):
            assert time.monotonic() < deadline and server.poll() is None
            time.sleep(0.05)
    finally:
        server.terminate()
        out, _ = server.communicate(timeout=30)
    return out.splitlines()[0]


def test_serve_says_the_model_check_in_one_line_at_start(tmp_path: Path) -> None:
    """Issue 42: a wrong key shows when the server starts, not at the first pull request."""
    with FakeOpenAI(structured=True) as llm:
        line = serve_first_line(tmp_path, BEAM_API_KEY="k", BEAM_API_BASE_URL=llm.url, BEAM_MODEL="qwen")
    assert line == f"model: qwen at 127.0.0.1:{llm.port}: key ok, tools native, structured output yes"
    assert len(llm.checks) == 2 and llm.requests == []
    with FakeOpenAI(api_key="the-right-one") as llm:
        line = serve_first_line(tmp_path, BEAM_API_KEY="k", BEAM_API_BASE_URL=llm.url, BEAM_MODEL="qwen")
    assert line.startswith(f"model: qwen at 127.0.0.1:{llm.port}: ✗ key: refused by ")
    assert "Fix: set BEAM_API_KEY to a valid key" in line
    line = serve_first_line(tmp_path)
    assert line.startswith("model: none (no key set): the echo model answers")


# --- start-up errors ------------------------------------------------------------------------------


def one_clear_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("beam-bot: ")
    return lines[0]


@pytest.mark.parametrize("command", ["serve", "worker"])
def test_a_bad_database_url_is_one_line(tmp_path: Path, command: str) -> None:
    line = one_clear_line(beam_bot(command, BEAM_WORK_DIR=str(tmp_path), BEAM_DATABASE_URL="mysql://db/x"))
    assert "BEAM_DATABASE_URL: unsupported database 'mysql'" in line


def test_an_unreachable_postgresql_is_one_line(tmp_path: Path) -> None:
    port = free_port()
    url = f"postgresql://beam:s3cret@127.0.0.1:{port}/beam"
    line = one_clear_line(beam_bot("serve", BEAM_WORK_DIR=str(tmp_path), BEAM_DATABASE_URL=url))
    assert f"cannot open the database postgresql+asyncpg://beam:***@127.0.0.1:{port}/beam" in line
    assert "s3cret" not in line


def test_an_unwritable_work_dir_is_one_line(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory\n")
    line = one_clear_line(beam_bot("serve", BEAM_WORK_DIR=str(blocker / "work")))
    assert line.startswith(f"beam-bot: BEAM_WORK_DIR: cannot write to {blocker / 'work'}")


def test_a_port_in_use_is_one_line(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        line = one_clear_line(beam_bot("serve", "--port", str(port), BEAM_WORK_DIR=str(tmp_path)))
    assert line == (
        f"beam-bot: port {port} on 127.0.0.1 is already in use: stop the other server or choose "
        "another port with --port or BEAM_PORT"
    )


def test_a_bad_setting_names_its_variable_once(tmp_path: Path) -> None:
    result = beam_bot("serve", BEAM_WORK_DIR=str(tmp_path), BEAM_APP_ID="1", BEAM_WEBHOOK_SECRET="short")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "  BEAM_WEBHOOK_SECRET is too short" in result.stderr
    assert "BEAM_WEBHOOK_SECRET: BEAM_WEBHOOK_SECRET" not in result.stderr


def test_the_open_line_honours_port_and_never_shows_all_interfaces(tmp_path: Path) -> None:
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "bot.cli", "serve", "--host", "0.0.0.0", "--port", str(port)],  # noqa: S104
        env=clean_env(
            BEAM_WORK_DIR=str(tmp_path / "work"),
            BEAM_PORT="9",
            BEAM_API_KEY="sk-test-secret-value",
            BEAM_API_BASE_URL="http://llm.invalid/v1",
            BEAM_MODEL="fake-model",
        ),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stderr is not None
        lines: list[str] = []
        while not any("setup mode" in line for line in lines):
            line = server.stderr.readline()
            assert line, lines
            lines.append(line)
    finally:
        server.terminate()
        server.wait(30)
        if server.stderr is not None:
            server.stderr.close()
    opens = [line for line in lines if "open http" in line]
    assert len(opens) == 2, lines
    assert all(f"open http://localhost:{port}/" in line for line in opens)
    assert not any("0.0.0.0" in line for line in lines)  # noqa: S104 - looked for, not bound
    # The model defaults are logged at start: provider, model, whether a key is set; never the key.
    assert any(
        line.rstrip().endswith("model: fake-model at http://llm.invalid/v1 (API key set)") for line in lines
    )
    assert not any("sk-test-secret-value" in line for line in lines)


def test_the_echo_model_and_the_defaults_are_described() -> None:
    from bot.app.web.preflight import describe_model
    from bot.beam.model_env import DEFAULT_BASE_URL, DEFAULT_MODEL

    assert describe_model({}) == (
        f"model: the echo model (no API key set; with BEAM_API_KEY: {DEFAULT_MODEL} at {DEFAULT_BASE_URL})"
    )
    assert (
        describe_model({"NVIDIA_API_KEY": "x"})
        == f"model: {DEFAULT_MODEL} at {DEFAULT_BASE_URL} (API key set)"
    )
    # Issue 42: a provider's own key is described as the client will use it.
    assert describe_model({"OPENAI_API_KEY": "sk"}) == (
        "model: gpt-4.1-mini at https://api.openai.com/v1 (API key set: OPENAI_API_KEY)"
    )
    # Ollama, named by its host: no key, and a model it must be told.
    assert describe_model({"OLLAMA_HOST": "127.0.0.1:11434", "BEAM_MODEL": "qwen2.5-coder:7b"}) == (
        "model: qwen2.5-coder:7b at http://127.0.0.1:11434/v1 (Ollama, from OLLAMA_HOST; no key)"
    )
    unnamed = describe_model({"OLLAMA_HOST": "127.0.0.1:11434"})
    assert (
        unnamed.startswith("model: not usable (")
        and "BEAM_MODEL must name a model Ollama has pulled" in unnamed
    )


@pytest.mark.parametrize("stage", ["starting", "serving"])
def test_ctrl_c_stops_serve_in_one_line_with_130(tmp_path: Path, stage: str) -> None:
    """uvicorn stops gracefully, then raises SIGINT again for the caller: one line, not a traceback."""
    argv = [sys.executable, "-m", "bot.cli", "serve", "--port", str(free_port())]
    with Terminal(argv, clean_env(BEAM_WORK_DIR=str(tmp_path / "work"), TERM="xterm")) as term:
        if stage == "serving":
            term.expect("listening on port", timeout=60)
            term.read_for(0.3)
        else:
            term.read_for(0.3)  # Python runs; the App's modules are still loading
        term.ctrl_c()
        code = term.wait(timeout=60)
    assert code == 130, term.text
    assert "Traceback" not in term.text
    assert screen_lines(term.text)[-1].endswith("beam-bot serve: stopped by SIGINT (Ctrl-C)"), term.text
