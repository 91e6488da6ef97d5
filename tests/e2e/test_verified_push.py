"""Issue 22's story on real bubblewrap: `/beam author` on a repository with `checks`. The scripted model
writes a bug, `run_checks` reports the failing test, the model fixes it; the approval comment shows
the tests passed on the held sha, and after 👍 the `beam / checks` check run sits on the pushed commit.
With `checks_required: true` a failing commit cannot be approved, by 👍 or by `/beam approve`."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from bot.app.checks.jail import jail_status
from tests.e2e.author_support import (
    NUMBER,
    REPO,
    approval_comment,
    bot_comments,
    held_push,
    push_state,
    receive_packs,
    rows,
    send_command,
    stays,
    tracking_final,
)
from tests.e2e.followup_support import BotPull, new_held_push
from tests.support.bot_process import BotProcess, bot_stack, wait_for
from tests.support.fake_github_state import PullFile

CALC = "def add(a, b):\n    return a + b\n"
BUG = "def add(a, b):\n    return a - b  # the bug\n"
FIX = "def add(a, b):\n    return b + a\n"
TEST = (
    "import unittest\n\nfrom calc import add\n\n\nclass AddTest(unittest.TestCase):\n"
    "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n"
)
CHECKS = (
    "version: 1\nchecks:\n  - name: tests\n    run: python -m unittest -v test_calc\nchecks_timeout: 2m\n"
)


@contextmanager
def calc_stack(
    tmp_path: Path, *, test: str = TEST, as_image_user: bool = False, **env: str
) -> Iterator[BotProcess]:
    """The `/beam author` stack on a tiny Python repository with one test, pull request #7 open."""
    with bot_stack(tmp_path, BEAM_POLL_INTERVAL="0.6", BEAM_POLL_MIN_INTERVAL="0.2", **env) as bot:
        bot.as_image_user = as_image_user
        main = bot.git.seed(REPO, {"calc.py": CALC, "test_calc.py": test, "README.md": "calc\n"})
        head = bot.git.commit(REPO, {"README.md": "calc, the adder\n"}, branch="feature", message="Docs")
        bot.git.create_pull_ref(REPO, NUMBER, head)
        bot.fake.ref_resolver = lambda repo, ref: bot.git.ref_sha(repo, f"refs/heads/{ref}")
        bot.fake.add_repo(REPO)
        for user, permission in (("maintainer", "write"), ("boss", "admin")):
            bot.fake.add_collaborator(REPO, user, permission)
        bot.fake.add_pull(
            REPO,
            number=NUMBER,
            title="Docs",
            user="maintainer",
            head_ref="feature",
            head_sha=head,
            base_sha=main,
            files=[PullFile("README.md", patch="@@ -1 +1 @@\n-calc\n+calc, the adder\n")],
        )
        bot.start()
        yield bot


@pytest.fixture
def bot(tmp_path: Path) -> Iterator[BotProcess]:
    state = jail_status()
    if not state.available:
        pytest.skip(f"needs the checks jail (real bubblewrap): {state.reason}")
    with calc_stack(tmp_path) as bot:
        yield bot


def tool_results(bot: BotProcess, name: str) -> list[dict[str, Any]]:
    """What the model was told each time it called `name` (the tool messages it received)."""
    ids: dict[str, None] = {}
    results: dict[str, dict[str, Any]] = {}
    for request in bot.llm.requests:
        for message in request["messages"]:
            for call in message.get("tool_calls") or []:
                if call["function"]["name"] == name:
                    ids.setdefault(call["id"], None)
            if message.get("role") == "tool" and message.get("tool_call_id") in ids:
                results[message["tool_call_id"]] = json.loads(message["content"])
    return [results[i] for i in ids if i in results]


