"""`/beam review` on a pull request: the review pass (review_pass.py) inside a skill run.

The run (runs/run.py `SkillRun`) owns what every command has: 👀, the tracking comment, the checkout,
the caps, the final state and the waits for GitHub. This module is its `review` step, as `/beam
author` is the approvals layer's: the findings ledger before and after, the pass, and how a command
posts (selection by `review.severity` and `max_comments`, the screen of dismissed findings, the draft
kept before it is posted, `SkillRun.post_review`). A pass that did not review ends the run as a
failure with its BEM code (`BeamError`): the tracking comment says why, and no review is posted.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

import anyio

from bot.app.checks.tool import CHECK_TOOL_REFUSALS
from bot.app.effects.conversation import RunConversation
from bot.app.git.checkout import RunTree
from bot.app.github.client import InlineComment, PullFile, PullRequest
from bot.app.reviews.review_pass import BuildPrompts, PassPrompts, ReviewPass
from bot.app.runs import render
from bot.app.runs.deps import RUN_NAMESPACE, Outcome
from bot.app.runs.linters import lint_skipped
from bot.app.runs.memory import RunMemory
from bot.app.runs.outage import ReviewDraft
from bot.app.runs.prompt import Coverage
from bot.app.runs.review_context import ReviewContext
from bot.app.runs.run import SkillRun, list_paths
from bot.app.runs.selection import select_findings
from bot.app.runs.skill_agent import answered_in_text_note
from bot.app.runs.tracker import Tracker
from bot.app.runs.usage import stopped_outcome
from bot.beam.errors import BeamError
from bot.beam.hub import RiverBeam
from bot.beam.sandbox import WorkingTree

log = logging.getLogger("beam.reviews")


async def review_step(
    run: SkillRun,
    tree: WorkingTree,
    run_tree: RunTree,
    head_sha: str,
    pull: PullRequest,
    files: list[PullFile],
    total: int,
) -> Outcome:
    """The `review` step of a `/beam review` run (`SkillRun.review`)."""
    event = run.ctx.event
    blob_base = f"{event.repository.html_url}/blob/{head_sha}"
    found = await run._findings(run_tree, head_sha, pull)
    sections = await found.before(run.ctx.config.review, [f.filename for f in files])
    rules = run.ctx.config.review  # `review.severity` and `max_comments` (issue 21)

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
        return (await run._post_review(ReviewDraft(head_sha, body, inline, chosen.kept))).id

    built: list[tuple[Coverage, ReviewContext]] = []

    async def prompts(shown: list[PullFile], one_call: bool) -> PassPrompts:
        coverage, context = await run._prompt(tree, pull, shown, total, one_call=one_call, sections=sections)
        built.append((coverage, context))
        return PassPrompts(coverage.calls, coverage.call_files, lint_ran=context.lint is not None)

    memory = RunMemory(run.deps.store, event.repository.full_name)
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
    posted = await run.effects.done(run.key("review"))
    answer = render.review_posted(posted.html_url if posted else "", answer)
    notes += await found.after()  # fixed findings answered; the count of them all
    notes += render.not_read_note(coverage.skipped, coverage.cut + end.truncated, total, len(files))
    notes += render.coverage_lines(coverage.left_out, lint_skipped(context.lint))
    return Outcome(answer=answer, notes=notes, result=end.result)
