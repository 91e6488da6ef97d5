"""Shared set-up for the `/beam author` end-to-end tests: a PR, a scripted model, the store, the refs."""

from __future__ import annotations

import re
import shutil
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pygit2

from tests.support.bot_process import SECRET, BotProcess, bot_stack, comment_payload, wait_for
from tests.support.fake_github_state import Pull, PullFile
from tests.support.git_http import isolated_git_env
from tests.support.webhooks import delivery, issue_comment_payload

REPO = "octo/demo"
NUMBER = 7
FORK = "mallory/demo"  # issue 28: a fork of REPO, whose pull request is FORK_NUMBER
FORK_NUMBER = 8
FORK_AUTHOR = ("Mallory", "mallory@evil.example")
BOT = "beam-bot[bot]"
FILES = {"README.md": "Helo world\n", ".github/workflows/ci.yml": "on: push\n", "src/app.py": "print(0)\n"}


@contextmanager
def author_stack(tmp_path: Path, *, as_image_user: bool = False, **extra_env: str) -> Iterator[BotProcess]:
    with bot_stack(tmp_path, BEAM_POLL_INTERVAL="0.6", BEAM_POLL_MIN_INTERVAL="0.2", **extra_env) as bot:
        bot.as_image_user = as_image_user
        main = bot.git.seed(REPO, FILES)
        head = bot.git.commit(REPO, {"src/app.py": "print(1)\n"}, branch="feature", message="Change app")
        add_symlink(bot, "feature", "docs/workflows", "../.github/workflows")
        head = bot.git.ref_sha(REPO, "refs/heads/feature") or head
        bot.git.create_pull_ref(REPO, NUMBER, head)
        bot.fake.ref_resolver = lambda repo, ref: bot.git.ref_sha(repo, f"refs/heads/{ref}")
        bot.fake.add_repo(REPO)
        for user, permission in (("maintainer", "write"), ("boss", "admin"), ("contributor", "read")):
            bot.fake.add_collaborator(REPO, user, permission)
        bot.fake.add_bot("ci-bot[bot]")
        bot.fake.add_pull(
            REPO,
            number=NUMBER,
            title="Change app",
            user="contributor",
            head_ref="feature",
            head_sha=head,
            base_sha=main,
            files=[PullFile("src/app.py", patch="@@ -1 +1 @@\n-print(0)\n+print(1)\n")],
        )
        bot.start()
        yield bot


def add_symlink(bot: BotProcess, branch: str, path: str, target: str) -> None:
    """A symlink committed in the repository (GitHub serves them like any file)."""
    repo = bot.git.repository(REPO)
    tip = repo.references[f"refs/heads/{branch}"].target
    index = pygit2.Index()
    index.read_tree(repo[tip].peel(pygit2.Tree))
    index.add(pygit2.IndexEntry(path, repo.create_blob(target.encode()), pygit2.enums.FileMode.LINK))
    sig = pygit2.Signature("t", "t@example.com")
    oid = repo.create_commit(None, sig, sig, "Add a link", index.write_tree(repo), [tip])
    repo.references.create(f"refs/heads/{branch}", oid, force=True)


def fork_pull(
    bot: BotProcess,
    commits: list[tuple[dict[str, str | None], str]],
    *,
    author: tuple[str, str] = FORK_AUTHOR,
    number: int = FORK_NUMBER,
) -> list[str]:
    """A pull request into REPO from the fork FORK (`head.repo` is not `base.repo`); returns its
    commits' shas, oldest first.

    The fork is a copy of REPO on the git server with `commits` (files, message; None deletes) by
    `author` on its `fork-feature` branch. As GitHub does, REPO serves the fork's head only as
    `refs/pull/<number>/head`: the fork's commits are on no branch of REPO.
    """
    shutil.copytree(bot.git.bare_path(REPO), bot.git.bare_path(FORK))
    fork = bot.git.repository(FORK)
    main = str(fork.references["refs/heads/main"].target)
    tip, made = main, []
    for files, message in commits:
        index = pygit2.Index()
        index.read_tree(fork[tip].peel(pygit2.Tree))
        for path, content in files.items():
            if content is None:
                index.remove(path)
            else:
                blob = fork.create_blob(content.encode())
                index.add(pygit2.IndexEntry(path, blob, pygit2.enums.FileMode.BLOB))
        sig = pygit2.Signature(*author)
        tip = str(fork.create_commit(None, sig, sig, message, index.write_tree(fork), [tip]))
        made.append(tip)
    fork.references.create("refs/heads/fork-feature", tip, force=True)
    subprocess.run(
        [
            "git",
            "fetch",
            "--quiet",
            str(bot.git.bare_path(FORK)),
            f"refs/heads/fork-feature:refs/pull/{number}/head",
        ],
        cwd=bot.git.bare_path(REPO),
        env=isolated_git_env(),
        check=True,
    )
    bot.fake.add_repo(FORK)
    changed = sorted({path for files, _ in commits for path in files})
    bot.fake.add_pull(
        REPO,
        number=number,
        title="Improve the tests",
        user="mallory",
        head_ref="fork-feature",
        head_sha=tip,
        head_repo=FORK,
        base_sha=main,
        files=[PullFile(path) for path in changed],
    )
    return made


