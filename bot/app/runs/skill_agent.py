"""The agent of one skill run (its tools, its runner, its prompts), built the same way for a pull
request on GitHub (`SkillRun`, and the review pass of reviews/) and for a local change (`beam-bot run`).

Both paths call these functions and `runs.prompt.build_prompt` with the same typed objects (the pull
request, its files), so trying the bot on a local checkout is trying what it will do on a pull request
(ARCHITECTURE.md section 11): the same prompt, the same tools, the same recoverable errors.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Sequence
from dataclasses import replace

import anyio

from bot.app.context.prompt import Coverage, ReviewNote, build_prompt
from bot.app.context.review_context import ReviewContext, UntrustedSection, review_context
from bot.app.github.models import PullFile, PullRequest
from bot.app.github.payloads import CommentEvent
from bot.app.limits.policy import Limits
from bot.app.repo_config.review_rules import ReviewRules
from bot.app.runs.host_tools import ToolReport, host_tools
from bot.beam.commit_tree import CommitTree
from bot.beam.completion import CompletionClient
from bot.beam.runner import Checkpoint, RigAgentRunner, StopCheck
from bot.beam.sandbox import SandboxRoot, WorkingTree
from bot.beam.sandbox_tools import sandbox_tools
from bot.beam.tools import Tool
from bot.beam.types import AgentResult

# Tool errors the model is told about (missing file, not a directory, binary, over the cap) instead of
# ending the run; jail escapes, protected refs and blocked paths still end it.
# A path the jail refuses (absolute, `..`, outside the tree) goes back to the model as the tool's
# result, as a missing file does: small models often write `/repo/file`, and a refused path is
# feedback to correct, not a reason to end the run. The jail refused it either way. So is a call
# without a required argument (BEM-108): small models write `{"name": "read_file"}` and mend it.
RECOVERABLE_TOOL_ERRORS = frozenset(
    {
        "BEM-108",
        "BEM-300",
        "BEM-301",
        "BEM-302",
        "BEM-303",
        "BEM-304",
        "BEM-305",
        "BEM-306",
        "BEM-307",
        "BEM-308",
        "BEM-319",
        "BEM-342",  # a write asked of a run that only reads: the model is told, the run goes on
        "BEM-357",  # a file past the server's fetch cap: the model is told, the review says so
        "BEM-346",  # a file name with a control or bidi character: the model picks another (issue 28)
    }
)


def run_tools(
    tree: WorkingTree | CommitTree,
    report: ToolReport,
    *,
    blob_url: Callable[[str, int, int], str],
    extra: Sequence[Tool] = (),
) -> list[Tool]:
    """Every tool a run may offer; the skill's allowlist keeps its own (`skill_runner`). A review
    adds its own, `review_change` (reviews/review_tool.py), in `extra`."""
    return [*sandbox_tools(tree), *host_tools(tree, report, blob_url=blob_url), *extra]


async def run_prompts(
    sandbox: SandboxRoot,
    event: CommentEvent,
    skill: str,
    request_text: str,
    pull: PullRequest | None,
    files: list[PullFile],
    total: int,
    *,
    rules: ReviewRules,
    limits: Limits,
    one_call: bool = False,
    guidance: str = "",
    default_task: str | None = None,
    notes: Sequence[ReviewNote] = (),
    sections: Sequence[UntrustedSection] | None = None,
    remembered: Sequence[str] = (),
    order: int = 0,
) -> tuple[Coverage, ReviewContext]:
    """The prompt of every call, from the checkout: its `.gitattributes` and, for a review, the
    linters' findings on changed lines and the maintainers' tone and path instructions (issue 21).
    `sections`: a review's extra data (the path instructions and the findings already dismissed,
    reviews/selection.py `rules_sections` and the findings ledger).
    `one_call`: the retry after the model's context overflowed (BEM-092), whose files were already
    cut to half the diff (context/diff_context.py `cut_diff`): all of it in one call.
    `remembered`: this thread's facts (runs/memory.py), fenced with the pull request as data.
    `order`: a vote's order of the hunks (reviews/votes.py); 0 is the plan's own."""
    if one_call:
        limits = replace(limits, review_max_calls=1)
    review = skill == "review"
    if not review or sections is None:
        sections = ()
    # Focus (`review.focus`) is the review's: other skills read the bare hunks, as many as one call holds.
    focus = None if review else False
    context = await review_context(
        sandbox, files, rules, limits, sections, lint=review, focus=focus, order=order if review else 0
    )
    # In a worker thread: a focused plan parses the changed files with tree-sitter (context/focus.py).
    _, coverage = await anyio.to_thread.run_sync(
        functools.partial(
            build_prompt,
            event,
            skill,
            request_text,
            pull,
            files,
            total,
            guidance=guidance,
            default_task=default_task,
            notes=notes,
            context=context,
            remembered=remembered,
        )
    )
    return coverage, context


def skill_runner(
    skill: str,
    client: CompletionClient,
    tools: Sequence[Tool],
    *,
    checkpoint: Checkpoint | None = None,
    refusals: Collection[str] = (),
    should_stop: StopCheck | None = None,
) -> RigAgentRunner:
    """The skill's tool loop. Recoverable tool errors (and a plan's own `refusals`) go back to the
    model as the tool's result; the rest still end the run. A review always ends in a review: when
    its model's tool calls cannot be used (BEM-094, BEM-091, BEM-088), it is asked for its answer in
    plain text, which the review pass posts when it holds a review (reviews/review_pass.py)."""
    return RigAgentRunner.for_skill(
        skill,
        client,
        tools,
        checkpoint=checkpoint,
        recoverable_errors=RECOVERABLE_TOOL_ERRORS | frozenset(refusals),
        should_stop=should_stop,
        answer_in_text=skill == "review",
    )


def answered_in_text_note(result: AgentResult) -> list[str]:
    """Why the model was asked for a plain-text answer, when it was (the runner's `answer_in_text`)."""
    metadata = result.metadata if isinstance(result.metadata, dict) else {}
    why = metadata.get("answered_in_text")
    if not isinstance(why, str):
        return []
    return [f"Its tool calls could not be used ({why}), so it was asked for its review in plain text."]