def test_the_model_iterates_on_the_checks_and_the_pushed_commit_carries_them(bot: BotProcess) -> None:
    bot.fake.set_file(REPO, "main", ".github/beam.yml", CHECKS)
    llm = bot.llm
    llm.reply_tool_calls(("write_file", {"path": "calc.py", "body": BUG}))
    llm.reply_tool_calls(("run_checks", {}))
    llm.reply_tool_calls(("write_file", {"path": "calc.py", "body": FIX}))
    llm.reply_tool_calls(("run_checks", {}))
    llm.reply_tool_calls(("git_add", {"path": "calc.py"}), ("git_commit", {"message": "Make add commute"}))
    llm.reply_tool_calls(("git_push", {}))
    send_command(bot, "/beam author make add commute")
    push_id, sha, comment_id = held_push(bot)

    first, second = tool_results(bot, "run_checks")
    assert first["all_passed"] is False and first["runs_left"] == 2
    [failing] = first["checks"]
    assert failing["name"] == "tests" and failing["status"] == "failed"
    assert "AssertionError: -1 != 5" in failing["output_tail"]
    assert second["all_passed"] is True and second["checks"][0]["status"] == "passed"

    body = approval_comment(bot).body
    assert f"**Checks** on exactly commit `{sha}`: the check passed." in body
    assert re.search(r"\| `tests` \| ✅ passed \| [0-9.]+ s \|", body)
    assert "**To answer**" in body
    final = wait_for(lambda: tracking_final(bot), what="the tracking comment")
    assert "Checks: the check passed." in final
    assert not bot.fake.check_runs  # GitHub has no commit to hold it yet

    bot.fake.add_reaction(comment_id, "boss", "+1")
    wait_for(lambda: push_state(bot, push_id) == "pushed", what="the push")
    assert bot.git.ref_sha(REPO, f"refs/heads/{rows(bot)[0]['branch']}") == sha
    run = wait_for(
        lambda: next((r for r in bot.fake.check_runs.values() if r.status == "completed"), None),
        what="the beam / checks check run",
    )
    assert run.name == "beam / checks" and run.head_sha == sha and run.conclusion == "success"
    assert run.output is not None and run.output["title"] == "The check passed"
    assert "| `tests` | ✅ passed" in run.output["text"] and f"held push `{push_id}`" in run.output["summary"]
    assert len(bot.fake.check_runs) == 1
    edited = wait_for(
        lambda: (c := approval_comment(bot)) and "Approved by @boss" in c.body and c, what="the edit"
    )
    assert "Checks: the check passed ([`beam / checks`](" in edited.body


def test_a_required_failing_check_cannot_be_approved(bot: BotProcess) -> None:
    bot.fake.set_file(REPO, "main", ".github/beam.yml", CHECKS + "checks_required: true\n")
    llm = bot.llm
    llm.reply_tool_calls(("write_file", {"path": "calc.py", "body": BUG}))
    llm.reply_tool_calls(("git_add", {"path": "calc.py"}), ("git_commit", {"message": "Break add"}))
    llm.reply_tool_calls(("git_push", {}))
    send_command(bot, "/beam author rewrite add")
    push_id, sha, comment_id = held_push(bot)

    body = approval_comment(bot).body
    assert f"**Checks** on exactly commit `{sha}`: 1 of 1 checks did not pass." in body
    assert "| `tests` | ❌ failed (exit 1)" in body and "AssertionError: -1 != 5" in body
    assert "Not offered for approval" in body and "**To answer**" not in body
    final = wait_for(lambda: tracking_final(bot), what="the tracking comment")
    assert "not offered for approval: `tests` did not pass" in final

    bot.fake.add_reaction(comment_id, "boss", "+1")
    refusal = wait_for(
        lambda: next((c for c in bot_comments(bot) if c.body.startswith("@boss, held push")), None),
        what="the refusal of the 👍",
    )
    assert "cannot be approved: `tests` did not pass" in refusal.body
    send_command(bot, f"/beam approve {push_id}", user="maintainer")
    wait_for(
        lambda: any(c.body.startswith("@maintainer, held push") for c in bot_comments(bot)),
        what="the refusal of /beam approve",
    )
    stays(lambda: push_state(bot, push_id) == "pending" and receive_packs(bot) == 0, 3.0)
    assert not bot.fake.check_runs
    assert len([c for c in bot_comments(bot) if c.body.startswith("@boss, held push")]) == 1  # said once


