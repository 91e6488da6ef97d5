"""One automatic review on a checkout of the head: the review skill, read-only, posting at most one
review of the findings that are new and on lines that changed since the last reviewed head.

The run watches its pull request's generation (reviews/state.py): when a newer push or `closed`
moved it on, the run stops at its next step (a frame of the agent, or the watcher's next look) and
posts nothing. Like a command's, the agent runs under the per-run token and time caps (and what is
left of the monthly budget) of the repository's effective limits: the guard stops it at its next step,
and the outcome says which cap. The checkout reads files only; nothing from the pull request is run,
so a fork is safe.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import anyio
import anyio.lowlevel

from bot.app.effects.journal import Journal
from bot.app.github.client import InlineComment, InstallationClient, PullRequest
from bot.app.limits.policy import Limits
from bot.app.repo_config import RepoLimits
from bot.app.repo_config.review_rules import ReviewRules
from bot.app.reviews import render
from bot.app.reviews.finding_flow import FindingFlow
from bot.app.reviews.findings import fresh_findings, known_keys, review_holding
from bot.app.reviews.prompt import build_review_prompts
from bot.app.reviews.scope import Scope
from bot.app.reviews.state import Entry
from bot.app.runs import render as run_render
from bot.app.runs.diffmap import DiffMap
from bot.app.runs.host_tools import CheckedSuggestions, RunLedger, host_tools
from bot.app.runs.linters import lint_skipped
from bot.app.runs.outage import draft_key
from bot.app.runs.review_context import UntrustedSection, merge_parts, review_context
from bot.app.runs.run import RunDeps
from bot.app.runs.selection import select_findings
from bot.app.runs.skill_agent import review_in_text, skill_runner
from bot.app.runs.usage import RunUsage, Stop
from bot.beam.errors import BeamError
from bot.beam.hub import RiverBeam
from bot.beam.sandbox import SandboxRoot, WorkingTree
from bot.beam.sandbox_tools import sandbox_tools
from bot.beam.types import ContentPart, InvokeRequest, StreamChunk, StreamChunkType

WATCH_INTERVAL = 1.0  # seconds between the watcher's looks at the generation

Current = Callable[[], Awaitable[bool]]


@dataclass(frozen=True)
class Target:
    """The pull request a review job is for, as the trigger stored it in the job's payload."""

    repo: str
    number: int
    installation_id: int
    clone_url: str
    default_branch: str
    html_url: str

    @property
    def owner(self) -> str:
        return self.repo.split("/", 1)[0]

    @property
    def name(self) -> str:
        return self.repo.split("/", 1)[1]

    def payload(self) -> dict[str, Any]:
        return {
            "repo": self.repo,
            "number": self.number,
            "installation_id": self.installation_id,
            "clone_url": self.clone_url,
            "default_branch": self.default_branch,
            "html_url": self.html_url,
        }

    @classmethod
    def of(cls, payload: dict[str, Any]) -> Target:
        return cls(
            str(payload["repo"]),
            int(payload["number"]),
            int(payload["installation_id"]),
            str(payload["clone_url"]),
            str(payload["default_branch"]),
            str(payload.get("html_url", "")),
        )


log = logging.getLogger("beam.reviews")


@dataclass
class AgentOutcome:
    """`stopped`: superseded or closed; `capped`: a per-run cap stopped it before it posted (`stop`)."""

    kind: Literal["reviewed", "no_findings", "stopped", "capped"]
    url: str | None = None
    findings: int = 0
    truncated: list[str] = field(default_factory=list)
    stop: Stop | None = None
    usage: run_render.Usage | None = None
    left_out: list[str] = field(default_factory=list)  # files no call read, each with why
    lint_skipped: list[str] = field(default_factory=list)  # linters that could not run


