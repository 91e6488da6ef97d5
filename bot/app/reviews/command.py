"""`/beam review` on a pull request: the review pass (review_pass.py) inside a skill run.

The run (runs/run.py `SkillRun`) owns what every command has: 👀, the tracking comment, the checkout,
the caps, the final state and the waits for GitHub. This module gives it its two hooks, as `/beam
author` gets its own from the approvals layer: `step` (the findings ledger before and after, the pass,
and its door: the draft posting.py builds, kept before it is posted through effects/writer.py) and
`recover` (a review an earlier attempt finished is posted from its draft, or found on GitHub, and the
model is not asked again). A pass that did not review ends the run as a failure with its BEM code
(`BeamError`): the tracking comment says why, and no review is posted.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import anyio

from bot.app.checks.tool import CHECK_TOOL_REFUSALS
from bot.app.context.review_context import UntrustedSection
from bot.app.effects.conversation import RunConversation
from bot.app.effects.writer import Written
from bot.app.git.checkout import RunTree
from bot.app.github.client import PullFile, PullRequest
from bot.app.repo_config.review_rules import ReviewRules
from bot.app.reviews import render as review_render
from bot.app.reviews.drafts import ReviewDraft, keep_draft, kept_draft
from bot.app.reviews.finding_flow import FindingFlow
from bot.app.reviews.findings import fresh_findings
from bot.app.reviews.posting import Draft, Poster, pass_notes
from bot.app.reviews.publish import publish_summary
from bot.app.reviews.review_pass import ReviewPass
from bot.app.reviews.selection import rules_sections
from bot.app.reviews.state import ReviewStates
from bot.app.runs import render
from bot.app.runs.deps import RUN_NAMESPACE, Outcome
from bot.app.runs.memory import RunMemory
from bot.app.runs.run import SkillRun, list_paths
from bot.app.runs.tracker import Tracker
from bot.app.runs.usage import stopped_outcome
from bot.beam.commit_tree import CommitTree
from bot.beam.errors import BeamError
from bot.beam.hub import RiverBeam
from bot.beam.sandbox import WorkingTree

log = logging.getLogger("beam.reviews")


@dataclass
class RunFindings:
    """The findings ledger's steps within one run (finding_flow.py, as an automatic review keeps it),
    with what the run needs to call them: its tree, the head and the bot's login. Without a login the
    App cannot tell its own comments, so no ledger is kept (`flow` None) and each step passes through.

    Before the run, the 👎s are read and the model is told what was dismissed. While it posts, a new
    finding that repeats a dismissed one is dropped, and each one left gets the hidden marker by which
    the ledger finds the posted comment. After it, the open findings the new commits fixed are
    answered and their threads resolved. Unlike an automatic review, `/beam review` posts a finding
    again when it is still open: the maintainer asked for a whole review."""

    flow: FindingFlow | None
    tree: Path
    head: str
    bot_login: str

    async def before(self, rules: ReviewRules, paths: Sequence[str]) -> list[UntrustedSection] | None:
        if self.flow is None:
            return None
        await self.flow.read_reactions()
        return await self.flow.sections(rules, paths)

    async def screen(self, comments: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The comments to post: without those that repeat a dismissed finding, each marked so that
        `record` finds it among the pull request's review comments."""
        if self.flow is None:
            return comments
        return fresh_findings(await self.flow.screen(comments, self.tree, self.head), None, set())

    async def after(self, reported: list[dict[str, Any]]) -> list[str]:
        """Fix the open findings the new head changed and `reported` (all the review said) does not
        repeat; the note counting the pull request's findings."""
        flow = self.flow
        if flow is None:
            return []
        await flow.settle_fixed(reported, self.tree, self.head)
        counts = await flow.ledger.counts(flow.repo, flow.number)
        # The automatic reviews' summary comment, where the pull request has one, counts them too.
        states = ReviewStates(flow.store)
        state = await states.get(flow.repo, flow.number)
        if state is not None and state.summary_comment_id is not None:
            await publish_summary(flow.effects, states, state, self.bot_login)
        line = review_render.findings_line({str(k): v for k, v in counts.items()})
        return [line] if line else []


async def ledger_of(run: SkillRun) -> tuple[FindingFlow, str] | None:
    """The findings ledger of this `/beam review` and the bot's login, when the login is known."""
    login = await run.deps.identity.login()
    if not login:
        return None
    repo, permission = run.ctx.event.repository.full_name, run.ctx.config.trigger_permission
    fetch_diff = partial(run.deps.checkouts.mirrors.fetch_diff_blobs, repo)
    flow = FindingFlow(run.deps.store, run.ctx.gh, run.effects, repo, run.number, permission, fetch_diff)
    return flow, login


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
    flow, login = ledger if ledger is not None else (None, "")
    found = RunFindings(flow, run_tree.path, head_sha, login)
    rules = run.ctx.config.review  # `review.severity` and `max_comments` (issue 21)
    paths = [f.filename for f in files]
    # The findings ledger's sections (path instructions, findings dismissed), or the instructions alone.
    sections = await found.before(rules, paths) or rules_sections(rules, paths)

    async def through_writer(draft: Draft) -> int:
        return (await post_draft(run, ReviewDraft(head_sha, draft.body, draft.inline(), draft.comments))).id

    # A finding dismissed on this pull request stays dismissed.
    poster = Poster(
        rules, through_writer, lambda: run.usage.summary(len(run.progress.tools)), screens=[found.screen]
    )
    # Facts are kept per pull request by the server and come back as fenced data (issue 28).
    memory = RunMemory(run.deps.store, event.repository.full_name, run.number)
    prompts = run.workspace.prompts(tree, pull, total, sections=sections, remembered=await memory.facts())
    guard = await run.usage.arm(run.ctx.config.limits)
    tracker = Tracker(run.progress, run.publish)
    review = ReviewPass(
        tree=tree,
        files=files,
        prompts=prompts,
        meter=run.usage.meter,
        guard=guard,
        post=poster,
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
    coverage, context = prompts.last
    known = set(await anyio.to_thread.run_sync(list_paths, tree))
    # Findings written as JSON are the review's; the answer is what the model said besides.
    answer = render.link_citations(end.answer if end.posted_with != "json" else "", known, blob_base)
    posted = await run.effects.done(run.key("review"))
    answer = render.review_posted(posted.html_url if posted else "", answer)
    refused = tree.refused if isinstance(tree, CommitTree) else []
    notes = pass_notes(end, coverage, context.lint, total, len(files), refused=refused)
    notes += await found.after(poster.reported)  # fixed findings answered; the count of them all
    return Outcome(answer=answer, notes=notes, result=end.result)
