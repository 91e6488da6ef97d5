"""The agent of one skill run (its tools, its runner) and the end of a review, built the same way for
a pull request on GitHub (`SkillRun`) and for a local change (`beam-bot run`).

Both paths call these functions and `runs.prompt.build_prompt` with the same typed objects (the pull
request, its files), so trying the bot on a local checkout is trying what it will do on a pull request
(ARCHITECTURE.md section 11): the same prompt, the same tools, the same recoverable errors.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

from bot.app.github.models import PullFile
from bot.app.runs import render
from bot.app.runs.deps import RECOVERABLE_TOOL_ERRORS
from bot.app.runs.diffmap import DiffMap
from bot.app.runs.host_tools import PostReview, RunLedger, host_tools
from bot.beam.completion import CompletionClient
from bot.beam.runner import Checkpoint, RigAgentRunner, StopCheck
from bot.beam.sandbox import WorkingTree
from bot.beam.sandbox_tools import sandbox_tools
from bot.beam.tools import Tool


def run_tools(
    tree: WorkingTree,
    ledger: RunLedger,
    files: Sequence[PullFile],
    *,
    post_review: PostReview,
    blob_url: Callable[[str, int, int], str],
    extra: Sequence[Tool] = (),
) -> list[Tool]:
    """Every tool a run may offer; the skill's allowlist keeps its own (`skill_runner`).

    `review_change` comments inline only on lines of `files`' patches, as GitHub accepts them.
    """
    diff = DiffMap.from_files((f.filename, f.patch) for f in files)
    return [
        *sandbox_tools(tree),
        *host_tools(tree.sandbox, ledger, diff=diff, post_review=post_review, blob_url=blob_url),
        *extra,
    ]


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
    model as the tool's result; the rest still end the run."""
    return RigAgentRunner.for_skill(
        skill,
        client,
        tools,
        checkpoint=checkpoint,
        recoverable_errors=RECOVERABLE_TOOL_ERRORS | frozenset(refusals),
        should_stop=should_stop,
    )


async def review_from_text(ledger: RunLedger, answer: str, post_review: PostReview) -> bool:
    """A review run whose model never called `review_change` still ends in a review: its plain-text
    answer is the body, without inline comments. True when that is what happened (the run says so,
    `render.PLAIN_TEXT_REVIEW`), False when the model posted through `review_change`."""
    if ledger.reviewed:
        return False
    ledger.reviewed = True
    ledger.review_id = await post_review(answer.strip() or render.EMPTY_REVIEW, [])
    return True
