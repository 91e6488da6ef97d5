"""`/beam review` on a pull request: the review pass (review_pass.py) inside a skill run.

The run (runs/run.py `SkillRun`) owns what every command has: 👀, the tracking comment, the checkout,
the caps, the final state and the waits for GitHub. This module gives it its two hooks, as `/beam
author` gets its own from the approvals layer: `step` (the findings ledger before and after, the pass,
and how a command posts: selection by `review.severity` and `max_comments`, the screen of dismissed
findings, the draft kept before it is posted) and `recover` (a review an earlier attempt finished is
posted from its draft, or found on GitHub, and the model is not asked again). A pass that did not
review ends the run as a failure with its BEM code (`BeamError`): the tracking comment says why, and
no review is posted.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import anyio

from bot.app.checks.tool import CHECK_TOOL_REFUSALS
from bot.app.context.linters import lint_skipped
from bot.app.context.prompt import Coverage
from bot.app.context.review_context import ReviewContext, UntrustedSection
from bot.app.effects.conversation import RunConversation
from bot.app.effects.writer import Written
from bot.app.git.checkout import RunTree
from bot.app.github.client import InlineComment, PullFile, PullRequest
from bot.app.repo_config.review_rules import ReviewRules
from bot.app.reviews.drafts import ReviewDraft, keep_draft, kept_draft
from bot.app.reviews.pass_end import BuildPrompts, PassPrompts
from bot.app.reviews.review_pass import ReviewPass
from bot.app.reviews.selection import rules_sections, select_findings
from bot.app.runs import render
from bot.app.runs.deps import RUN_NAMESPACE, Outcome
from bot.app.runs.findings_hook import ReviewFindings
from bot.app.runs.memory import RunMemory
from bot.app.runs.run import SkillRun, list_paths
from bot.app.runs.skill_agent import answered_in_text_note
from bot.app.runs.tracker import Tracker
from bot.app.runs.usage import stopped_outcome
from bot.beam.commit_tree import CommitTree
from bot.beam.errors import BeamError
from bot.beam.hub import RiverBeam
from bot.beam.sandbox import WorkingTree

log = logging.getLogger("beam.reviews")


@dataclass
class RunFindings:
    """The findings ledger's steps within one run, with what the run needs to call them: its tree, the
    head, the bot's login, and every comment the model reported (before any filter), which decides
    which open findings are fixed. Without a ledger (`findings` None) each step passes through."""

    findings: ReviewFindings | None
    tree: Path
    head: str
    bot_login: str
    reported: list[dict[str, Any]] = field(default_factory=list)

    async def before(self, rules: ReviewRules, paths: Sequence[str]) -> list[UntrustedSection] | None:
        return await self.findings.before(rules, paths) if self.findings is not None else None

    async def screen(self, comments: list[dict[str, Any]]) -> list[dict[str, Any]]:
        self.reported.extend(comments)
        if self.findings is None:
            return comments
        return await self.findings.screen(comments, self.tree, self.head)

    async def after(self) -> list[str]:
        """The notes for the run's answer: the count of the pull request's findings, if any."""
        if self.findings is None:
            return []
        line = await self.findings.after(self.reported, self.tree, self.head, self.bot_login)
        return [line] if line else []


async def ledger_of(run: SkillRun) -> tuple[ReviewFindings, str] | None:
    """The findings ledger of this `/beam review` and the bot's login, when the app gave one."""
    make = run.deps.review_findings
    login = await run.deps.identity.login() if make is not None else ""
    if make is None or not login:
        return None
    repo, permission = run.ctx.event.repository.full_name, run.ctx.config.trigger_permission
    fetch_diff = partial(run.deps.checkouts.mirrors.fetch_diff_blobs, repo)
    return make(run.deps.store, run.ctx.gh, run.effects, repo, run.number, permission, fetch_diff), login


async def post_draft(run: SkillRun, draft: ReviewDraft) -> Written:
    """Post the run's review, once; kept first, so no outage makes the model write it again. Its
    findings are recorded after it, by whichever attempt posts it: a review posted from the journal
    after an outage or a kill keeps its findings in the ledger, so their 👎 holds."""
    await keep_draft(run.effects.journal, run.run_id, draft)
    posted = await run.effects.review(
        run.key("review"),
        run.owner,
        run.repo,
        run.number,
        commit_id=draft.commit_id,
        body=draft.body,
        comments=draft.comments,
    )
    ledger = await ledger_of(run) if draft.findings else None
    if ledger is not None:
        findings, login = ledger
        await findings.record(draft.findings, draft.commit_id, login)
    return posted


async def recover(run: SkillRun) -> Outcome | None:
    """An earlier attempt finished the review: post it from its draft (once), or find it posted (in
    the journal, or on GitHub by its marker). Then the run is complete, and the model is not asked
    again. None: nothing of the review was finished."""
    if run.skill != "review":
        return None
    key = run.key("review")
    draft = await kept_draft(run.effects.journal, run.run_id)
    review: Written | None
    if draft is not None:
        review = await post_draft(run, draft)
    else:
        review = await run.effects.settle(
            key, "review", lambda _since: run.effects.find_review(key, run.owner, run.repo, run.number)
        )
    if review is None:
        return None
    log.info("run %s: its review %s is already posted; the run is complete", run.run_id, review.id)
    return Outcome(answer=render.review_posted(review.html_url))


