"""What each webhook does, by (event, action): a `/beam` comment becomes a command under one frozen
`JobContext`; a pull request that opens or changes may get an automatic review (reviews/trigger.py);
a reply in a review thread the bot started is answered there, as a run admitted like a command's
(reviews/threads.py); a closed pull request ends its held pushes and cancels its automatic reviews.

Deciding is pure (`routing.decide`); here a command is authorised against the repository config, and
handed with its context to its handler: `/beam approve|reject` and `/beam author` to the approvals
flow, every other skill to a plain `SkillRun`.
"""

from __future__ import annotations

import itertools
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from types import MappingProxyType
from typing import Any

from bot.app import commands
from bot.app.approvals.flow import Approvals
from bot.app.approvals.update import Updates
from bot.app.commands import SKILL_COMMANDS, Command
from bot.app.github.api import GitHubError
from bot.app.github.client import GitHubApp, InstallationClient, event_client
from bot.app.github.payloads import CommentEvent
from bot.app.jobs.queue import Job
from bot.app.jobs.redeliveries import Redeliveries
from bot.app.jobs.signals import PermanentError, RetryableError, seconds_until
from bot.app.limits.ledger import Ledger
from bot.app.permissions import permission_at_least
from bot.app.repo_config import CONFIG_PATH, ConfigResult, load_repo_config
from bot.app.reviews.command import recover as recover_review
from bot.app.reviews.command import review_step
from bot.app.reviews.dismissals import Dismissals, ThreadResolved, is_dismissing_reply
from bot.app.reviews.threads import THREAD_COMMAND, ThreadReplies, is_thread_question, thread_command
from bot.app.reviews.trigger import ReviewTrigger
from bot.app.runs import render
from bot.app.runs.context import JobContext
from bot.app.runs.outage import run_job_waits
from bot.app.runs.run import RunDeps, SkillRun, run_id_for
from bot.app.webhooks.config_fetch import load_config_and_permission
from bot.app.webhooks.gate import Gate
from bot.app.webhooks.routing import Ignore, Reply, decide, parse_comment_event, parse_pull_request_event
from bot.app.webhooks.triage import REVIEW_ACTIONS, can_lead_to_work

log = logging.getLogger("beam.jobs")

RUN_REPLY_STEPS = 1001  # a run job's replies are `<run id>:reply-1001`, ... (triage's start at 1)
READ_ONLY_PR_SKILLS = frozenset({"review", "summarize", "commit-notes"})
ANSWERS = frozenset({"approve", "reject"})  # answers to a held push: authorised by the approvals flow

# A handler for one (event, action): the delivery's job and its parsed JSON payload.
EventHandler = Callable[[Job, dict[str, Any]], Awaitable[None]]
CommandHandler = Callable[[JobContext], Awaitable[None]]


def job_failure(error: GitHubError) -> RetryableError | PermanentError:
    """A GitHub failure as the worker pool reads it; a rate limit says when to come back."""
    if error.transient:
        return RetryableError(str(error), retry_after=seconds_until(error.retry_at))
    return PermanentError(str(error))


