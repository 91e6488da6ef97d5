"""One review pass: the calls of a review, the overflow retry, the answer read from a call or from the
text, and the end it came to. `/beam review` (reviews/command.py), automatic reviews
(reviews/auto_review_run.py) and `beam-bot run review` (bot/local/change_run.py) each call it, and pass
in the one poster (reviews/posting.py `Poster`) with their own door: GitHub through effects/writer.py,
or the terminal.

A pass ends in exactly one of three ways (`PassEnd.kind`, pass_end.py), the same on every path (issue
29):

- **reviewed**: every call answered, with `review_change`, findings written as JSON, or a plain-text
  review (its prose). "No comments." is posted only when the model said so itself (`review_change`
  with nothing in it): an answer with nothing in it is not a review.
- **partial**: a cap (tokens, minutes) or a call that never answered stopped it after some calls had
  answered. What was found is posted once, its body saying "partial: stopped by X after Y of Z files".
- **not reviewed**: no call answered (cut by `finish_reason: length` every time, unusable calls every
  time, the rounds used up on tools, a cap before any finding, a context overflow that survived its
  retry). Nothing is posted; `code` and `reason` say why, in the catalogue's words.

A context overflow (BEM-092) before any tool ran is retried once, in one call, with the diff of the
files the first call read cut to at most half, by whole hunks (context/diff_context.py `cut_diff`), and
the cut named in the prompt and in the review.

Issue 41 holds the body to a comment's rules: one that says the instructions back, thanks, or only
praises or describes the change becomes a neutral line of what was reviewed (answer_checks.py
`held_body`, `summary_line`), on every path an answer becomes a review.

Issue 30 adds four steps, each the same on every path:

- **Structured output.** Each call first asks the server for the review as JSON matching
  `review_change`'s arguments (reviews/answer_checks.py `review_schema`), where it can constrain its
  decoding to a schema; the answer goes through `review_change`'s own checks. A server that cannot
  (refused once per base URL and model, or took the schema and answered without it, issue 41), or
  an answer cut short, falls back to the tool loop.
- **Votes** (`passes` > 1, the repository's `review.passes` under the server's cap): the whole pass
  runs that many times, the caller building each vote's prompts with the hunks in another order
  (`order`), and only the findings a majority reported are posted (votes.py).
- **Claims that name a problem**: a comment that only describes or praises the change is not posted,
  and the footer counts it (claims.py).
- **Verification** (`verify`, `review.verify`): each finding left is checked against the code before
  it is posted (verification.py); the footer counts what was checked and dropped, and each finding
  dropped is kept with the check's answer (`PassEnd.held`, the stage `dropped by verification`). It
  happens where every review is posted (`_post`), so a one-call review still posts from inside its
  tool call, as it always did (its draft and its checkpoint keep what was posted); with votes, every
  call's findings are collected and the review is posted once at the end.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from bot.app import markdown as md
from bot.app.context.diff_context import DiffCut, overflow_retry
from bot.app.context.pass_prompts import BuildPrompts, PassPrompts
from bot.app.context.review_context import CallParts, call_session
from bot.app.github.models import PullFile
from bot.app.reviews.answer_checks import (
    held_body,
    prose,
    review_instructions,
    review_schema,
    structured_review_args,
    summary_line,
)
from bot.app.reviews.claims import problem_claims
from bot.app.reviews.diffmap import DiffMap
from bot.app.reviews.pass_end import (
    NO_ANSWER_CODE,
    OVERFLOW_CODE,
    PassEnd,
    PostedWith,
    cap_words,
    code_words,
    context_size,
    files_read,
    not_reviewed,
    not_reviewed_reason,
    partial_line,
    unchecked_line,
)
from bot.app.reviews.review_tool import CheckedSuggestions, PostReview, ReviewChangeTool, review_in_text
from bot.app.reviews.verification import Checked, Verifier
from bot.app.reviews.votes import distinct, majority
from bot.app.runs.host_tools import ToolReport
from bot.app.runs.skill_agent import run_tools, skill_runner
from bot.app.runs.usage import RunGuard
from bot.beam.agent import FrameSink
from bot.beam.commit_tree import CommitTree
from bot.beam.completion import CompletionClient
from bot.beam.errors import BeamError
from bot.beam.hub import RiverBeam
from bot.beam.runner import Checkpoint
from bot.beam.sandbox import WorkingTree
from bot.beam.tools import Tool
from bot.beam.types import AgentResult, ContentPart, InvokeRequest, StreamChunk, StreamChunkType

log = logging.getLogger("beam.reviews")


# A structured call offers no tool: the prompt's words about `review_change` and `read_file` are
# answered by this note, so the model is not told to use a tool that does not work in the call.
STRUCTURED_SYSTEM = (
    "You are a careful code reviewer. You report only real problems in the change you are shown "
    "(bugs, security holes, crashes, wrong behaviour), each on the line that has it, and you answer "
    "with JSON only."
)
STRUCTURED_NOTE = (
    "No tool can be called in this answer (not review_change, not read_file): answer with "
    "review_change's arguments as JSON instead, from the hunks shown. How to look for bugs: for each "
    "`+` line, compare it with the removed `-` line(s) above it and with the code around it, and "
    "ask what it now does wrong: a wrong operator, variable or constant, a condition inverted or "
    "off by one, a missing `return`, check or `await`, a misspelt name, a resource not closed; for "
    "each `-` line, ask what its removal breaks, and comment on the numbered line next to it. "
    "`body`: one sentence. `comments`: one entry per bug, each with `path` (as the `## path` heading "
    "writes it), `line` (the number shown before the line; for several lines, the last one), "
    "`start_line` (for several lines, the first one's number; else null), `severity`, `claim` (what "
    "is wrong, then what goes wrong because of it) and `suggestion` (code that replaces lines "
    "start_line..line, or null). A comment that describes, summarises or praises the change is not "
    "a bug: leave it out. No bug: "
    '`"comments": []`.'
)


@dataclass
class ReviewPass:
    """One review of `files` on `tree`, posted through `post` at most once."""

    tree: (
        WorkingTree | CommitTree
    )  # a `/beam review` reads the head's objects; the automatic review its checkout
    files: list[PullFile]
    prompts: BuildPrompts
    meter: CompletionClient
    guard: RunGuard
    post: PostReview
    blob_url: Callable[[str, int, int], str]
    run_id: str
    repository: str
    number: int | None  # None: a change on a checkout (`beam-bot run review`), which has no number
    on_frame: FrameSink | None = None
    fold_outside: bool = True  # a comment outside the diff goes into the body (off: dropped)
    extra_tools: Sequence[Tool] = ()
    hub: Callable[[], RiverBeam] = RiverBeam
    checkpoint: Checkpoint | None = None  # a one-call review's conversation, kept after each round
    refusals: frozenset[str] = frozenset()
    session: uuid.UUID | None = None  # a one-call review's session; the run id when None
    on_overflow: Callable[[], Any] | None = None  # told before the overflow retry
    passes: int = 1  # votes: the review runs this many times; a majority's findings are posted
    verify: bool = False  # each finding is checked against the code before it is posted
    structured: bool = True  # ask for the review as JSON matching a schema, where the server can
    # told each vote's findings, then the majority's (a benchmark reads each step from one run)
    on_stage: Callable[[str, list[dict[str, Any]]], None] | None = None
    tool_steps: int = 0
    # The partial line of the review being posted, set before `post` is called: a door that keeps the
    # draft keeps it too, so the attempt that posts the draft says the review is partial (drafts.py).
    partial: str = ""
    _reported: list[dict[str, Any]] = field(default_factory=list)
    _said: list[dict[str, Any]] = field(default_factory=list)  # the comments posted
    _checked: Checked | None = None
    _posted: int | None = None
    _cut: DiffCut | None = None

    async def run(self) -> PassEnd:
        end = await self._vote(0, collect=False) if self.passes <= 1 else await self._voted()
        checked = self._checked
        end.held = list(checked.held) if checked is not None else []
        if end.kind == "reviewed" and checked is not None and checked.unchecked and end.stop is not None:
            end.kind, end.reason = "partial", unchecked_line(end.stop)
        return end

    async def _vote(self, order: int, *, collect: bool) -> PassEnd:
        """One review of the change (a vote, when there are several), with the overflow retry
        (context/diff_context.py `overflow_retry`); an earlier vote's cut is read by the others too."""
        self._reported = []
        steps = self.tool_steps

        def ran() -> bool:
            return self.tool_steps > steps or bool(self._reported) or self._posted is not None

        def overflowed(cut: DiffCut) -> None:
            self._cut = cut
            if self.on_overflow is not None:
                self.on_overflow()

        async def build(shown: list[PullFile], one_call: bool) -> PassPrompts:
            return await self.prompts(shown, one_call, order)

        async def calls(prompts: PassPrompts, cut: DiffCut | None) -> PassEnd:
            if cut is None:
                return await self._calls(prompts, order, collect)
            try:
                return await self._calls(prompts, order, collect)
            except BeamError as error:
                if error.code != OVERFLOW_CODE:
                    raise
                return self._overflowed_again(error, cut)

        return await overflow_retry(self.files, build, calls, ran=ran, on_overflow=overflowed, cut=self._cut)

    def _overflowed_again(self, error: BeamError, cut: DiffCut) -> PassEnd:
        """The cut diff overflowed too: not reviewed, with the server's context size if it said it."""
        size = context_size(error.detail or "")
        said = f"the server's context is {size} tokens" if size else "the server did not say its context size"
        detail = f"even with the diff cut to half ({cut.kept} characters); {said}"
        reason = not_reviewed_reason(OVERFLOW_CODE, detail)
        return PassEnd("not_reviewed", OVERFLOW_CODE, detail, reason, cut=cut)

    async def _voted(self) -> PassEnd:
        """The votes, then the majority's findings checked, then one review posted."""
        ends: list[PassEnd] = []
        for order in range(max(1, self.passes)):
            if order and await self.guard() is not None:  # a cap reached by the votes before
                break
            ends.append(await self._vote(order, collect=True))
            self._stage(f"vote {order + 1}", (ends[-1].collected or ("", []))[1])
            if self.guard.stop is not None:
                break
        answered = [e for e in ends if e.kind != "not_reviewed" and e.collected is not None]
        if not answered:
            return next((e for e in ends if e.stop is not None), ends[0])
        first = answered[0]
        assert first.collected is not None
        body, comments = first.collected
        notes: list[str] = []
        if self.passes > 1:
            tally = majority([e.collected[1] for e in answered if e.collected is not None])
            comments = tally.kept
            notes.append(tally.line(self.passes))
            self._stage("majority", comments)
        end = PassEnd(
            "reviewed",
            result=first.result,
            posted_with=first.posted_with,
            files_read=max(e.files_read for e in answered),
            files_total=first.files_total,
            truncated=sorted({name for e in ends for name in e.truncated}),
            cut=self._cut,
            answered_in_text=first.answered_in_text,
        )
        end.stop = self.guard.stop
        partial = next((e.reason for e in answered if e.kind == "partial"), "")
        if not partial and end.stop is not None and len(ends) < self.passes:
            by = cap_words(end.stop)
            partial = f"**partial:** stopped by {by} after {len(ends)} of {self.passes} review passes."
        if partial:
            end.kind, end.reason = "partial", partial
        voted = "\n\n".join(f"<sub>{note}</sub>" for note in notes)
        await self._post(body, comments, notes=voted, partial=partial)
        end.stop = self.guard.stop
        end.reported = list(self._said)
        end.review_id = self._posted
        return end

    def _stage(self, name: str, comments: list[dict[str, Any]]) -> None:
        log.info("review %s: %s: %d findings", self.run_id, name, len(comments))
        if self.on_stage is not None:
            self.on_stage(name, list(comments))

    def _verifier(self) -> Verifier:
        ask = getattr(self.meter, "complete_structured", None)
        ok = getattr(self.meter, "structured_ok", None)

        async def structured(messages: list[dict[str, Any]], schema: dict[str, Any]) -> Any | None:
            return await ask(messages, schema, name="verdict") if ask is not None else None

        def can_ask() -> bool:
            return self.structured and ask is not None and ok is not None and bool(ok())

        return Verifier(
            structured,
            can_ask,
            self.tree.sandbox,
            self.files,
            self.guard,
            lambda: cap_words(self.guard.stop) if self.guard.stop is not None else "a cap",
        )

    async def _frame(self, frame: StreamChunk) -> None:
        self.tool_steps += frame.type is StreamChunkType.TOOL
        if self.on_frame is not None:
            await self.on_frame(frame)

    async def _post(
        self, body: str, comments: list[dict[str, Any]], notes: str = "", partial: str = ""
    ) -> int | None:
        """The caller's post, with what the pass adds: each finding once (votes.py `distinct`), the
        comments that name no problem left out (claims.py), the findings checked against the code
        (and what that dropped), the overflow cut, the votes' `notes`, the `partial` line."""
        # The model's body, also where it answered in plain text and no tool call came through
        # `review_change` (which shows a marker in it already): `markdown.untrusted`, issue 40.
        lines = [md.untrusted(body.strip())] if body.strip() else []
        unchecked = ""
        described = problem_claims(distinct(comments))
        comments = described.kept
        if described.dropped:
            lines.append(f"<sub>{described.footer()}</sub>")
        if self.verify and comments:
            self._stage("before verification", comments)  # what the same review unverified posts
            self._checked = await self._verifier().check(comments)
            comments = self._checked.kept
            if self._checked.held:
                self._stage("dropped by verification", self._checked.held)
            lines.append(f"<sub>{self._checked.footer()}</sub>")
            # A partial review's body always says it is partial: the votes' `notes` are a tally, not
            # that line, so only a `partial` line the caller already has stands in for it.
            if self._checked.unchecked and self.guard.stop is not None and not partial:
                unchecked = unchecked_line(self.guard.stop)
                lines.append(unchecked)
        if self._cut is not None:
            lines.append(f"<sub>{self._cut.named()}</sub>")
        lines += [line for line in (notes, partial) if line]
        self.partial = partial or unchecked
        self._said = list(comments)
        self._posted = await self.post("\n\n".join(lines), comments)
        return self._posted

    async def _post_now(self, body: str, comments: list[dict[str, Any]]) -> int | None:
        """A one-call review is posted from inside its tool call, as it always was."""
        self._reported.extend(comments)
        return await self._post(body, comments)

    async def _calls(self, prompts: PassPrompts, order: int, collect: bool) -> PassEnd:
        chunked = len(prompts.calls) > 1
        gather = chunked or collect
        parts = CallParts()

        async def collect_part(body: str, comments: list[dict[str, Any]]) -> int | None:
            self._reported.extend(comments)
            return await parts.collect(body, comments)

        post_part: PostReview = collect_part if gather else self._post_now
        total = len({name for names in prompts.call_files for name in names})
        end = PassEnd("not_reviewed", files_total=total, cut=self._cut)
        answered = 0
        answered_calls: set[int] = set()
        unanswered: str | None = None
        diff = DiffMap.from_files((f.filename, f.patch) for f in self.files)  # read, never changed
        for index, text in enumerate(prompts.calls):
            report = ToolReport()
            names = prompts.call_files[index] if index < len(prompts.call_files) else list(diff.lines)
            review = ReviewChangeTool(
                diff,
                report,
                post_part,
                self.tree.sandbox,
                fold_outside=self.fold_outside,
                checked=CheckedSuggestions(ruff=prompts.lint_ran),
                summary=self._summary(),
                instructions=self._instructions(),
            )
            lines = {name: diff.lines[name] for name in names if diff.lines.get(name)}
            with_: PostedWith | None = await self._structured(text, review, lines)
            if with_ is None and self.guard.stop is None:
                with_, why = await self._tool_loop(text, review, report, index, order, gather, end)
            else:
                why = None
            if with_ is not None:
                answered += 1
                end.posted_with = with_
                answered_calls.add(index)
                end.files_read = files_read(prompts.call_files, answered_calls)
            else:
                unanswered = unanswered or why or NO_ANSWER_CODE
            if self.guard.stop is not None:
                end.stop = self.guard.stop
                break
        calls = len(prompts.calls)
        if answered == 0:
            return not_reviewed(end, unanswered)
        if (answered == calls and end.stop is None) or not chunked:
            end.kind = "reviewed"
        else:
            end.kind = "partial"
            by = cap_words(end.stop) if end.stop is not None else code_words(unanswered)
            end.reason = partial_line(by, end.files_read, total)
        if gather:
            merged = parts.merged()
            if collect:
                end.collected = merged or ("", [])
            elif merged is not None:
                await self._post(*merged, partial=end.reason if end.kind == "partial" else "")
        end.reported = list(self._reported) if collect else list(self._said)
        end.stop = self.guard.stop or end.stop
        end.review_id = self._posted
        return end

    async def _structured(
        self, text: str, review: ReviewChangeTool, lines: dict[str, set[int]]
    ) -> PostedWith | None:
        """The call answered as structured output, through `review_change`'s checks; None when the
        server cannot constrain its answer, the answer was cut, or it held no review: the tool loop
        then asks as before. `lines` are the call's files and their commentable lines, which the
        schema lets a comment point at."""
        ask = getattr(self.meter, "complete_structured", None)
        if not self.structured or ask is None or await self.guard() is not None:
            return None
        messages = [
            {"role": "system", "content": STRUCTURED_SYSTEM},
            {"role": "user", "content": f"{text}\n\n{STRUCTURED_NOTE}"},
        ]
        schema = review_schema(lines)
        args = structured_review_args(await ask(messages, schema, name="review_change"))
        if args is None:
            return None
        await review.post_args(args)
        return "structured" if review.report.reviewed else None

    async def _tool_loop(
        self,
        text: str,
        review: ReviewChangeTool,
        report: ToolReport,
        index: int,
        order: int,
        gather: bool,
        end: PassEnd,
    ) -> tuple[PostedWith | None, str | None]:
        """The call as the skill's tool loop: how it answered, and why not when it did not."""
        tools = run_tools(self.tree, report, blob_url=self.blob_url, extra=[review, *self.extra_tools])
        hub = self.hub()
        one = not gather and self._cut is None
        hub.register_agent(
            skill_runner(
                "review",
                self.meter,
                tools,
                checkpoint=self.checkpoint if one else None,
                refusals=self.refusals,
                should_stop=self.guard,
            )
        )
        run = uuid.UUID(self.run_id)
        key = call_session(self.run_id, index) if order == 0 else vote_session(self.run_id, order, index)
        request = InvokeRequest(
            agent_name="review",
            content=[ContentPart.text_part(text)],
            session_id=(self.session or run) if one else key,
            request_id=run if index == 0 and order == 0 else key,
            metadata={"repository": self.repository, "number": self.number},
        )
        result = (await hub.invoke(request, on_frame=self._frame)).result
        end.result = result
        end.truncated += report.truncated
        metadata = result.metadata if isinstance(result.metadata, dict) else {}
        why = metadata.get("answered_in_text")
        if isinstance(why, str):
            end.answered_in_text = why
        with_ = await self._answer(tools, report, result, review.post)
        return with_, why if isinstance(why, str) else None

    async def _answer(
        self, tools: Sequence[Tool], report: ToolReport, result: AgentResult, post: PostReview
    ) -> PostedWith | None:
        """How this call answered, posting (or collecting) what it said; None when it said nothing."""
        if report.reviewed:
            return "review_change"
        if self.guard.stop is not None or result.interrupted:
            return None
        if await review_in_text(tools, result.text):  # findings written as JSON
            return "json"
        body = prose(result.text)
        if not body:
            return None
        report.reviewed = True
        await post(held_body(body, self._summary(), self._instructions()), [])
        return "text"

    def _summary(self) -> str:
        """The body of a review whose model wrote none that names a problem (issue 41)."""
        return summary_line(len(self.files), sum(f.additions + f.deletions for f in self.files))

    def _instructions(self) -> list[str]:
        """What a call of this pass is told, which a body must not merely say back."""
        return [*review_instructions(), STRUCTURED_SYSTEM, STRUCTURED_NOTE]


def vote_session(run_id: str, order: int, index: int) -> uuid.UUID:
    """Each call of each vote is a conversation of its own: no vote sees another's answers."""
    return uuid.uuid5(uuid.UUID(run_id), f"review-vote-{order}-call-{index}")
