"""One skill run on a pull request: 👀, a tracking comment, a sandboxed checkout, the agent, the answer.

The run id is derived from the delivery, so a job retried after a crash finds its run row and its
tracking comment and edits them instead of posting twice. Every GitHub write goes through the effects
journal (bot/app/effects) under `<run id>:<step>`: a retry adopts the 👀, the tracking comment and the
review an earlier attempt made; a recorded final state is only written again; a posted review means
the run is complete. Read-only skills keep their conversation after each tool round, so a retry
continues there. Whatever happens, the tracking comment ends in a final state (answer or failure with
the run id): a silent failure is a bug.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from bot.app.checks.tool import CHECK_TOOL_REFUSALS, checks_tool
from bot.app.context.diff_context import DiffCut, overflow_retry
from bot.app.context.linters import lint_skipped
from bot.app.context.prompt import Coverage
from bot.app.effects.conversation import RunConversation
from bot.app.git.checkout import CheckoutError, RunTree
from bot.app.github.api import GitHubError
from bot.app.github.client import PullFile, PullRequest
from bot.app.jobs.signals import Reschedule
from bot.app.logs import bind as bind_log_context
from bot.app.runs import render
from bot.app.runs.context import JobContext
from bot.app.runs.deps import (
    MAX_KNOWN_PATHS,
    MAX_PULL_FILES,
    RESUMABLE_SKILLS,
    RUN_NAMESPACE,
    Outcome,
    RunDeps,
    run_id_for,
)
from bot.app.runs.host_tools import ToolReport
from bot.app.runs.memory import RunMemory
from bot.app.runs.outage import GitHubWaits
from bot.app.runs.plan import FollowUp, RunPlan
from bot.app.runs.skill_agent import run_tools, skill_runner
from bot.app.runs.tracker import Tracker
from bot.app.runs.tracking_comment import TrackingComment
from bot.app.runs.usage import RunUsage, stopped_outcome
from bot.app.runs.workspace import RunWorkspace
from bot.beam.commit_tree import CommitTree
from bot.beam.errors import BeamError
from bot.beam.hub import RiverBeam
from bot.beam.sandbox import WorkingTree
from bot.beam.types import AgentResult, ContentPart, InvokeRequest

log = logging.getLogger("beam.runs")

__all__ = ["MAX_PULL_FILES", "RUN_NAMESPACE", "Outcome", "RunDeps", "SkillRun", "run_id_for"]

OnInterrupt = Callable[
    ["SkillRun", AgentResult, WorkingTree, RunTree, "PullRequest | None"], Awaitable[Outcome]
]
# A review on a pull request: the model's calls and what follows them (reviews/command.py), which
# `runs` may not import; a run without it (`/beam summarize`, a bare test) runs `SkillRun._agent`.
ReviewStep = Callable[
    ["SkillRun", WorkingTree | CommitTree, RunTree, str, PullRequest, list[PullFile], int], Awaitable[Outcome]
]
# What an earlier attempt of this run already achieved, if it got past its point of no return.
Recover = Callable[["SkillRun"], Awaitable["Outcome | None"]]
FINAL_STATUSES = ("succeeded", "failed", "interrupted", "cancelled")


class SkillRun:
    """One command's run; its checkout, its tracking comment and its waits for GitHub are collaborators
    it holds (`workspace`, `tracking`, `waits`)."""

    def __init__(
        self,
        deps: RunDeps,
        ctx: JobContext,
        on_interrupt: OnInterrupt | None = None,
        recover: Recover | None = None,
        plan: RunPlan | None = None,
        review: ReviewStep | None = None,
    ) -> None:
        self.deps = deps
        self.review = review
        self.ctx = ctx
        self.on_interrupt = on_interrupt
        self.recover = recover
        self.plan = plan or RunPlan()
        event = ctx.event
        self.owner = event.repository.owner.login
        self.repo = event.repository.name
        self.number = event.number
        self.run_id = run_id_for(ctx.job)
        bind_log_context(run_id=self.run_id)  # every later line of this job's task carries it
        self.skill = ctx.command.skill or ctx.command.name
        self.progress = render.Progress(command=f"/beam {ctx.command.name}", run_id=self.run_id)
        self.started = time.monotonic()
        self.usage = RunUsage.for_run(deps, self.run_id, ctx.installation_id, self.started)
        self.effects = deps.effects(ctx.gh)
        self.tracking = TrackingComment(
            deps.store, self.effects, self.run_id, self.owner, self.repo, self.number
        )
        self.workspace = RunWorkspace(deps, ctx, self.plan, self.run_id, self.skill)
        self.waits = GitHubWaits(deps, ctx, self.tracking, self.progress, self.usage)

    @property
    def follow_up(self) -> FollowUp | None:
        """The bot's own branch this run continues, once the pull request is known (approvals/)."""
        return self.workspace.follow_up

    def key(self, step: str) -> str:
        """The effects-journal key of one of this run's writes."""
        return self.tracking.key(step)

    async def publish(self, body: str, *, kind: str = "edit") -> None:
        """Write the tracking comment (created once, then edited)."""
        await self.tracking.publish(body, kind=kind)

    def protected_refs(self, pull: PullRequest | None) -> list[str]:
        return self.workspace.protected_refs(pull)

    async def _start(self, existing: dict[str, Any] | None) -> None:
        event = self.ctx.event
        await self.ctx.acknowledge()  # made at admission already: the journal has it
        if existing is None:
            await self.deps.store.create_run(
                run_id=self.run_id,
                repo=event.repository.full_name,
                number=self.number,
                skill=self.skill,
                requester=event.comment.user.login,
                job_id=self.ctx.job.id,
                status="running",
                started_at=time.time(),
            )
        else:
            await self.deps.store.update_run(self.run_id, status="running", started_at=time.time())
        await self.publish(render.working(self.progress))

    # -- the run --------------------------------------------------------------------------------

    async def run(self) -> None:
        """Run and publish; raises RetryableError only when a later attempt may succeed.

        A job may run twice (a worker died before recording its end), so an attempt first looks at
        what an earlier one left: a finished run is not redone, and a recovered outcome (an author
        run whose push is already held) is only published again.
        """
        existing = await self.deps.store.get_run(self.run_id)
        if existing is not None:
            await self.effects.settle_run(self.run_id)
            self.tracking.comment_id = existing.get("tracking_comment_id")
            if existing.get("status") in FINAL_STATUSES:
                log.info("run %s already ended (%s); nothing to redo", self.run_id, existing["status"])
                return
            if existing.get("cancelled_by"):  # `/beam cancel` came before the run started
                await self._finish(Outcome("", cancelled_by=existing["cancelled_by"]), None)
                return
            try:
                # The hook first: what an earlier attempt achieved (a held push to watch again, a
                # posted review) is re-armed even where its final state was recorded too.
                recovered = await self.recover(self) if self.recover is not None else None
                if recovered is None and await self._resume_finished():
                    return
            except GitHubError as error:  # the review it posts again, or looks for, with GitHub down
                await self._finish(None, await self.waits.failure(error))
                return
            if recovered is not None:
                log.info("run %s: an earlier attempt got this far; publishing its outcome", self.run_id)
                await self._finish(recovered, None)
                return
        await self._start(existing)
        outcome: Outcome | None = None
        failure: tuple[str, str | None] | None = None
        try:
            with anyio.fail_after(self.deps.run_timeout):
                outcome = await self._execute()
        except TimeoutError:
            failure = (render.timed_out(self.deps.run_timeout), None)
        except BeamError as error:
            failure = (render.beam_failure(error.message, error.detail, error.entry.hint), error.code)
        except CheckoutError as error:
            failure = (render.checkout_failed(error), None)
        except GitHubError as error:
            failure = await self.waits.failure(error)  # or a wait for GitHub (runs/outage.py)
        except Reschedule:
            raise  # a write of an earlier attempt may still land: the job runs again when it cannot
        except Exception:
            log.exception("run %s failed", self.run_id)
            failure = (render.INTERNAL_ERROR, None)
        await self._finish(outcome, failure)

    async def _resume_finished(self) -> bool:
        """An earlier attempt recorded its final state: write it again, as it was, and stop. (What
        else an earlier attempt achieved is the `recover` hook's: a held push, a posted review.)"""
        final = await self.effects.journal.lookup(self.key("final"))
        if final is None:
            return False
        log.info("run %s: its final state was recorded; writing it again", self.run_id)
        await self.waits.write_final(
            str(final.result.get("body", "")), dict(final.result.get("values") or {})
        )
        return True

    async def _finish(self, outcome: Outcome | None, failure: tuple[str, str | None] | None) -> None:
        """Record the final state, then write it: a retry that finds it recorded only writes it again."""
        latency = int((time.monotonic() - self.started) * 1000)
        values: dict[str, Any] = {"finished_at": time.time(), "latency_ms": latency}
        spent = self.usage.summary(len(self.progress.tools))
        if outcome is not None:
            by = outcome.cancelled_by
            body = (
                render.cancelled(self.progress, by, outcome.answer, spent)
                if by
                else render.finished(self.progress, outcome.answer, outcome.notes, spent)
            )
            result = outcome.result
            held = outcome.held or (result is not None and result.interrupted)
            status = "cancelled" if by else "interrupted" if held else "succeeded"
            values.update(status=status, summary={"tools": self.progress.tools, "notes": outcome.notes})
            # The meter's counts, as the footer's: every call of the run, the check of each finding
            # too, and a review answered as structured output, which has no agent result at all.
            values["model_used"] = (result.model_used if result is not None else None) or spent.model
            values["usage"] = self.usage.meter.token_usage().to_json()
        else:
            reason, code = failure or (render.NO_ANSWER, None)
            body = render.failed(self.progress, reason, code, spent)
            values.update(status="failed", error_code=code, error_message=reason)
        with anyio.CancelScope(shield=True):
            await self.effects.journal.record(self.key("final"), "final", {"body": body, "values": values})
        await self.waits.write_final(body, values)
        await self.usage.record()
        if self.deps.observe is not None:
            usage = values.get("usage") or {}
            self.deps.observe(
                self.skill,
                str(values["status"]),
                latency / 1000,
                int(usage.get("prompt_tokens") or 0),
                int(usage.get("completion_tokens") or 0),
            )

    async def _execute(self) -> Outcome:
        event, gh = self.ctx.event, self.ctx.gh
        pull: PullRequest | None = None
        files: list[PullFile] = []
        total = 0
        if event.on_pull_request:
            pull = await gh.get_pull(self.owner, self.repo, self.number)
            files = await gh.list_pull_files(self.owner, self.repo, self.number, max_files=MAX_PULL_FILES + 1)
            total = max(len(files), pull.changed_files or 0)
            files = files[:MAX_PULL_FILES]
            if self.plan.follow_up is not None:
                self.workspace.follow_up = await self.plan.follow_up(pull)
        tree, run_tree, head_sha = await self.workspace.checkout(pull, [f.filename for f in files])
        try:
            if self.review is not None and self.skill == "review" and pull is not None:
                return await self.review(self, tree, run_tree, head_sha, pull, files, total)
            return await self._agent(tree, run_tree, head_sha, pull, files, total)
        finally:
            with anyio.CancelScope(shield=True):
                await run_tree.remove()

    async def _agent(
        self,
        tree: WorkingTree | CommitTree,
        run_tree: RunTree,
        head_sha: str,
        pull: PullRequest | None,
        files: list[PullFile],
        total: int,
    ) -> Outcome:
        """Every skill but a review on a pull request (that is `self.review`'s): one call, retried once
        with half the diff (by whole hunks) when the model's context overflowed before any tool ran."""
        event = self.ctx.event
        report = ToolReport()
        blob_base = f"{event.repository.html_url}/blob/{head_sha}"

        def blob_url(path: str, start: int, end: int) -> str:
            return f"{blob_base}/{path}#L{start}-L{end}"

        # Facts are kept per pull request (or issue) by the server, and come back as data (issue 28).
        memory = RunMemory(self.deps.store, event.repository.full_name, self.number)
        remembered = await memory.facts()
        guard = await self.usage.arm(self.ctx.config.limits)
        cap = guard.limits.check_runs_per_run
        extra = [
            memory.remember_tool(),  # kept only by skills that allowlist `remember` (author)
            # `run_checks` (author): where the repository has checks and the jail can be built.
            *checks_tool(self.deps.checks, run_tree.path, self.ctx.config, event.repository.full_name, cap),
        ]
        # No `review_change` here: a review is the review pass's (reviews/review_pass.py).
        tools = run_tools(tree, report, blob_url=blob_url, extra=extra)
        hub = RiverBeam(memory=memory)
        checkpoint = None
        if self.skill in RESUMABLE_SKILLS:
            checkpoint = RunConversation(self.effects.journal, self.run_id)
        # A plan's own refusals (e.g. BEM-338 outside `docs.paths`) and the checks tool's go back to
        # the model too.
        hub.register_agent(
            skill_runner(
                self.skill,
                self.usage.meter,
                tools,
                checkpoint=checkpoint,
                refusals=self.plan.refusals_for_model | CHECK_TOOL_REFUSALS,
                should_stop=guard,
            )
        )
        tracker = Tracker(self.progress, self.publish)
        session = uuid.uuid5(RUN_NAMESPACE, f"{event.repository.full_name}#{self.number}")
        notes: list[str] = []
        prompts = self.workspace.prompts(tree, pull, total, remembered=remembered)

        async def build(shown: list[PullFile], one_call: bool) -> Coverage:
            return (await prompts.coverage(shown, one_call=one_call))[0]

        async def call(coverage: Coverage, cut: DiffCut | None) -> AgentResult:
            request = InvokeRequest(
                agent_name=self.skill,
                content=[ContentPart.text_part(coverage.calls[0])],
                session_id=session,
                request_id=uuid.UUID(self.run_id),
                metadata={"repository": event.repository.full_name, "number": self.number},
            )
            return (await hub.invoke(request, on_frame=tracker)).result

        def overflowed(cut: DiffCut) -> None:
            log.warning("run %s: the prompt overflowed the context; half the diff now", self.run_id)
            memory.forget_turns()
            notes.append(cut.named())

        # The context overflowed (BEM-092) before any tool ran: once more with the diff cut to half, by
        # whole hunks; a second overflow ends with the code.
        result = await overflow_retry(
            files, build, call, ran=lambda: bool(self.progress.tools), on_overflow=overflowed
        )
        coverage, context = prompts.built[-1][0], prompts.built[0][1]
        await tracker.flush()
        if guard.stop is not None:  # a cap or `/beam cancel` stopped it: what it has, and why
            return Outcome(result=result, **stopped_outcome(guard.stop, result.text))
        if result.interrupted:
            if self.on_interrupt is None or not isinstance(tree, WorkingTree):
                raise BeamError("BEM-335", {"detail": render.CANNOT_PUSH})
            return await self.on_interrupt(self, result, tree, run_tree, pull)
        known = set(await anyio.to_thread.run_sync(list_paths, tree))
        answer = render.link_citations(result.text, known, blob_base)
        notes += render.not_read_note(coverage.skipped, coverage.cut + report.truncated, total, len(files))
        notes += render.coverage_lines(coverage.left_out, lint_skipped(context.lint))
        notes += render.fetch_cap_note(tree.refused if isinstance(tree, CommitTree) else [])
        return Outcome(answer=answer, notes=notes, result=result)


def list_paths(tree: WorkingTree | CommitTree) -> list[str]:
    """The checkout's paths, for linking the citations of an answer (a bounded list)."""
    try:
        return tree.list_files("")[:MAX_KNOWN_PATHS]
    except BeamError:
        return []
