"""Issue 12 end to end: `/beam docs` writes only `docs.paths` on a `docs-<run8>` branch, held for approval."""

from __future__ import annotations

import json

import pygit2

from tests.e2e.author_support import (
    NUMBER,
    REPO,
    branch_refs,
    held_push,
    push_state,
    receive_packs,
    rows,
    send_command,
)
from tests.e2e.followup_support import prompts, reply_containing, tool_results
from tests.support.bot_process import BotProcess, wait_for


def script_docs(bot: BotProcess) -> None:
    bot.llm.reply_tool_calls(("write_file", {"path": "src/app.py", "body": "# documented\nprint(1)\n"}))
    bot.llm.reply_tool_calls(("write_file", {"path": "docs/app.md", "body": "# The app\n\nIt prints 1.\n"}))
    bot.llm.reply_tool_calls(
        ("git_add", {"path": "docs/app.md"}), ("git_commit", {"message": "Document the app"})
    )
    bot.llm.reply_tool_calls(("git_push", {}))


def test_docs_on_a_pull_request_writes_only_docs_and_is_held(bot: BotProcess) -> None:
    before = branch_refs(bot)
    script_docs(bot)
    send_command(bot, "/beam docs")
    push_id, commit, comment_id = held_push(bot)
    branch = rows(bot)[0]["branch"]
    assert branch.startswith(f"beam/pr-{NUMBER}/docs-") and len(branch) == len(f"beam/pr-{NUMBER}/docs-") + 8
    # With no text on a pull request, the model is asked to document the pull request's change.
    prompt = prompts(bot)[0]
    assert "Update the documentation for this pull request's change" in prompt
    assert "`docs/**`" in prompt and "`**/*.md`" in prompt and "`mkdocs.yml`" in prompt
    # The write to src/ was refused, and the model saw why (a BEM code, as a tool result).
    refused = [r for r in tool_results(bot) if "BEM-338" in r]
    assert refused and "src/app.py" in refused[0]
    assert branch_refs(bot) == before and receive_packs(bot) == 0

    bot.fake.add_reaction(comment_id, "maintainer", "+1")
    wait_for(lambda: push_state(bot, push_id) == "pushed", what="the push")
    assert bot.git.ref_sha(REPO, f"refs/heads/{branch}") == commit
    pushed = bot.git.repository(REPO)[commit]
    assert isinstance(pushed, pygit2.Commit)
    assert (pushed.tree / "docs/app.md").data == b"# The app\n\nIt prints 1.\n"
    assert (pushed.tree / "src/app.py").data == b"print(1)\n"  # as on the PR head: untouched
    pulls = wait_for(lambda: [p for p in bot.fake.pulls_of(REPO) if p.head_ref == branch], what="the PR")
    assert pulls[0].base_ref == "feature" and "/beam docs" in (pulls[0].body or "")


def test_docs_on_an_issue_needs_instructions_and_uses_an_issue_branch(bot: BotProcess) -> None:
    bot.fake.add_issue(REPO, number=9, title="Document the app", user="maintainer")
    send_command(bot, "/beam docs", number=9)
    assert "needs instructions" in reply_containing(bot, 9, "/beam docs")
    script_docs(bot)
    send_command(bot, "/beam docs explain what the app prints", number=9)
    push_id, _, _ = held_push(bot, 9)
    assert rows(bot)[0]["branch"].startswith("beam/issue-9/docs-")
    assert any("Request from @maintainer: explain what the app prints" in p for p in prompts(bot))
    assert push_state(bot, push_id) == "pending"


def test_docs_paths_and_the_skill_come_from_the_repository_config(bot: BotProcess) -> None:
    bot.fake.set_file(REPO, "main", ".github/beam.yml", "version: 1\ndocs:\n  paths: [guide/**]\n")
    bot.llm.reply_tool_calls(("write_file", {"path": "docs/app.md", "body": "# The app\n"}))
    bot.llm.reply_tool_calls(("write_file", {"path": "guide/app.md", "body": "# The app\n"}))
    bot.llm.reply_tool_calls(("git_add", {"path": "."}), ("git_commit", {"message": "Guide"}))
    bot.llm.reply_tool_calls(("git_push", {}))
    send_command(bot, "/beam docs write a guide")
    held_push(bot)
    assert any("BEM-338" in r and "docs/app.md" in r for r in tool_results(bot))
    assert [f["path"] for f in json.loads(rows(bot)[0]["diffstat"])["files"]] == ["guide/app.md"]

    bot.fake.set_file(REPO, "main", ".github/beam.yml", "version: 1\nskills: [author, review]\n")
    asked = len(bot.llm.requests)
    send_command(bot, "/beam docs write a guide")
    reply_containing(bot, NUMBER, "`/beam docs` is turned off")
    assert len(bot.llm.requests) == asked and len(rows(bot)) == 1
