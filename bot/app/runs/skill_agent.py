"""The agent of one skill run (its tools and its runner), built the same way for a pull
request on GitHub (`SkillRun`, and the review pass of reviews/) and for a local change (`beam-bot run`).

Both paths call these functions and `context/pass_prompts.py` with the same typed objects (the pull
request, its files), so trying the bot on a local checkout is trying what it will do on a pull request
(ARCHITECTURE.md section 11): the same prompt, the same tools, the same recoverable errors.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

from bot.app.runs.host_tools import ToolReport, host_tools
from bot.beam.commit_tree import CommitTree
from bot.beam.completion import CompletionClient
from bot.beam.runner import Checkpoint, RigAgentRunner, StopCheck
from bot.beam.sandbox import WorkingTree
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
