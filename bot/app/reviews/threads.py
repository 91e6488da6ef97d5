"""Conversations in review threads the bot started: a reply that mentions `@<app-slug>` or starts
with `/beam` gets an answer in the same thread, from the thread and the code around its line.

An answer is a run like a command's, so one writer replying a hundred times cannot make a hundred
free model calls: the webhook layer admits it through the same gate (permission, the daily limits,
the monthly budget, a duplicate), it runs as the pull request's `run` job, and here it is held to
the run's caps, can be stopped with `/beam cancel`, records its tokens on its run row (`beam-bot
usage`) and carries the usage footer. What differs from a skill run is only its size: one model
call, no checkout, no tracking comment; its answer is the reply in the thread.

Bots are ignored, and a reply is answered once: the answer carries a hidden marker naming the reply,
found again on a retry or a second delivery of the same reply.
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass
from typing import Any

import anyio

from bot.app import commands
from bot.app.commands import Command
from bot.app.context.budget import estimate_tokens
from bot.app.context.prompt import build_thread_prompt
from bot.app.github.client import InstallationClient
from bot.app.github.models import ReviewComment
from bot.app.github.payloads import CommentEvent
from bot.app.logs import bind as bind_log_context
from bot.app.reviews import render
from bot.app.runs import render as run_render
from bot.app.runs.context import JobContext
from bot.app.runs.deps import RunDeps, run_id_for
from bot.app.runs.usage import RunGuard, RunUsage, Stop
from bot.beam.completion import Completion
from bot.beam.errors import BeamError

log = logging.getLogger("beam.reviews")

# The name an answer's run goes by: its skill in `beam-bot usage` and /metrics.
THREAD_COMMAND = run_render.THREAD_SKILL
# How often the answer looks at its run's row (a `/beam cancel`) and its time cap while the model
# writes: its one call is its only step, so the guard must be asked during it, not only before.
WATCH_SECONDS = 1.0
FINAL_STATUSES = ("succeeded", "failed", "interrupted", "cancelled")


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


def thread_command(event: CommentEvent) -> Command:
    """The run a question becomes. Its text is the reply's id, so the gate's duplicate check is one
    run per reply: two people asking "why?" in two threads are two runs, not a duplicate."""
    return Command(name=THREAD_COMMAND, text=str(event.comment.id))


@dataclass(frozen=True, slots=True)
class Thread:
    """A review thread the bot started: its first comment and every comment in it, oldest first."""

    root: ReviewComment
    comments: list[ReviewComment]

    def answered(self, comment_id: int, bot_login: str) -> bool:
        """Answered by an earlier run or attempt: a reply of the bot's that ends with the marker (a
        marker anyone else wrote, or one quoted inside a text, answers nothing: issue 40)."""
        login = bot_login.lower()
        ours = (c for c in self.comments if c.user is not None and c.user.login.lower() == login)
        return any(render.answers(c.body or "", comment_id) for c in ours)


async def read_thread(gh: InstallationClient, event: CommentEvent, bot_login: str) -> Thread | None:
    """The thread the reply is in when the bot started it; None when it did not (the reply is then an
    ordinary comment)."""
    repo, comment = event.repository, event.comment
    owner, name = repo.owner.login, repo.name
    assert comment.in_reply_to_id is not None
    root = await gh.get_review_comment(owner, name, comment.in_reply_to_id)
    if root.in_reply_to_id is not None:
        root = await gh.get_review_comment(owner, name, root.in_reply_to_id)
    if root.user is None or root.user.login.lower() != bot_login.lower():
        return None
    everything = await gh.list_review_comments(owner, name, event.number, limit=3000)
    thread = sorted(
        (c for c in everything if c.id == root.id or c.in_reply_to_id == root.id), key=lambda c: c.id
    )
    return Thread(root, thread)


class ThreadReplies:
    """Answers in the bot's threads, for the webhook layer: `read_thread` before admission, `answer`
    as the admitted run's handler."""

    def __init__(self, deps: RunDeps) -> None:
        self.deps = deps

    async def read(self, gh: InstallationClient, event: CommentEvent, bot_login: str) -> Thread | None:
        return await read_thread(gh, event, bot_login)

    async def answer(self, ctx: JobContext) -> None:
        await ThreadRun(self.deps, ctx).run()


@dataclass
class _End:
    """How an answer ended: the reply it posts and the run row's final values."""

    body: str
    values: dict[str, Any]