def test_where_the_jail_cannot_be_built_checks_are_off_and_say_so(tmp_path: Path) -> None:
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    bwrap = fake_bin / "bwrap"  # a bubblewrap that cannot create namespaces (some containers)
    bwrap.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    bwrap.chmod(0o755)
    with calc_stack(tmp_path, PATH=f"{fake_bin}:{os.environ['PATH']}") as bot:
        ready = httpx.get(f"{bot.url}/readyz", timeout=10).json()
        assert ready["checks"]["jail"].startswith("off: ") and "namespace" in ready["checks"]["jail"]
        assert "checks are off: the jail cannot be built here" in bot.log()
        bot.fake.set_file(REPO, "main", ".github/beam.yml", CHECKS)
        bot.llm.reply_tool_calls(("write_file", {"path": "calc.py", "body": FIX}))
        bot.llm.reply_tool_calls(("git_add", {"path": "calc.py"}), ("git_commit", {"message": "Commute"}))
        bot.llm.reply_tool_calls(("git_push", {}))
        send_command(bot, "/beam author make add commute")
        push_id, sha, comment_id = held_push(bot)
        body = approval_comment(bot).body
        assert "**Checks**: off on this server (bwrap cannot create" in body
        assert f"nothing was run on commit `{sha}`" in body and "**To answer**" in body
        offered = [t["function"]["name"] for t in bot.llm.requests[0]["tools"]]
        assert "run_checks" not in offered and "git_push" in offered  # nothing to run them with
        bot.fake.add_reaction(comment_id, "boss", "+1")
        wait_for(lambda: push_state(bot, push_id) == "pushed", what="the push")
        run = wait_for(
            lambda: next((r for r in bot.fake.check_runs.values() if r.status == "completed"), None),
            what="the check run",
        )
        assert run.head_sha == sha and run.conclusion == "neutral" and run.output is not None
        assert run.output["title"] == "Checks were off"


def test_a_docs_push_is_checked_the_same_way(bot: BotProcess) -> None:
    bot.fake.set_file(REPO, "main", ".github/beam.yml", CHECKS)
    bot.llm.reply_tool_calls(("write_file", {"path": "docs/calc.md", "body": "# calc\n\n`add(a, b)`\n"}))
    bot.llm.reply_tool_calls(
        ("git_add", {"path": "docs/calc.md"}), ("git_commit", {"message": "Document add"})
    )
    bot.llm.reply_tool_calls(("git_push", {}))
    send_command(bot, "/beam docs document add")
    _, sha, _ = held_push(bot)
    body = approval_comment(bot).body
    assert f"**Checks** on exactly commit `{sha}`: the check passed." in body
    assert "docs/calc.md" in body and rows(bot)[0]["branch"].startswith("beam/pr-7/docs-")


def test_an_update_and_a_follow_up_are_checked_on_their_new_tip(bot: BotProcess) -> None:
    bot.fake.set_file(REPO, "main", ".github/beam.yml", CHECKS)
    bot.llm.reply_tool_calls(("write_file", {"path": "calc.py", "body": FIX}))
    bot.llm.reply_tool_calls(("git_add", {"path": "calc.py"}), ("git_commit", {"message": "Commute"}))
    bot.llm.reply_tool_calls(("git_push", {}))
    send_command(bot, "/beam author make add commute")
    first = bot_pull(bot)

    bot.git.commit(REPO, {"README.md": "calc, the adder, v2\n"}, branch="feature", message="Base moves")
    send_command(bot, "/beam update", number=first.number)
    _, merge, _, body = new_held_push(bot, first.number, set())
    assert f"**Checks** on exactly commit `{merge}`: the check passed." in body
    assert "(`Merge branch 'feature' into " in body  # the merge commit itself, not the branch tip

    bot.llm.reply_tool_calls(("write_file", {"path": "calc.py", "body": BUG}))
    bot.llm.reply_tool_calls(("git_add", {"path": "calc.py"}), ("git_commit", {"message": "Oops"}))
    bot.llm.reply_tool_calls(("git_push", {}))
    known = {r["id"] for r in rows(bot)}
    send_command(bot, "/beam author rewrite add", number=first.number)
    _, tip, _, body = new_held_push(bot, first.number, known)
    assert f"**Checks** on exactly commit `{tip}`: 1 of 1 checks did not pass." in body
    assert "AssertionError: -1 != 5" in body and "**To answer**" in body  # not required: offered


