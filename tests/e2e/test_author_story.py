"""Issue 4's full story: `/beam author` on a PR, a held push, a 👍 seen by the poller, the push, the PR."""

from __future__ import annotations

import sqlite3
import subprocess
import sys

import pygit2

from tests.e2e.author_support import (
    BOT,
    NUMBER,
    REPO,
    approval_comment,
    branch_refs,
    held_push,
    push_state,
    receive_packs,
    rows,
    script_author,
    send_command,
    tracking_final,
)
from tests.support.bot_process import SECRET, BotProcess, wait_for
from tests.support.webhooks import delivery, pull_request_payload


def test_author_story_end_to_end(bot: BotProcess) -> None:
    before = branch_refs(bot)
    script_author(bot)
    send_command(bot, "/beam author fix the typo in README")
    push_id, shown_commit, comment_id = held_push(bot)
    final = wait_for(lambda: tracking_final(bot), what="the tracking comment")
    assert f"held push `{push_id}`" in final
    # Nothing reached the git server yet.
    assert branch_refs(bot) == before and receive_packs(bot) == 0
    row = rows(bot)[0]
    assert row["state"] == "pending" and row["commit_sha"] == shown_commit
    branch = row["branch"]
    assert branch.startswith("beam/pr-7/author-") and len(branch) == len("beam/pr-7/author-") + 8

    bot.fake.add_reaction(comment_id, "maintainer", "+1")
    wait_for(lambda: push_state(bot, push_id) == "pushed", what="the push")

    # The bot branch holds exactly the commit shown in the approval comment.
    after = branch_refs(bot)
    assert after[f"refs/heads/{branch}"] == shown_commit
    assert {k: v for k, v in after.items() if k != f"refs/heads/{branch}"} == before
    assert receive_packs(bot) == 1
    commit = bot.git.repository(REPO)[shown_commit]
    assert isinstance(commit, pygit2.Commit)
    assert commit.parents[0].id == pygit2.Oid(hex=bot.fake.pull(REPO, NUMBER).head_sha)
    assert commit.author.name == BOT and commit.committer.name == BOT
    assert "Co-authored-by: maintainer <" in commit.message
    assert (commit.tree / "README.md").data == b"Hello world\n"

    # A pull request from the bot branch into the contributor's branch.
    pulls = wait_for(lambda: [p for p in bot.fake.pulls_of(REPO) if p.head_ref == branch], what="the PR")
    assert len(pulls) == 1 and pulls[0].base_ref == "feature" and pulls[0].user == BOT

    edited = wait_for(
        lambda: (c := approval_comment(bot)) and "Approved by @maintainer" in c.body and c, what="edit"
    )
    assert shown_commit in edited.body and f"/pull/{pulls[0].number}" in edited.body

    # The token is nowhere: not on disk under the work dir (mirror, run trees, database), not in the
    # log, not in any comment.
    tokens = [t.encode() for t in bot.fake.tokens]
    assert tokens
    for path in bot.work_dir.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert not any(t in data for t in tokens), path
    log = bot.log().encode()
    assert not any(t in log for t in tokens)
    assert all(t.decode() not in c.body for c in bot.fake.comments.values() for t in tokens)

    # `beam-bot pending` lists it, with its state.
    listing = subprocess.run(
        [sys.executable, "-m", "bot.cli", "pending"],
        env=bot.env(),
        capture_output=True,
        text=True,
        check=True,
    )
    assert push_id in listing.stdout and "pushed" in listing.stdout and branch in listing.stdout


def test_author_on_an_issue_opens_a_draft_into_the_default_branch(bot: BotProcess) -> None:
    bot.fake.add_issue(REPO, number=9, title="README typo", user="maintainer")
    script_author(bot)
    send_command(bot, "/beam author fix the typo in README", number=9)
    push_id, shown, _ = held_push(bot, 9)
    branch = rows(bot)[0]["branch"]
    assert branch.startswith("beam/issue-9/author-")
    send_command(bot, f"/beam approve {push_id}", number=9)
    wait_for(lambda: push_state(bot, push_id) == "pushed", what="the push")
    parent = bot.git.repository(REPO)[shown].parents[0]
    assert str(parent.id) == bot.git.ref_sha(REPO, "refs/heads/main")
    pulls = wait_for(lambda: [p for p in bot.fake.pulls_of(REPO) if p.head_ref == branch], what="the PR")
    assert len(pulls) == 1 and pulls[0].base_ref == "main" and pulls[0].draft