class Webhooks:
    """The event table and the command table, fixed at construction."""

    def __init__(
        self,
        github: GitHubApp,
        deps: RunDeps,
        approvals: Approvals,
        reviews: ReviewTrigger | None = None,
        threads: ThreadReplies | None = None,
    ) -> None:
        self.github = github
        self.deps = deps
        self.approvals = approvals
        self.reviews = reviews
        self.threads = threads
        self.gate = Gate(Ledger(deps.store), deps.policy)
        self.dismissals = Dismissals(deps.store)
        self.events: Mapping[tuple[str, str], EventHandler] = MappingProxyType(
            {
                ("issue_comment", "created"): self.on_comment,
                ("pull_request_review_comment", "created"): self.on_review_comment,
                ("pull_request", "closed"): self.on_pull_closed,
                ("pull_request_review_thread", "resolved"): self.on_thread_resolved,
                **{("pull_request", action): self.on_pull_update for action in REVIEW_ACTIONS},
            }
        )
        self.commands: Mapping[str, CommandHandler] = MappingProxyType(
            {
                "author": approvals.author,
                "docs": approvals.author,
                "update": Updates(approvals).update,
                "review": self.run_review,  # the review pass, in reviews/ (reviews/command.py)
                THREAD_COMMAND: self.run_thread,  # an answer in one of the bot's review threads
            }
        )

    async def handle(self, job: Job, event: str, data: dict[str, Any]) -> None:
        """Run the handler for this delivery's (event, action); other deliveries need nothing."""
        if not can_lead_to_work(event, data):  # the same triage as intake (jobs stored before it)
            log.debug("delivery %s: triage says no work", job.delivery_id)
            return
        action = data.get("action")
        handler = self.events.get((event, action)) if isinstance(action, str) else None
        if handler is None:
            log.info("delivery %s: nothing to do for %s %s", job.delivery_id, event, action)
            return
        await handler(job, data)

    async def on_comment(self, job: Job, data: dict[str, Any]) -> None:
        event = parse_comment_event(data)
        if event is None:
            log.warning("delivery %s: comment payload without the fields we need", job.delivery_id)
            return
        decision = decide(event, await self.deps.identity.login())
        if isinstance(decision, Ignore):
            log.info("delivery %s ignored: %s", job.delivery_id, decision.reason)
            return
        try:
            gh, installation_id = await event_client(self.github, event)
            await self._recovered_note(job, event, gh)
            if isinstance(decision, Reply):  # exactly once, through the effects journal (issue 8)
                repo = event.repository
                key = f"{run_id_for(job)}:reply-1"
                effects = self.deps.effects(gh)
                await effects.comment(
                    key, repo.owner.login, repo.name, event.number, decision.text, kind="reply"
                )
                return
            await self._command(job, event, decision.command, gh, installation_id)
        except GitHubError as error:
            raise job_failure(error) from error

    async def _recovered_note(self, job: Job, event: CommentEvent, gh: InstallationClient) -> None:
        """A command whose delivery the redelivery sweep recovered (issue 32) is answered as usual,
        after a line that says the bot was unavailable when it was posted, and since when."""
        if job.delivery_id is None:
            return
        found = await Redeliveries(self.deps.store).recovered(job.delivery_id)
        if found is None:
            return
        repo = event.repository
        text = render.recovered(found.delivered_at, found.outage_since)
        key = f"{run_id_for(job)}:recovered"
        await self.deps.effects(gh).comment(
            key, repo.owner.login, repo.name, event.number, text, kind="reply"
        )

    async def on_pull_closed(self, job: Job, data: dict[str, Any]) -> None:
        event = parse_pull_request_event(data)
        if event is None:
            log.warning("delivery %s: pull request payload without the fields we need", job.delivery_id)
            return
        await self.approvals.pull_closed(event)
        if self.reviews is not None:
            try:
                await self.reviews.pull_closed(event)
            except GitHubError as error:
                raise job_failure(error) from error

    async def on_pull_update(self, job: Job, data: dict[str, Any]) -> None:
        """A pull request opened or changed: maybe an automatic review (reviews/trigger.py)."""
        event = parse_pull_request_event(data)
        if event is None:
            log.warning("delivery %s: pull request payload without the fields we need", job.delivery_id)
            return
        if self.reviews is None:
            return
        try:
            await self.reviews.on_pull_event(event, job.delivery_id)
        except GitHubError as error:
            raise job_failure(error) from error

    async def on_review_comment(self, job: Job, data: dict[str, Any]) -> None:
        """A reply in a thread the bot started is answered there; anything else is a comment."""
        event = parse_comment_event(data)
        if event is not None and is_dismissing_reply(event):  # "won't fix" on a finding (issue 21)
            try:
                gh, _ = await event_client(self.github, event)
                effects, login = self.deps.effects(gh), await self.deps.identity.login()
                if await self.dismissals.on_reply(gh, effects, event, run_id_for(job), login):
                    return
            except GitHubError as error:
                raise job_failure(error) from error
        if self.threads is not None and event is not None:
            login = await self.deps.identity.login()
            if login is not None and is_thread_question(event, login):
                try:
                    if await self._thread_question(job, event, self.threads, login):
                        return
                except GitHubError as error:
                    raise job_failure(error) from error
        await self.on_comment(job, data)

    async def _thread_question(
        self, job: Job, event: CommentEvent, threads: ThreadReplies, login: str
    ) -> bool:
        """A question in one of the bot's review threads is admitted as a command is: the same
        permission and the same gate (daily limits, monthly budget, duplicates), its refusals said in
        the thread; the answer is its run job's (`on_run`). False when the thread is not the bot's."""
        gh, installation_id = await event_client(self.github, event)
        thread = await threads.read(gh, event, login)
        if thread is None:
            return False
        repo = event.repository
        config, permission = await load_config_and_permission(
            gh, repo.owner.login, repo.name, repo.default_branch, event.comment.user.login
        )
        effects = self.deps.effects(gh)
        command = thread_command(event)
        ctx = JobContext(job, event, command, gh, installation_id, config, effects, thread=thread.root.id)
        needed = ctx.config.trigger_permission
        if not permission_at_least(permission, needed):
            await ctx.reply(render.refusal(ctx.requester, needed))
        elif not thread.answered(event.comment.id, login):  # a second delivery of an answered reply
            await self.gate.admit(ctx)
        return True

    async def on_thread_resolved(self, job: Job, data: dict[str, Any]) -> None:
        """A resolved review thread dismisses the bot's finding in it (reviews/dismissals.py)."""
        event = ThreadResolved.parse(data)
        if event is None:
            log.warning("delivery %s: review thread payload without the fields we need", job.delivery_id)
            return
        try:
            gh = InstallationClient(self.github, event.installation_id)
            await self.dismissals.on_resolved(gh, event, await self.deps.identity.login())
        except GitHubError as error:
            raise job_failure(error) from error

    async def _command(
        self, job: Job, event: CommentEvent, command: Command, gh: InstallationClient, installation_id: int
    ) -> None:
        repo = event.repository
        config, permission = await load_config_and_permission(
            gh, repo.owner.login, repo.name, repo.default_branch, event.comment.user.login
        )
        ctx = JobContext(job, event, command, gh, installation_id, config, self.deps.effects(gh))
        if command.name in ANSWERS:
            await self.approvals.answer(ctx)
            return
        needed = ctx.config.trigger_permission
        if not permission_at_least(permission, needed):
            await ctx.reply(render.refusal(ctx.requester, needed))
            return
        if config.errors:
            await ctx.reply(render.render_config_errors(config.errors, repo.default_branch))
        if command.name == "cancel":
            await self.gate.cancel(ctx)
            return
        if command.name in SKILL_COMMANDS and not ctx.config.skill_enabled(command.name):
            await ctx.reply(render.skill_disabled(command.name))
            return
        if command.skill in READ_ONLY_PR_SKILLS and not event.on_pull_request:
            await ctx.reply(render.needs_pull_request(f"/beam {command.name}"))
            return
        # Admitted, the command runs as its own job (`on_run`), so this pull request's next comments
        # (a duplicate, a cancel) are read while it runs.
        await self.gate.admit(ctx)

    async def on_run(self, job: Job) -> None:
        """A `run` job: the admitted command of its delivery, under a context built afresh."""
        event = parse_comment_event(_delivery_json(job))
        parsed = await self._run_command(event) if event is not None else None
        if event is None or parsed is None:
            raise PermanentError(f"run job {job.id} has no command in its delivery")
        try:
            gh, installation_id = await event_client(self.github, event)
            repo = event.repository
            config = await _run_config(job, gh, repo.owner.login, repo.name, repo.default_branch)
            # Replies of the run job number apart from its delivery's (one run id, one journal).
            replies = itertools.count(RUN_REPLY_STEPS)
            thread = event.comment.in_reply_to_id if parsed.name == THREAD_COMMAND else None
            effects = self.deps.effects(gh)
            ctx = JobContext(job, event, parsed, gh, installation_id, config, effects, replies, thread)
            await self.commands.get(parsed.name, self.run_skill)(ctx)
        except GitHubError as error:  # GitHub down: the run job waits for it (runs/outage.py)
            raise (await run_job_waits(self.deps, job, error) or job_failure(error)) from error

    async def _run_command(self, event: CommentEvent) -> Command | None:
        """What an admitted run job runs: a question in a bot's thread (admitted only as such, since a
        well-formed command other than `help` is never one), or its delivery's command."""
        if self.threads is not None and event.is_review_comment:
            login = await self.deps.identity.login()
            if login is not None and is_thread_question(event, login):
                return thread_command(event)
        parsed = commands.parse(event.comment.body)
        return parsed if isinstance(parsed, Command) else None

    async def run_thread(self, ctx: JobContext) -> None:
        if self.threads is None:
            raise PermanentError(f"run {run_id_for(ctx.job)}: this process answers no review threads")
        await self.threads.answer(ctx)

    async def run_skill(self, ctx: JobContext) -> None:
        await SkillRun(self.deps, ctx).run()

    async def run_review(self, ctx: JobContext) -> None:
        await SkillRun(self.deps, ctx, recover=recover_review, review=review_step).run()


