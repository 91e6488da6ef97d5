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
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import anyio
import anyio.lowlevel

from bot.app.context.linters import lint_skipped
from bot.app.context.pass_prompts import Automatic, PromptBuilder
from bot.app.context.review_context import UntrustedSection
from bot.app.effects.journal import Journal
from bot.app.git.blob_budget import BlobBudget
from bot.app.github.client import InstallationClient, PullRequest
from bot.app.github.models import ReviewComment
from bot.app.repo_config import RepoLimits
from bot.app.repo_config.review_rules import ReviewRules
from bot.app.reviews import render
from bot.app.reviews.drafts import FrameLines, KeptReview, finish_kept_review, keep_body, note_posted
from bot.app.reviews.finding_flow import FindingFlow
from bot.app.reviews.findings import fresh_findings, known_keys
from bot.app.reviews.pass_end import PassEnd
from bot.app.reviews.posting import Draft, Poster
from bot.app.reviews.review_pass import ReviewPass
from bot.app.reviews.scope import Scope
from bot.app.reviews.state import Entry
from bot.app.runs import render as run_render
from bot.app.runs.run import RunDeps
from bot.app.runs.usage import RunUsage, Stop
from bot.beam.commit_tree import CommitTree
from bot.beam.sandbox import SandboxRoot
from bot.beam.types import StreamChunk, StreamChunkType

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
    """`stopped`: superseded or closed; `capped`: a per-run cap stopped it before it posted (`stop`);
    `not_reviewed`: the model never gave a review (`code`, `reason`), so nothing was posted."""

    kind: Literal["reviewed", "no_findings", "stopped", "capped", "not_reviewed"]
    url: str | None = None
    findings: int = 0
    truncated: list[str] = field(default_factory=list)
    stop: Stop | None = None
    usage: run_render.Usage | None = None
    left_out: list[str] = field(default_factory=list)  # files no call read, each with why
    lint_skipped: list[str] = field(default_factory=list)  # linters that could not run
    code: str | None = None  # not reviewed: why (a BEM code), and the sentence for the summary
    reason: str = ""
    partial: str = ""  # a partial review's line ("partial: stopped by X after Y of Z files")


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
        # A review reads the head from the mirror's objects: its run tree holds no file (issue 43).
        run_tree = await checkouts.create_run_tree(self.target.repo, run_id, head, local, checkout=False)
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
        """Build the request, choose the poster, run the pass: or post what an earlier attempt
        finished (drafts.py `finish_kept_review`), and the model is not asked again."""
        head = self.pull.head.sha
        tree = await self._tree(path)
        existing = await self.gh.list_review_comments(
            self.target.owner, self.target.name, self.pull.number, limit=3000
        )
        result = AgentOutcome("no_findings")
        # What the review used (issue 11): its body's footer, and the installation's monthly tokens.
        usage = RunUsage.for_run(self.deps, run_id, self.target.installation_id, started)
        steps = [0]
        journal = Journal(self.deps.store)
        task = Automatic(self.target.repo, self.scope.unread, self.changed, self.since)
        prompts = PromptBuilder(
            tree.sandbox,
            task,
            self.pull,
            self.scope.total,
            self.rules,
            self.deps.policy.limits,
            self.sections,
            label=f"auto-review {run_id}",
        )

        restored: list[FrameLines] = []  # a kept draft's, when this attempt posts it

        def lines() -> FrameLines:
            """What the poster frames the body with, read when the review is posted: what this
            attempt's prompts left out, its calls so far and the pass's partial line; for a kept
            draft, what the attempt that finished it knew (this one builds no prompt and asks no
            model). Called only once `review` (below) is made: by its post, or with a kept draft."""
            if restored:
                return restored[0]
            left_out, skipped = [], []
            if prompts.built:
                coverage, context = prompts.last
                left_out, skipped = coverage.left_out, lint_skipped(context.lint)
            return FrameLines(left_out, skipped, usage.summary(steps[0]), review.partial)

        poster = self._poster(run_id, Path(path), result, journal, existing, lines)

        async def post(body: str, comments: list[dict[str, Any]]) -> int | None:
            if not await self.current():
                scope.cancel()
                await anyio.lowlevel.checkpoint()  # the cancellation lands here: nothing is posted
            await keep_body(journal, run_id, body, comments, lines())
            return await poster(body, comments)

        async def post_kept(kept: KeptReview) -> int | None:
            if kept.lines is not None:
                restored.append(kept.lines)
            return await post(kept.body, kept.comments)

        async def on_frame(frame: StreamChunk) -> None:
            steps[0] += frame.type is StreamChunkType.TOOL
            if not await self.current():
                scope.cancel()

        blob_base = f"{self.target.html_url}/blob/{head}"
        review = ReviewPass(
            tree=tree,
            files=self.scope.files,
            prompts=prompts,
            meter=usage.meter,
            guard=await usage.arm(self.limits),
            post=post,
            blob_url=lambda p, a, b: f"{blob_base}/{p}#L{a}-L{b}",
            run_id=run_id,
            repository=self.target.repo,
            number=self.pull.number,
            on_frame=on_frame,
            fold_outside=False,
            passes=self.rules.passes_limit(self.deps.policy.limits.review_max_passes),
            verify=self.rules.verify,
        )
        end: PassEnd | None = None
        try:
            kept = await finish_kept_review(journal, run_id, existing, self.bot_login, post_kept)
            said: list[dict[str, Any]] | None = None  # what the review says: open findings it drops are fixed
            if kept is not None:
                said = kept.comments
                restored[:] = [kept.lines] if kept.lines is not None else []  # made after all: not posted
                # A partial review leaves its head unreviewed, and the summary says so, as when posted
                # by the attempt that ran the pass.
                result.partial = kept.lines.partial if kept.lines is not None else ""
                if kept.made is not None:  # GitHub made it after all: the summary links it
                    result.kind, result.findings = "reviewed", kept.made[1]
                    result.url = f"{self.pull.html_url}#pullrequestreview-{kept.made[0]}"
            else:
                end = await review.run()
                said = end.reported if end.kind == "reviewed" else None
            if said is not None and self.findings is not None:  # on changed lines
                await self.findings.settle_fixed(said, Path(path), head)
        finally:
            with anyio.CancelScope(shield=True):
                await usage.record()
        result.usage = usage.summary(steps[0])
        framed = lines()  # what the review left out: this attempt's, or the kept draft's
        result.left_out, result.lint_skipped = framed.left_out, framed.lint_skipped
        return result if end is None else ended(result, end)

    async def _tree(self, path: Any) -> CommitTree:
        """The head commit from the mirror's objects; only the changed files go to disk, for the
        linters. It writes nothing: every write is refused (BEM-342), so no ref can move."""
        checkouts = self.deps.checkouts
        budget = BlobBudget(checkouts.mirrors, self.target.repo, self.deps.max_fetch_bytes)
        mirror = checkouts.mirror_path(self.target.repo)
        tree = CommitTree(mirror, self.pull.head.sha, fetch=budget, scratch=SandboxRoot(path))
        changed = [f.filename for f in self.scope.files]
        await anyio.to_thread.run_sync(tree.materialise, [*changed, ".gitattributes"])
        return tree

    def _poster(
        self,
        run_id: str,
        path: Path,
        result: AgentOutcome,
        journal: Journal,
        existing: list[ReviewComment],
        lines: Callable[[], FrameLines],
    ) -> Poster:
        """The automatic review's door: new findings only, on lines changed since the last review,
        none a maintainer dismissed; the body framed by the range and what no call read; posted
        through the journal of GitHub writes, so a retry adopts the review an attempt began."""
        head, findings = self.pull.head.sha, self.findings
        seen = known_keys(existing, self.bot_login)
        span = render.commit_range(Entry("reviewed", head, self.since, self.changed is None))
        effects = self.deps.effects(self.gh)

        async def dismissed(comments: list[dict[str, Any]]) -> list[dict[str, Any]]:
            # A finding dismissed on this pull request stays dismissed.
            return comments if findings is None else await findings.screen(comments, path, head)

        async def fresh(comments: list[dict[str, Any]]) -> list[dict[str, Any]]:
            # New findings only, on lines changed since the last review, each with its marker.
            return fresh_findings(comments, self.changed, seen)

        async def through_writer(draft: Draft) -> int | None:
            if not draft.comments:
                await note_posted(journal, run_id, None)
                return None
            owner, name, number = self.target.owner, self.target.name, self.pull.number
            review = await effects.review(
                f"{run_id}:review",
                owner,
                name,
                number,
                commit_id=head,
                body=draft.body,
                comments=draft.inline(),
            )
            result.kind, result.url, result.findings = "reviewed", review.html_url, len(draft.comments)
            if findings is not None:
                await findings.record(draft.comments, head, self.bot_login)
            await note_posted(journal, run_id, review.id)
            return review.id

        def frame(body: str) -> str:
            # What the prompts left out (an earlier attempt's, when its kept draft is posted).
            framed = lines()
            covered = run_render.with_coverage(body, framed.left_out, framed.lint_skipped)
            return render.review_body(covered, span, self.changed is None)

        def footer() -> run_render.Usage:  # read when the review is posted: the calls so far
            return lines().usage

        return Poster(self.rules, through_writer, footer, [dismissed, fresh], frame)


def ended(result: AgentOutcome, end: PassEnd) -> AgentOutcome:
    """The outcome of a pass that ran: what it cut, and why it did not review or was partial."""
    result.truncated = end.truncated
    if end.kind == "not_reviewed":
        result.code, result.reason = end.code, end.reason
        # A cap before any finding is the summary's "stopped at a limit"; the next push tries again.
        result.kind, result.stop = ("capped", end.stop) if end.stop is not None else ("not_reviewed", None)
    elif end.kind == "partial":
        result.partial = end.reason
    return result
