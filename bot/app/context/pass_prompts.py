"""The prompts of a run's calls, built once for every door a review (or another skill) comes in by.

`/beam review` (and the Action), an automatic review and `beam-bot run review` (and `review <URL>`)
read the same checkout the same way: the head's `.gitattributes`, the linters' findings on changed
lines, `review.focus`, the budget per call (`review.max_calls` lowering the server's), the vote's order
of hunks and, on the overflow retry, the cut diff in one call. Each door passes in only what differs:
its task (`Asked`: a request someone made; `Automatic`: the bot's own, with the range it may comment
on), its sections (path instructions, findings dismissed), the facts remembered on the thread.

`PromptBuilder` is the review pass's `BuildPrompts`, and keeps each (coverage, context) it built, so
the door can say afterwards what no call read and which linters could not run.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace

import anyio

from bot.app.context.prompt import Coverage, ReviewNote, build_prompt, build_review_prompts
from bot.app.context.review_context import ReviewContext, UntrustedSection, review_context
from bot.app.github.models import PullFile, PullRequest
from bot.app.github.payloads import CommentEvent
from bot.app.limits.policy import Limits
from bot.app.repo_config.review_rules import ReviewRules
from bot.beam.sandbox import SandboxRoot

log = logging.getLogger("beam.context")


@dataclass
class PassPrompts:
    """What the caller built for one pass: the prompt of every call and the files each call reads."""

    calls: list[str]
    call_files: list[list[str]]
    lint_ran: bool = False  # the linters ran: a suggestion must still parse (CheckedSuggestions)


# (the files to show, whether this is the overflow retry: one call, the vote's order: 0 the plan's
# own, another number another order of the same hunks) -> the prompts
BuildPrompts = Callable[[list[PullFile], bool, int], Awaitable[PassPrompts]]


@dataclass(frozen=True, slots=True)
class Asked:
    """A request someone made: `/beam <skill>` on GitHub, `beam-bot run <skill>` on a checkout. The
    prompt opens with the request (`text`, else the plan's `default_task`, else the skill's own)."""

    event: CommentEvent
    skill: str
    text: str
    guidance: str = ""
    default_task: str | None = None
    notes: Sequence[ReviewNote] = ()  # a follow-up's unresolved review comments
    # Who asked where no comment's login says it (`beam-bot review <URL>`: a terminal); None: the
    # event's commenter.
    asked_by: str | None = None


@dataclass(frozen=True, slots=True)
class Automatic:
    """The bot's own review of a pull request nobody asked about: the files it could not show
    (`unread`), and, for an incremental review, the lines changed `since` the last reviewed head."""

    repo: str
    unread: Sequence[str] = ()
    changed: dict[str, set[int]] | None = None
    since: str | None = None


@dataclass(frozen=True, slots=True)
class _Shown:
    """An automatic review's scope as one call sees it (context/prompt.py `ReviewScope`)."""

    files: list[PullFile]
    total: int
    unread: list[str]


@dataclass
class PromptBuilder:
    """The prompts of every call of a run, from its checkout; `total` counts the change's files,
    shown or not. `sections` are a review's extra data (other skills read none); `remembered` the
    thread's facts (runs/memory.py), fenced with the pull request as data."""

    sandbox: SandboxRoot
    task: Asked | Automatic
    pull: PullRequest | None
    total: int
    rules: ReviewRules
    limits: Limits
    sections: Sequence[UntrustedSection] = ()
    remembered: Sequence[str] = ()
    label: str = ""  # the log's name for the run
    # `pull` stands for a change on a checkout (`beam-bot run`): the prompt names it a local change,
    # not a pull request (it has no number).
    local: bool = False
    built: list[tuple[Coverage, ReviewContext]] = field(default_factory=list)

    @property
    def review(self) -> bool:
        return isinstance(self.task, Automatic) or self.task.skill == "review"

    @property
    def last(self) -> tuple[Coverage, ReviewContext]:
        """What the latest prompts left out and the context they were built from (the linters'
        report): for the notes after the pass, and an automatic review's coverage lines."""
        return self.built[-1]

    async def coverage(
        self, shown: list[PullFile], *, one_call: bool = False, order: int = 0
    ) -> tuple[Coverage, ReviewContext]:
        """The prompt of every call over `shown`, and the context it was built from.
        `one_call`: the retry after the model's context overflowed (BEM-092), whose files were already
        cut to half the diff (context/diff_context.py `cut_diff`): all of it in one call.
        `order`: a vote's order of the hunks (reviews/votes.py); 0 is the plan's own."""
        limits = replace(self.limits, review_max_calls=1) if one_call else self.limits
        review = self.review
        # Focus (`review.focus`) and the linters are the review's: other skills read the bare hunks,
        # as many as one call holds.
        context = await review_context(
            self.sandbox,
            shown,
            self.rules,
            limits,
            self.sections if review else (),
            lint=review,
            focus=None if review else False,
            order=order if review else 0,
        )
        # In a worker thread: a focused plan parses the changed files with tree-sitter (context/focus.py).
        coverage = await anyio.to_thread.run_sync(functools.partial(self._write, shown, context))
        if self.label:
            where = f", order {order}" if order else ""
            log.info("%s: %d call(s), %s%s", self.label, len(coverage.calls), coverage.shape, where)
        self.built.append((coverage, context))
        return coverage, context

    def _write(self, shown: list[PullFile], context: ReviewContext) -> Coverage:
        task = self.task
        if isinstance(task, Asked):
            _, coverage = build_prompt(
                task.event,
                task.skill,
                task.text,
                self.pull,
                shown,
                self.total,
                guidance=task.guidance,
                default_task=task.default_task,
                notes=task.notes,
                context=context,
                remembered=self.remembered,
                local=self.local,
                asked_by=task.asked_by,
            )
            return coverage
        assert self.pull is not None, "an automatic review is of a pull request"
        scope = _Shown(shown, self.total, list(task.unread))
        built = build_review_prompts(task.repo, self.pull, scope, task.changed, task.since, context)
        plan = built.plan
        return Coverage(
            cut=plan.budget.cut,
            total_files=self.total,
            listed_files=len(shown),
            left_out=plan.left_out_names(),
            calls=built.texts,
            call_files=[chunk.files for chunk in plan.chunks],
            shape=plan.shape,
        )

    async def __call__(self, shown: list[PullFile], one_call: bool, order: int) -> PassPrompts:
        coverage, context = await self.coverage(shown, one_call=one_call, order=order)
        return PassPrompts(coverage.calls, coverage.call_files, lint_ran=context.lint is not None)
