"""Conversations in review threads the bot started: a reply that mentions `@<app-slug>` or starts
with `/beam` gets an answer in the same thread, from the thread and the code around its line.

The same permission rule as commands applies (`trigger_permission`), bots are ignored, and a reply
is answered once: the answer carries a hidden marker naming the reply, found again on a retry.
"""

from __future__ import annotations

import logging
import re

from bot.app import commands
from bot.app.context.prompt import build_thread_prompt
from bot.app.github.client import InstallationClient
from bot.app.github.payloads import CommentEvent
from bot.app.permissions import permission_at_least
from bot.app.repo_config import load_repo_config
from bot.app.reviews import render
from bot.app.runs import render as run_render
from bot.beam.completion import CompletionClient

log = logging.getLogger("beam.reviews")


def asks_the_bot(body: str, bot_login: str) -> bool:
    """A mention of the App (`@slug`, with or without `[bot]`), or a first line starting with `/beam`."""
    slug = bot_login.lower().removesuffix("[bot]")
    first = body.lstrip().split("\n", 1)[0].lower()
    if first.startswith("/beam"):
        return True
    return re.search(rf"(?<![\w-])@{re.escape(slug)}(?:\[bot\])?(?![\w-])", body.lower()) is not None


def is_thread_question(event: CommentEvent, bot_login: str) -> bool:
    """Decided without I/O: a human's new reply in a review thread that asks the bot, and is not a
    well-formed `/beam` command (those run as commands)."""
    comment = event.comment
    if event.action != "created" or not event.is_review_comment or comment.in_reply_to_id is None:
        return False
    if comment.user.is_bot or event.sender.is_bot:
        return False
    if not asks_the_bot(comment.body, bot_login):
        return False
    parsed = commands.parse(comment.body)
    return parsed is None or isinstance(parsed, commands.CommandError) or parsed.name == "help"


class ThreadReplies:
    def __init__(self, llm: CompletionClient) -> None:
        self.llm = llm

    async def answer(self, gh: InstallationClient, event: CommentEvent, bot_login: str) -> bool:
        """Answer the reply if its thread is the bot's; False when it is not (the caller goes on)."""
        repo, comment = event.repository, event.comment
        owner, name = repo.owner.login, repo.name
        assert comment.in_reply_to_id is not None and event.pull_request is not None
        root = await gh.get_review_comment(owner, name, comment.in_reply_to_id)
        root_id = root.in_reply_to_id or root.id
        if root.in_reply_to_id is not None:
            root = await gh.get_review_comment(owner, name, root_id)
        if root.user is None or root.user.login.lower() != bot_login.lower():
            return False
        config = await load_repo_config(gh.get_file, owner, name, repo.default_branch)
        needed = config.config.trigger_permission
        permission = await gh.get_permission(owner, name, comment.user.login)
        if not permission_at_least(permission, needed):
            await gh.reply_to_review_comment(
                owner, name, event.number, root_id, run_render.refusal(comment.user.login, needed)
            )
            return True
        everything = await gh.list_review_comments(owner, name, event.number, limit=3000)
        thread = sorted(
            (c for c in everything if c.id == root_id or c.in_reply_to_id == root_id), key=lambda c: c.id
        )
        # Answered by an earlier attempt: a reply of the bot's that ends with the marker (a marker
        # anyone else wrote, or one quoted inside a text, answers nothing: issue 40).
        ours = (c for c in thread if c.user is not None and c.user.login.lower() == bot_login.lower())
        if any(render.answers(c.body or "", comment.id) for c in ours):
            return True
        path = root.path or comment.path or ""
        line = root.line or comment.line
        code = await gh.get_file(owner, name, path, event.pull_request.head.sha) if path else None
        history = [(c.user.login if c.user else "ghost", c.body or "") for c in thread]
        if all(c.id != comment.id for c in thread):
            history.append((comment.user.login, comment.body))
        messages = build_thread_prompt(path, line, code, history)
        try:
            completion = await self.llm.complete(messages, [])
            body = render.thread_reply(completion.text or "", comment.id)
        except Exception:  # a model failure still gets an answer in the thread
            log.exception("%s#%s: the thread answer failed", repo.full_name, event.number)
            body = render.thread_failed(comment.id)
        await gh.reply_to_review_comment(owner, name, event.number, root_id, body)
        return True