# How long after GitHub confirmed it the config read at admission may serve the run job: the command
# was admitted under that version moments before (the run job follows at once unless the queue is
# busy), and asking again would put one more round trip before the tracking comment.
ADMITTED_CONFIG_MAX_AGE = 5.0


async def _run_config(job: Job, gh: InstallationClient, owner: str, name: str, branch: str) -> ConfigResult:
    """The config a run job runs under: on its first attempt, the version its command was admitted
    with when this process had it confirmed less than `ADMITTED_CONFIG_MAX_AGE` ago; otherwise (a
    retry, a long wait in the queue, another version in this process's cache) GitHub is asked."""
    admitted = (job.payload or {}).get("config_version") if job.attempts <= 1 else None
    recent = gh.recent_file(owner, name, CONFIG_PATH, branch, ADMITTED_CONFIG_MAX_AGE) if admitted else None
    if recent is not None:

        async def read(*_: str) -> str | None:
            return recent.text

        taken = await load_repo_config(read, owner, name, branch)
        if taken.version == admitted:
            return taken
    return await load_repo_config(gh.get_file, owner, name, branch)


def _delivery_json(job: Job) -> dict[str, Any]:
    try:
        data = json.loads(job.delivery_payload or b"")
    except ValueError as error:
        raise PermanentError(f"job {job.id} has no readable delivery") from error
    if not isinstance(data, dict):
        raise PermanentError(f"job {job.id} has no readable delivery")
    return data
