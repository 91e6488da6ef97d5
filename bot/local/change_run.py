"""`review`, `summarize`, `commit-notes` and `ask` on a local change, built as `/beam` builds them.

The change becomes the pull request's objects (`change.py`); the prompt comes from
`bot.app.runs.prompt.build_prompt`, the tools and the runner from `bot.app.runs.skill_agent`, the
limits from the server's settings (`BEAM_MAX_TOKENS_PER_RUN`, `BEAM_MAX_MINUTES_PER_RUN`,
`BEAM_JOB_TIMEOUT`) lowered by the repository's `.github/beam.yml` on its default branch, as on
GitHub. What differs is only what a checkout cannot have: the review is printed instead of posted, a
run is not recorded, cancelled or counted against an installation's monthly budget, and tool links
are paths of the checkout.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import anyio

from bot.app.assembly import FINAL_COMMENT_MARGIN
from bot.app.limits.policy import Policy
from bot.app.repo_config import CONFIG_PATH, RepoConfig, parse_repo_config
from bot.app.runs import render
from bot.app.runs.deps import MAX_PULL_FILES
from bot.app.runs.host_tools import CheckedSuggestions, RunLedger
from bot.app.runs.linters import lint_skipped
from bot.app.runs.prompt import Coverage
from bot.app.runs.review_context import CallParts, ReviewContext, call_session
from bot.app.runs.selection import select_findings
from bot.app.runs.skill_agent import (
    answered_in_text_note,
    review_from_text,
    review_in_text,
    run_prompts,
    run_tools,
    skill_runner,
)
from bot.app.runs.usage import RunUsage, stopped_outcome
from bot.app.settings import SettingsError, load_settings
from bot.beam.completion import CompletionClient
from bot.beam.errors import BeamError
from bot.beam.hub import RiverBeam
from bot.beam.sandbox import SandboxRoot, WorkingTree
from bot.beam.skills import Skill
from bot.beam.types import ContentPart, InvokeRequest
from bot.local.change import LocalChange
from bot.local.git import UsageError, change_base, default_branch, head_label, protected_refs, try_git
from bot.local.options import RunOptions
from bot.local.output import FramePrinter, LocalReview, PrintMode, review_report

OVERFLOW_RETRY = "the prompt overflowed the model's context; trying once more with half the diff"


@dataclass
class ChangeRun:
    """One change skill's run, prepared (change read, limits known) before the worktree exists."""

    repo: Path
    skill: Skill
    options: RunOptions
    change: LocalChange
    config: RepoConfig  # the defaults when the file is invalid, as on GitHub
    config_errors: list[str]
    policy: Policy
    run_timeout: float
    # What the run produced, for a caller that posts it (`beam-bot review <URL> --post`).
    review: LocalReview | None = None
    answer: str = ""

    @classmethod
    def prepare(cls, repo: Path, skill: Skill, options: RunOptions, head_sha: str) -> ChangeRun:
        try:
            settings = load_settings()
        except SettingsError as error:
            raise UsageError(str(error)) from None
        branch = default_branch(repo)
        base = change_base(repo, head_sha, options.base)
        plain = branch.removeprefix("origin/") if branch else "main"
        change = LocalChange.read(repo, base, head_label(repo, options.ref), head_sha, plain)
        # As on GitHub, the repository's settings come from its default branch, never from the change.
        text = try_git(repo, "show", f"{branch}:{CONFIG_PATH}") if branch else None
        config = parse_repo_config(text)
        return cls(
            repo,
            skill,
            options,
            change,
            config.config,
            config.errors,
            Policy.from_settings(settings),
            max(30.0, settings.job_timeout - FINAL_COMMENT_MARGIN),
        )

    def activity(self) -> str:
        change = self.change
        count = len(change.files)
        files = f"{count} file{'s' if count != 1 else ''}"
        return (
            f"reading the change {change.base.label}..{change.head_ref}: {files}, "
            f"+{change.additions} -{change.deletions}"
        )

    async def run(self, path: Path, client: CompletionClient, out: TextIO, err: TextIO) -> int:
        change, skill, as_json = self.change, self.skill, self.options.as_json
        is_review = skill.name == "review"
        protected = sorted({*protected_refs(self.repo), change.base.label, change.head_ref})
        tree = WorkingTree(
            SandboxRoot(path),
            protected,
            blocked_paths=tuple(self.config.blocked_paths),
            allowed_push_branches=set(),
        )
        started = time.monotonic()
        run_id = str(uuid.uuid4())
        usage = RunUsage(client, None, run_id, 0, self.policy, started)
        guard = await usage.arm(self.config.limits)
        review = self.review = LocalReview(change.head_sha)
        for problem in self.config_errors:
            err.write(f"beam-bot run: {CONFIG_PATH}: {problem} (the defaults apply)\n")
        # `review --json` prints the review object alone; the other skills' `--json` prints frames.
        mode: PrintMode = "quiet" if as_json and is_review else "json" if as_json else "human"
        printer = FramePrinter(out, mode, self.activity(), show_answer=not is_review)

        async def post_review(body: str, comments: list[dict[str, Any]]) -> int:
            # `review.severity` and `max_comments` apply as on GitHub (runs/run.py).
            rules = self.config.review
            chosen = select_findings(comments, rules)
            held = render.not_posted(chosen.below, chosen.over, rules.severity, rules.max_comments)
            body = f"{body}\n\n{held}" if held else body
            return await review.post(render.with_usage(body, usage.summary(printer.tool_steps)), chosen.kept)

        def blob_url(rel: str, start: int, end: int) -> str:
            return f"{rel}#L{start}-L{end}"

        ledger = RunLedger()
        files = change.files[:MAX_PULL_FILES]
        event, pull = change.event(self.options.instructions), change.pull_request()

        async def prompts(halved: bool) -> tuple[Coverage, ReviewContext]:
            return await run_prompts(
                tree.sandbox,
                event,
                skill.name,
                self.options.instructions,
                pull,
                files,
                len(change.files),
                rules=self.config.review,
                limits=self.policy.limits,
                halved=halved,
            )

        coverage, context = await prompts(False)
        parts = CallParts() if len(coverage.calls) > 1 else None

        async def post_part(body: str, comments: list[dict[str, Any]]) -> int | None:
            """As on GitHub: one call posts from its tool call; a chunked review posts its parts once."""
            return await (parts.collect if parts is not None else post_review)(body, comments)

        checked = CheckedSuggestions(ruff=context.lint is not None)
        tools = run_tools(tree, ledger, files, post_review=post_part, blob_url=blob_url, checked=checked)
        hub = RiverBeam()
        hub.register_agent(skill_runner(skill.name, usage.meter, tools, should_stop=guard))
        try:
            with anyio.fail_after(self.run_timeout):
                calls, index, retried = coverage.calls, 0, False
                while index < len(calls):
                    ledger.reviewed = False  # each call of a chunked review posts its part
                    request = InvokeRequest(
                        agent_name=skill.name,
                        content=[ContentPart.text_part(calls[index])],
                        session_id=uuid.uuid4(),
                        request_id=uuid.UUID(run_id) if index == 0 else call_session(run_id, index),
                        metadata={"repository": change.repository, "number": 0},
                    )
                    try:
                        outcome = await hub.invoke(request, on_frame=printer)
                    except BeamError as error:
                        # Once more with half the diff if the first prompt overflows, as on GitHub.
                        if error.code != "BEM-092" or index > 0 or retried or printer.tool_steps > 0:
                            raise
                        err.write(f"beam-bot run: {OVERFLOW_RETRY}\n")
                        retried = True
                        coverage, context = await prompts(True)
                        calls = coverage.calls
                        parts = CallParts() if len(calls) > 1 else None
                        continue
                    index += 1
                    if guard.stop is not None or outcome.result.interrupted:
                        break
                merged = parts.merged() if parts is not None and guard.stop is None else None
                if merged is not None:
                    ledger.review_id = await post_review(*merged)
                    ledger.reviewed = True
        except TimeoutError:
            err.write(f"✗ failed: {render.timed_out(self.run_timeout)}\n")
            return 1
        except BeamError as error:
            out.flush()
            err.write(f"✗ failed: {error}\n")
            return 1
        result = outcome.result
        self.answer = result.text
        notes: list[str] = []
        if guard.stop is not None:
            notes += stopped_outcome(guard.stop, result.text).get("notes", [])
        if is_review:
            if await review_in_text(tools, result.text):  # findings written as JSON, as on GitHub
                review.posted_with = "review_change"
            elif await review_from_text(ledger, result.text, post_review):
                review.posted_with = "text"
                notes += answered_in_text_note(result)
            else:
                review.posted_with = "review_change"
        skipped, cut = coverage.skipped, coverage.cut + ledger.truncated
        notes += render.not_read_note(skipped, cut, len(change.files), len(files))
        notes += render.coverage_lines(coverage.left_out, lint_skipped(context.lint))
        if is_review and as_json:
            out.write(json.dumps(review_report(review, result, notes), ensure_ascii=False) + "\n")
        elif is_review:
            if review.posted_with == "review_change" and result.text.strip():
                out.write(result.text.strip() + "\n")
            out.write("\n" + review.human() + "\n")
        if not as_json:
            for note in notes:
                out.write(f"note: {note}\n")
        out.flush()
        return 0