def test_a_pull_request_from_a_fork_gets_a_compare_link(bot: BotProcess) -> None:
    bot.fake.set_file(REPO, "main", ".github/beam.yml", "version: 1\nfork_pushes: allow\n")  # issue 28
    head = bot.git.commit(REPO, {"src/app.py": "print(2)\n"}, branch="fork-work", message="Fork change")
    bot.git.create_pull_ref(REPO, 8, head)
    bot.fake.add_repo("someone/demo-fork")
    bot.fake.add_pull(
        REPO,
        number=8,
        title="From a fork",
        user="contributor",
        head_ref="fork-work",
        head_sha=head,
        head_repo="someone/demo-fork",
        base_sha=bot.git.ref_sha(REPO, "refs/heads/main") or "",
    )
    script_author(bot)
    send_command(bot, "/beam author fix the typo in README", number=8)
    push_id, shown, comment_id = held_push(bot, 8)
    bot.fake.add_reaction(comment_id, "boss", "+1")
    wait_for(lambda: push_state(bot, push_id) == "pushed", what="the push")
    branch = rows(bot)[0]["branch"]
    assert bot.git.ref_sha(REPO, f"refs/heads/{branch}") == shown
    edited = wait_for(
        lambda: (c := approval_comment(bot, 8)) and "Approved by @boss" in c.body and c, what="edit"
    )
    assert not [p for p in bot.fake.pulls_of(REPO) if p.head_ref == branch]
    assert f"someone/demo-fork/compare/fork-work...octo:demo:{branch}" in edited.body


def test_closing_the_pull_request_ends_its_held_push(bot: BotProcess) -> None:
    push_id, _, comment_id = held_push_after_author(bot)
    payload = pull_request_payload("closed", repo=REPO, number=NUMBER)
    assert bot.send(delivery("pull_request", payload, SECRET)).status_code == 202
    wait_for(lambda: push_state(bot, push_id) == "superseded", what="the push to end")
    wait_for(lambda: "the pull request was closed" in bot.fake.comments[comment_id].body, what="the comment")
    assert receive_packs(bot) == 0


def held_push_after_author(bot: BotProcess) -> tuple[str, str, int]:
    script_author(bot)
    send_command(bot, "/beam author fix the typo in README")
    return held_push(bot)


def test_a_remembered_fact_lands_in_the_database(bot: BotProcess) -> None:
    # The model names a scope; the server keeps the fact in this pull request's thread (issue 28).
    fact = {"scope_name": "conventions", "scope_id": "style", "kind": "rule", "text": "Indent with tabs."}
    bot.llm.reply_tool_calls(("remember", fact))
    bot.llm.reply_text("Noted: indent with tabs.")
    send_command(bot, "/beam author remember that we indent with tabs")
    final = wait_for(lambda: tracking_final(bot), what="the tracking comment")
    assert "Noted: indent with tabs." in final

    with sqlite3.connect(bot.work_dir / "beam.db") as db:
        stored = db.execute("SELECT id, scope_key, kind, text FROM memory").fetchall()
    assert [row[1:] for row in stored] == [(f"thread:{REPO}#{NUMBER}", "rule", "Indent with tabs.")]
    # The model was offered the tool, and its result names the stored row.
    first, second = bot.llm.requests[:2]
    assert "remember" in [t["function"]["name"] for t in first["tools"]]
    assert second["messages"][-1] == {
        "role": "tool",
        "tool_call_id": second["messages"][-2]["tool_calls"][0]["id"],
        "content": f'{{"id":"{stored[0][0]}","scope":"thread:{REPO}#{NUMBER}"}}',
    }