@dataclass
class AgentReview:
    deps: RunDeps
    gh: InstallationClient
    target: Target
    pull: PullRequest
    scope: Scope
    changed: dict[str, set[int]] | None  # lines changed since the last review; None: full review
    since: str | None
    current: Current  # still the newest generation?
    bot_login: str
    limits: RepoLimits = field(default_factory=RepoLimits)  # the repository's `limits:` section
    rules: ReviewRules = field(default_factory=ReviewRules)  # the repository's `review:` section
    # Extra data for every call (path instructions, findings already dismissed), filled by the caller.
    sections: Sequence[UntrustedSection] = ()
    findings: FindingFlow | None = None  # the findings ledger (reviews/finding_flow.py)

    async def run(self, run_id: str) -> AgentOutcome:
        """Review under `run_id`, the run the ledger admitted (reviews/admission.py)."""
        head = self.pull.head.sha
        started = time.monotonic()  # the time cap counts from here, as a command's from its start
        token = await self.deps.installation_token(self.target.installation_id)
        branch = self.target.default_branch
        refs = [f"refs/heads/{branch}:refs/heads/{branch}"]
        refs.append(f"refs/pull/{self.pull.number}/head:refs/pull/{self.pull.number}/head")
        checkouts = self.deps.checkouts
        await checkouts.update_mirror(self.target.repo, self.target.clone_url, token, refs)
        await checkouts.discard_leftover(self.target.repo, run_id)
        local = f"beam/pr-{self.pull.number}/auto-review-{run_id[:8]}"
        run_tree = await checkouts.create_run_tree(self.target.repo, run_id, head, local)
        outcome = AgentOutcome("stopped")
        error: Exception | None = None
        try:
            with anyio.CancelScope() as scope:
                async with anyio.create_task_group() as group:
                    group.start_soon(self._watch, scope)
                    try:
                        with anyio.fail_after(self.deps.run_timeout):
                            outcome = await self._agent(run_tree.path, run_id, scope, started)
                    except Exception as exc:  # re-raised below, outside the task group
                        error = exc
                    group.cancel_scope.cancel()
            if scope.cancelled_caught:
                return AgentOutcome("stopped")
            if error is not None:
                raise error
            return outcome
        finally:
            with anyio.CancelScope(shield=True):
                await run_tree.remove()

    async def _watch(self, scope: anyio.CancelScope) -> None:
        while True:
            await anyio.sleep(WATCH_INTERVAL)
            if not await self.current():
                scope.cancel()
                return

    async def _agent(self, path: Any, run_id: str, scope: anyio.CancelScope, started: float) -> AgentOutcome:
        head = self.pull.head.sha
        protected = sorted({"main", "master", self.target.default_branch, self.pull.base.ref})
        tree = WorkingTree(SandboxRoot(path), protected, allowed_push_branches=set())
        existing = await self.gh.list_review_comments(
            self.target.owner, self.target.name, self.pull.number, limit=3000
        )
        seen = known_keys(existing, self.bot_login)
        result = AgentOutcome("no_findings")
        # What the review used (issue 11): its body's footer, and the installation's monthly tokens.
        usage = RunUsage.for_run(self.deps, run_id, self.target.installation_id, started)
        steps = [0]
        span = render.commit_range(Entry("reviewed", head, self.since, self.changed is None))

        drafts = Journal(self.deps.store)

        async def post(body: str, comments: list[dict[str, Any]]) -> int | None:
            if not await self.current():
                scope.cancel()
                await anyio.lowlevel.checkpoint()  # the cancellation lands here: nothing is posted
            # Kept before anything is posted: if GitHub cannot take it now, the job waits for GitHub
            # (review.py) and the next attempt posts this, without asking the model again.
            await drafts.note(draft_key(run_id), "review_draft", {"body": body, "comments": comments})
            if self.findings is not None:  # a finding dismissed on this pull request stays dismissed
                comments = await self.findings.screen(comments, Path(path), head)
            chosen = select_findings(fresh_findings(comments, self.changed, seen), self.rules)
            kept = chosen.kept
            if not kept:
                await drafts.note(draft_key(run_id), "review_draft", {"posted": None})
                return None
            rules = self.rules
            held = run_render.not_posted(chosen.below, chosen.over, rules.severity, rules.max_comments)
            body = f"{body}\n\n{held}" if held else body
            fields = InlineComment.model_fields
            inline = [InlineComment.model_validate({k: v for k, v in c.items() if k in fields}) for c in kept]
            review = await self.gh.create_review(
                self.target.owner,
                self.target.name,
                self.pull.number,
                commit_id=head,
                body=run_render.with_usage(
                    render.review_body(body, span, self.changed is None), usage.summary(steps[0])
                ),
                comments=inline,
            )
            result.kind, result.url, result.findings = "reviewed", review.html_url, len(inline)
            if self.findings is not None:
                await self.findings.record(kept, head, self.bot_login)
            await drafts.note(draft_key(run_id), "review_draft", {"posted": review.id})
            return review.id

        blob_base = f"{self.target.html_url}/blob/{head}"
        diff = DiffMap.from_files((f.filename, f.patch) for f in self.scope.files)
        limits = self.deps.policy.limits
        # Each call of a chunked review posts into `parts`; the findings are merged and posted once.
        parts: list[tuple[str, list[dict[str, Any]]]] = []
        chunked = False

        async def collect(body: str, comments: list[dict[str, Any]]) -> int | None:
            parts.append((body, comments))
            return len(parts)

        async def post_now(body: str, comments: list[dict[str, Any]]) -> int | None:
            """One call: the review is posted from inside its tool call, as it always was."""
            parts.append((body, comments))
            return await post(run_render.with_coverage(body, result.left_out, result.lint_skipped), comments)

        guard = await usage.arm(self.limits)

        async def on_frame(frame: StreamChunk) -> None:
            steps[0] += frame.type is StreamChunkType.TOOL
            if not await self.current():
                scope.cancel()

        truncated: list[str] = []

        async def read_all(limits: Limits) -> None:
            nonlocal chunked
            context = await review_context(tree.sandbox, self.scope.files, self.rules, limits, self.sections)
            prompts = build_review_prompts(
                self.target.repo, self.pull, self.scope, self.changed, self.since, context
            )
            result.left_out = prompts.plan.left_out_names()
            result.lint_skipped = lint_skipped(context.lint)
            chunked = len(prompts.texts) > 1
            for index, text in enumerate(prompts.texts):
                ledger = RunLedger()
                tools = sandbox_tools(tree) + host_tools(
                    tree.sandbox,
                    ledger,
                    diff=diff,
                    post_review=collect if chunked else post_now,
                    blob_url=lambda p, a, b: f"{blob_base}/{p}#L{a}-L{b}",
                    fold_outside=False,
                    checked=CheckedSuggestions(ruff=context.lint is not None),
                )
                hub = RiverBeam()
                # A missing file or a refused path goes back to the model, as in `/beam review`: small
                # models often guess a path, and a guess must not end the review with nothing.
                hub.register_agent(skill_runner("review", usage.meter, tools, should_stop=guard))
                call_id = uuid.UUID(run_id) if index == 0 else uuid.uuid5(uuid.UUID(run_id), f"call-{index}")
                request = InvokeRequest(
                    agent_name="review",
                    content=[ContentPart.text_part(text)],
                    session_id=uuid.UUID(run_id),
                    request_id=call_id,
                    metadata={"repository": self.target.repo, "number": self.pull.number},
                )
                answer = (await hub.invoke(request, on_frame=on_frame)).result
                if guard.stop is None and not answer.interrupted:  # findings written as JSON in the text
                    await review_in_text(tools, answer.text)
                truncated.extend(ledger.truncated)
                if guard.stop is not None:
                    break

        async def read_overflowing(limits: Limits) -> None:
            try:
                await read_all(limits)
            except BeamError as error:
                # The model's context overflowed (BEM-092) before any tool ran: once more, with half
                # the diff per call in a fresh conversation; a second overflow ends with the code.
                if error.code != "BEM-092" or steps[0] > 0 or parts:
                    raise
                await read_all(replace(limits, review_tokens_per_call=limits.review_tokens_per_call // 2))

        try:
            draft = await drafts.lookup(draft_key(run_id))
            if draft is not None and "body" in draft.result:  # finished, not posted: post it now
                log.info("auto-review %s: posting the review an earlier attempt could not", run_id)
                kept_body, kept_comments = str(draft.result["body"]), list(draft.result.get("comments") or [])
                parts.append((kept_body, kept_comments))  # for the fixed findings, as a call's part
                made = review_holding(kept_comments, existing, self.bot_login)
                if made is None:
                    await post(kept_body, kept_comments)
                else:  # GitHub made it after all: the summary links it, nothing is posted again
                    result.kind, result.findings = "reviewed", made[1]
                    result.url = f"{self.pull.html_url}#pullrequestreview-{made[0]}"
                    await drafts.note(draft_key(run_id), "review_draft", {"posted": made[0]})
            else:
                await read_overflowing(limits)
            if guard.stop is None and parts:
                body, comments = merge_parts(parts)
                if chunked:
                    await post(run_render.with_coverage(body, result.left_out, result.lint_skipped), comments)
                if self.findings is not None:  # what the review no longer says, on changed lines
                    await self.findings.settle_fixed(comments, Path(path), head)
        finally:
            with anyio.CancelScope(shield=True):
                await usage.record()
        result.truncated = truncated
        result.usage = usage.summary(steps[0])
        if guard.stop is not None and result.kind != "reviewed":  # a posted review is the whole work
            result.kind, result.stop = "capped", guard.stop
        return result