def bot_pull(bot: BotProcess) -> BotPull:
    """The held push approved and pushed: the pull request the bot opened from its branch."""
    push_id, commit, comment_id = held_push(bot)
    bot.fake.add_reaction(comment_id, "boss", "+1")
    wait_for(lambda: push_state(bot, push_id) == "pushed", what="the first push")
    branch = rows(bot)[0]["branch"]
    pulls = wait_for(lambda: [p for p in bot.fake.pulls_of(REPO) if p.head_ref == branch], what="the PR")
    return BotPull(pulls[0].number, branch, commit)


# The pull request's own test: every process's environment and command line it can read, gzipped and
# base64-encoded (past any redaction of the output), printed, and a failure so the output is shown.
DUMP_TEST = """import base64, glob, gzip, unittest


class Dump(unittest.TestCase):
    def test_dump(self):
        seen = b""
        for proc in glob.glob("/proc/[0-9]*"):
            for name in ("environ", "cmdline"):
                try:
                    with open(proc + "/" + name, "rb") as f:
                        seen += proc.encode() + b" " + name.encode() + b" " + f.read() + b"\\n"
                except OSError:
                    pass
        print("LEAK:" + base64.b64encode(gzip.compress(seen)).decode())
        self.fail("dumped")
"""


def test_a_check_that_dumps_every_environ_posts_no_secret_run_as_the_images_user() -> None:
    """Issue 27, end to end in the mode the Docker image ships: `beam-bot serve` as uid 10001, a pull
    request whose test reads every /proc/*/environ and prints it encoded; nothing the bot posts to
    GitHub holds a secret of the bot's, encoded or not."""
    import base64
    import gzip
    import shutil
    import tempfile

    from tests.support.users import why_not_as_user

    if (why := why_not_as_user()) is not None:
        pytest.skip(why)
    if not jail_status().available:
        pytest.skip(f"needs the checks jail (real bubblewrap): {jail_status().reason}")
    root = Path(tempfile.mkdtemp(prefix="beam-e2e-user-"))
    root.chmod(0o755)  # pytest's tmp_path sits below a directory only root may enter
    checks = "version: 1\nchecks:\n  - name: tests\n    run: python3 -m unittest -v test_calc\n"
    try:
        with calc_stack(root, test=DUMP_TEST, as_image_user=True) as bot:
            assert bot.proc is not None
            assert os.stat(f"/proc/{bot.proc.pid}").st_uid == 10001
            bot.fake.set_file(REPO, "main", ".github/beam.yml", checks)
            bot.llm.reply_tool_calls(("write_file", {"path": "calc.py", "body": FIX}))
            bot.llm.reply_tool_calls(("git_add", {"path": "calc.py"}), ("git_commit", {"message": "Commute"}))
            bot.llm.reply_tool_calls(("git_push", {}))
            send_command(bot, "/beam author make add commute")
            held_push(bot)
            body = approval_comment(bot).body
            found = re.search(r"LEAK:([A-Za-z0-9+/=]+)", body)
            assert found is not None, body  # the dump was shown, whole
            seen = gzip.decompress(base64.b64decode(found.group(1))).decode("utf-8", "replace")
            assert "environ" in seen and "beam-jail" in seen  # the jail's processes were read
            everything = json.dumps(bot.fake.snapshot()) + seen
            env = bot.env()
            secrets = [env[name] for name in ("BEAM_WEBHOOK_SECRET", "BEAM_API_KEY", "BEAM_GITHUB_API_URL")]
            secrets += [line for line in env["BEAM_PRIVATE_KEY"].splitlines() if "PRIVATE KEY" not in line]
            for secret in secrets:
                assert secret not in everything
            assert "BEAM_" not in seen and str(bot.work_dir) not in seen
    finally:
        shutil.rmtree(root, ignore_errors=True)
