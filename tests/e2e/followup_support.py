"""Set-up for the follow-up tests: an approved `/beam author` run and the bot's pull request it opened."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from tests.e2e.author_support import (
    REPO,
    approval_comment,
    bot_comments,
    held_push,
    push_state,
    rows,
    script_author,
    send_command,
)
from tests.support.bot_process import BotProcess, wait_for


@dataclass(frozen=True)
class BotPull:
    number: int
    branch: str
    tip: str


def approved_bot_pull(bot: BotProcess) -> BotPull:
    """`/beam author` on PR 7, approved and pushed: the pull request the bot opened from its branch."""
    script_author(bot)
    send_command(bot, "/beam author fix the typo in README")
    push_id, commit, comment_id = held_push(bot)
    bot.fake.add_reaction(comment_id, "maintainer", "+1")
    wait_for(lambda: push_state(bot, push_id) == "pushed", what="the first push")
    branch = rows(bot)[0]["branch"]
    pulls = wait_for(lambda: [p for p in bot.fake.pulls_of(REPO) if p.head_ref == branch], what="the PR")
    wait_for(lambda: "Approved by" in (approval_comment(bot).body), what="the approval comment's edit")
    return BotPull(pulls[0].number, branch, commit)


def script_commit(
    bot: BotProcess, path: str, body: str, message: str, push_args: dict[str, Any] | None = None
) -> None:
    bot.llm.reply_tool_calls(("write_file", {"path": path, "body": body}))
    bot.llm.reply_tool_calls(("git_add", {"path": path}), ("git_commit", {"message": message}))
    bot.llm.reply_tool_calls(("git_push", push_args or {}))


def new_held_push(bot: BotProcess, number: int, known: set[str]) -> tuple[str, str, int, str]:
    """Wait for a held push on `number` other than those in `known`: (id, commit, comment id, body)."""

    def found() -> Any:
        for comment in bot_comments(bot, number):
            match = re.search(r"Held push `([0-9a-f]+)`", comment.body)
            if match and match.group(1) not in known and "beam-push:" in comment.body:
                return comment
        return None

    comment = wait_for(found, what="a new approval comment")
    push_id = re.search(r"Held push `([0-9a-f]+)`", comment.body)
    commit = re.search(r"Commit `([0-9a-f]{40})`", comment.body)
    assert push_id and commit, comment.body
    wait_for(lambda: push_state(bot, push_id.group(1)), what="the held push's row")
    return push_id.group(1), commit.group(1), comment.id, str(comment.body)


def reply_containing(bot: BotProcess, number: int, text: str) -> str:
    return str(
        wait_for(
            lambda: next((c.body for c in bot_comments(bot, number) if text in c.body), None),
            what=f"a reply with {text!r}",
        )
    )


def stored_context(bot: BotProcess, push_id: str) -> dict[str, Any]:
    row = next(r for r in rows(bot) if r["id"] == push_id)
    action = row["action"]
    return dict(json.loads(action) if isinstance(action, str) else action)


def prompts(bot: BotProcess) -> list[str]:
    """The user messages the model received, one per request."""
    out = []
    for request in bot.llm.requests:
        for message in request.get("messages", []):
            if message.get("role") == "user" and isinstance(message.get("content"), str):
                out.append(message["content"])
    return out


def tool_results(bot: BotProcess) -> list[str]:
    return [
        str(m.get("content"))
        for request in bot.llm.requests
        for m in request.get("messages", [])
        if m.get("role") == "tool"
    ]