def send_command(
    bot: BotProcess, body: str, user: str = "maintainer", number: int = NUMBER, html_url: str | None = None
) -> int:
    comment = bot.fake.add_comment(REPO, number, body, user=user)
    is_pull = isinstance(bot.fake.repo(REPO).issues.get(number), Pull)
    payload = issue_comment_payload(
        body, repo=REPO, number=number, commenter=user, comment_id=comment.id, on_pull_request=is_pull
    )
    payload["repository"]["default_branch"] = "main"  # as the fake repository says
    if html_url is not None:  # a GitHub Enterprise Server's web address, as its payloads carry it
        payload["repository"]["html_url"] = html_url
    response = bot.send(delivery("issue_comment", comment_payload(bot, payload, REPO), SECRET))
    assert response.status_code == 202, response.text
    return comment.id


def script_author(
    bot: BotProcess, push_args: dict[str, Any] | None = None, *, path: str = "README.md"
) -> None:
    bot.llm.reply_tool_calls(("git_status", {}))
    bot.llm.reply_tool_calls(("write_file", {"path": path, "body": "Hello world\n"}))
    bot.llm.reply_tool_calls(
        ("git_add", {"path": path}), ("git_commit", {"message": "Fix the typo in README"})
    )
    bot.llm.reply_tool_calls(("git_push", push_args or {}))


def bot_comments(bot: BotProcess, number: int = NUMBER) -> list[Any]:
    return [c for c in bot.fake.comments_on(REPO, number) if c.user == BOT]


def approval_comment(bot: BotProcess, number: int = NUMBER) -> Any:
    return next((c for c in bot_comments(bot, number) if "beam-push:" in c.body), None)


def tracking_final(bot: BotProcess, number: int = NUMBER) -> str | None:
    for comment in bot_comments(bot, number):
        body = comment.body
        if "<!-- beam-run:" in body and "Working on" not in body and "retrying" not in body:
            return str(body)
    return None


def held_push(bot: BotProcess, number: int = NUMBER) -> tuple[str, str, int]:
    """Wait for the approval comment; return (push id, commit sha shown, comment id)."""
    comment = wait_for(lambda: approval_comment(bot, number), what="the approval comment")
    push_id = re.search(r"Held push `([0-9a-f]+)`", comment.body)
    commit = re.search(r"Commit `([0-9a-f]{40})`", comment.body)
    assert push_id and commit, comment.body
    wait_for(lambda: push_state(bot, push_id.group(1)), what="the held push's row")
    return push_id.group(1), commit.group(1), comment.id


def rows(bot: BotProcess) -> list[dict[str, Any]]:
    with sqlite3.connect(bot.work_dir / "beam.db") as db:
        db.row_factory = sqlite3.Row
        return [dict(r) for r in db.execute("SELECT * FROM pending_pushes ORDER BY created_at")]


def push_state(bot: BotProcess, push_id: str) -> str | None:
    return next((r["state"] for r in rows(bot) if r["id"] == push_id), None)


def set_row(bot: BotProcess, push_id: str, **values: Any) -> None:
    assignments = ", ".join(f"{k} = ?" for k in values)
    with sqlite3.connect(bot.work_dir / "beam.db") as db:
        db.execute(f"UPDATE pending_pushes SET {assignments} WHERE id = ?", [*values.values(), push_id])  # noqa: S608


def branch_refs(bot: BotProcess) -> dict[str, str]:
    return {k: v for k, v in bot.git.refs(REPO).items() if k.startswith("refs/heads/")}


def receive_packs(bot: BotProcess) -> int:
    """POSTs of git-receive-pack reaching the git server: one per push that sent anything."""
    return sum(1 for r in bot.git.requests if r.method == "POST" and r.path.endswith("git-receive-pack"))


def stays(check: Any, seconds: float) -> None:
    """`check()` holds for the whole period (several poll cycles of the bot)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert check()
        time.sleep(0.1)


def watch_jobs(bot: BotProcess) -> int:
    """Rows of the approval poller's jobs: a poll re-arms its own row instead of adding one."""
    with sqlite3.connect(bot.work_dir / "beam.db") as db:
        return int(db.execute("SELECT count(*) FROM jobs WHERE kind = 'push_watch'").fetchone()[0])