class ThreadRun:
    """One admitted question's run: its row, its guard and meter, one model call, the reply.

    The reply is written through the effects journal, and the final state is recorded before it (as a
    skill run's is): a retry after a crash or a GitHub failure writes that reply, never asks the model
    again, and never counts its tokens twice.
    """

    def __init__(self, deps: RunDeps, ctx: JobContext) -> None:
        self.deps = deps
        self.ctx = ctx
        self.run_id = run_id_for(ctx.job)
        bind_log_context(run_id=self.run_id)
        self.started = time.monotonic()
        self.usage = RunUsage.for_run(deps, self.run_id, ctx.installation_id, self.started)
        self.effects = deps.effects(ctx.gh)
        repo = ctx.event.repository
        self.owner, self.repo, self.number = repo.owner.login, repo.name, ctx.event.number
        self.comment_id = ctx.event.comment.id

    def key(self, step: str) -> str:
        return f"{self.run_id}:{step}"

    async def run(self) -> None:
        existing = await self.deps.store.get_run(self.run_id)
        if existing is not None:
            await self.effects.settle_run(self.run_id)
            if existing.get("status") in FINAL_STATUSES:
                return
        recorded = await self.effects.journal.lookup(self.key("final"))
        if recorded is not None:  # an earlier attempt ended; its reply is only written again
            await self._write(int(recorded.result["thread"]), dict(recorded.result))
            return
        if existing is None:
            event = self.ctx.event
            await self.deps.store.create_run(
                run_id=self.run_id,
                repo=event.repository.full_name,
                number=self.number,
                skill=THREAD_COMMAND,
                requester=self.ctx.requester,
                job_id=self.ctx.job.id,
            )
        await self.deps.store.update_run(self.run_id, status="running", started_at=time.time())
        login = await self.deps.identity.login()
        thread = await read_thread(self.ctx.gh, self.ctx.event, login) if login is not None else None
        if thread is None or thread.answered(self.comment_id, login or ""):
            # No longer the bot's to answer (its login is unknown, or an earlier run answered it).
            await self.deps.store.update_run(self.run_id, status="succeeded", finished_at=time.time())
            return
        end = await self._answer(thread)
        final = {"body": end.body, "values": end.values, "thread": thread.root.id}
        with anyio.CancelScope(shield=True):
            await self.effects.journal.record(self.key("final"), "final", final)
            await self.usage.record()
        await self._write(thread.root.id, final)
        if self.deps.observe is not None:
            usage = end.values.get("usage") or {}
            self.deps.observe(
                THREAD_COMMAND,
                str(end.values["status"]),
                float(end.values["latency_ms"]) / 1000,
                int(usage.get("prompt_tokens") or 0),
                int(usage.get("completion_tokens") or 0),
            )

    async def _write(self, root_id: int, final: dict[str, Any]) -> None:
        body, values = str(final["body"]), dict(final["values"])
        await self.effects.reply(self.key("answer"), self.owner, self.repo, self.number, root_id, body)
        await self.deps.store.update_run(self.run_id, **values)

    async def _answer(self, thread: Thread) -> _End:
        """Ask the model, under the run's guard: the caps and `/beam cancel` before the call, and the
        cancel and the time cap while it writes."""
        event, root = self.ctx.event, thread.root
        path = root.path or event.comment.path or ""
        line = root.line or event.comment.line
        head = event.pull_request.head.sha if event.pull_request is not None else None
        code = await self.ctx.gh.get_file(self.owner, self.repo, path, head) if path and head else None
        history = [(c.user.login if c.user else "ghost", c.body or "") for c in thread.comments]
        if all(c.id != self.comment_id for c in thread.comments):
            history.append((event.comment.user.login, event.comment.body))
        messages = build_thread_prompt(path, line, code, history)
        guard = await self.usage.arm(self.ctx.config.limits)
        prompt = sum(estimate_tokens(m["content"]) for m in messages)
        if await guard() is None:
            guard.stop = guard.before_call(prompt)
        completion: Completion | None = None
        failure: tuple[str, str | None] | None = None
        if guard.stop is None:
            try:
                with anyio.fail_after(self.deps.run_timeout):
                    completion = await self._call(messages, guard, prompt)
            except TimeoutError:
                self.usage.meter.count_cut(prompt)  # cut while the model wrote: its prompt was read
                failure = (f"the answer took longer than {self.deps.run_timeout:g} s", None)
            except BeamError as error:
                failure = (error.message, error.code)
            except Exception as error:  # a model failure still gets an answer in the thread
                log.exception("%s#%s: the thread answer failed", event.repository.full_name, self.number)
                failure = (str(error) or type(error).__name__, None)
        return self._end(completion, guard.stop, failure)

    async def _call(self, messages: list[dict[str, str]], guard: RunGuard, prompt: int) -> Completion | None:
        """The one model call, stopped as soon as the guard says so (None then). A call stopped so
        still cost its prompt, about `prompt` tokens: the meter counts it (a cancelled command's
        calls count too, each ending before its run stops), not the 0 a call cut short reports."""
        answered: list[Completion] = []
        failed: list[Exception] = []
        async with anyio.create_task_group() as group:

            async def call() -> None:
                try:
                    answered.append(await self.usage.meter.complete(list(messages), []))
                except Exception as error:  # raised outside the group: one error, not a group
                    failed.append(error)
                group.cancel_scope.cancel()

            async def watch() -> None:
                while True:
                    await anyio.sleep(WATCH_SECONDS)
                    if await guard() is not None:
                        group.cancel_scope.cancel()
                        return

            group.start_soon(call)
            group.start_soon(watch)
        if failed:
            raise failed[0]
        if answered:
            guard.stop = None  # it answered before the stop was seen: the answer stands
            return answered[0]
        self.usage.meter.count_cut(prompt)
        return None

    def _end(
        self, completion: Completion | None, stop: Stop | None, failure: tuple[str, str | None] | None
    ) -> _End:
        spent = self.usage.summary(0)
        meter = self.usage.meter
        values: dict[str, Any] = {
            "finished_at": time.time(),
            "latency_ms": int((time.monotonic() - self.started) * 1000),
            "model_used": spent.model,
            "usage": meter.token_usage().to_json(),
        }
        if failure is not None:
            reason, code = failure
            values.update(status="failed", error_code=code, error_message=reason)
            return _End(render.thread_failed(self.comment_id, spent), values)
        if stop is not None and stop.by is not None:
            values.update(status="cancelled")
            return _End(render.thread_cancelled(self.comment_id, self.run_id, stop.by, spent), values)
        if stop is not None:
            assert stop.limit is not None
            values.update(status="succeeded")
            return _End(render.thread_stopped(self.comment_id, stop.limit, stop.value, spent), values)
        assert completion is not None
        values.update(status="succeeded")
        return _End(render.thread_reply(completion.text or "", self.comment_id, spent), values)