async def review_step(
    run: SkillRun,
    tree: WorkingTree | CommitTree,
    run_tree: RunTree,
    head_sha: str,
    pull: PullRequest,
    files: list[PullFile],
    total: int,
) -> Outcome:
    """The `review` step of a `/beam review` run (`SkillRun.review`)."""
    event = run.ctx.event
    blob_base = f"{event.repository.html_url}/blob/{head_sha}"
    ledger = await ledger_of(run)
    findings, login = ledger if ledger is not None else (None, "")
    found = RunFindings(findings, run_tree.path, head_sha, login)
    rules = run.ctx.config.review  # `review.severity` and `max_comments` (issue 21)
    paths = [f.filename for f in files]
    # The findings ledger's sections (path instructions, findings dismissed), or the instructions alone.
    sections = await found.before(rules, paths) or rules_sections(rules, paths)

    async def post_review(body: str, comments: list[dict[str, Any]]) -> int:
        # A finding dismissed on this pull request stays dismissed.
        chosen = select_findings(await found.screen(comments), rules)
        held = render.not_posted(chosen.below, chosen.over, rules.severity, rules.max_comments)
        body = f"{body}\n\n{held}" if held else body
        fields = InlineComment.model_fields
        inline = [
            InlineComment.model_validate({k: v for k, v in c.items() if k in fields}) for c in chosen.kept
        ]
        body = render.with_usage(body, run.usage.summary(len(run.progress.tools)))
        return (await post_draft(run, ReviewDraft(head_sha, body, inline, chosen.kept))).id

    built: list[tuple[Coverage, ReviewContext]] = []
    # Facts are kept per pull request by the server and come back as fenced data (issue 28).
    memory = RunMemory(run.deps.store, event.repository.full_name, run.number)
    remembered = await memory.facts()

    async def prompts(shown: list[PullFile], one_call: bool, order: int) -> PassPrompts:
        coverage, context = await run.workspace.prompt(
            tree,
            pull,
            shown,
            total,
            one_call=one_call,
            sections=sections,
            remembered=remembered,
            order=order,
        )
        built.append((coverage, context))
        return PassPrompts(coverage.calls, coverage.call_files, lint_ran=context.lint is not None)

    guard = await run.usage.arm(run.ctx.config.limits)
    tracker = Tracker(run.progress, run.publish)
    build: BuildPrompts = prompts
    review = ReviewPass(
        tree=tree,
        files=files,
        prompts=build,
        meter=run.usage.meter,
        guard=guard,
        post=post_review,
        blob_url=lambda path, start, end: f"{blob_base}/{path}#L{start}-L{end}",
        run_id=run.run_id,
        repository=event.repository.full_name,
        number=run.number,
        on_frame=tracker,
        hub=lambda: RiverBeam(memory=memory),
        checkpoint=RunConversation(run.effects.journal, run.run_id),
        refusals=run.plan.refusals_for_model | CHECK_TOOL_REFUSALS,
        session=uuid.uuid5(RUN_NAMESPACE, f"{event.repository.full_name}#{run.number}"),
        on_overflow=memory.forget_turns,
        passes=rules.passes_limit(run.deps.policy.limits.review_max_passes),
        verify=rules.verify,
    )
    end = await review.run()
    await tracker.flush()
    if end.stop is not None and end.stop.by is not None:  # `/beam cancel`: what it had, and who
        return Outcome(result=end.result, **stopped_outcome(end.stop, end.answer))
    if end.kind == "not_reviewed":
        assert end.code is not None
        log.info("run %s: not reviewed (%s)", run.run_id, end.code)
        raise BeamError(end.code, end.detail)
    coverage, context = built[-1]
    known = set(await anyio.to_thread.run_sync(list_paths, tree))
    # Findings written as JSON are the review's; the answer is what the model said besides.
    answer = render.link_citations(end.answer if end.posted_with != "json" else "", known, blob_base)
    notes: list[str] = []
    if end.kind == "partial":
        notes.append(end.reason)
    if end.stop is not None:
        notes += stopped_outcome(end.stop, "").get("notes", [])
    if end.posted_with == "text":
        notes.append(render.PLAIN_TEXT_REVIEW)
    if end.result is not None and end.posted_with != "review_change":
        notes += answered_in_text_note(end.result)
    if end.cut is not None:
        notes.append(end.cut.named())
    notes += render.fetch_cap_note(tree.refused if isinstance(tree, CommitTree) else [])
    posted = await run.effects.done(run.key("review"))
    answer = render.review_posted(posted.html_url if posted else "", answer)
    notes += await found.after()  # fixed findings answered; the count of them all
    notes += render.not_read_note(coverage.skipped, coverage.cut + end.truncated, total, len(files))
    notes += render.coverage_lines(coverage.left_out, lint_skipped(context.lint))
    return Outcome(answer=answer, notes=notes, result=end.result)
