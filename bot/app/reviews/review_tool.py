"""`review_change`: the review pass's one tool that posts (reviews/review_pass.py), and the review a
model wrote into its answer as JSON instead of calling it (`review_in_text`, text_review.py).

It posts the run's one pull-request review (event COMMENT, never APPROVE) through the caller's
`PostReview`: inline comments only on lines GitHub accepts, a suggestion only when it applies and the
file still parses with it (suggestions.py, suggestion_check.py). The model's words (the body, each
comment, each suggestion) pass `markdown.untrusted` here, the one place every review's text comes in
by, so a pull request that makes the model write a marker of the bot's gets it shown (issue 40).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import anyio

from bot.app import markdown as md
from bot.app.context.linters import ruff_syntax_errors
from bot.app.repo_config.review_rules import SEVERITIES
from bot.app.reviews.answer_checks import (
    change_path,
    held_body,
    not_a_review,
    reads_as_prose,
    said_back,
    usable_suggestion,
)
from bot.app.reviews.diffmap import DiffMap
from bot.app.reviews.suggestion_check import breaks_parse
from bot.app.reviews.suggestions import SuggestionCheck, apply_suggestion, check_suggestion
from bot.app.reviews.text_review import review_args_from_text
from bot.app.runs import render
from bot.app.runs.host_tools import ToolReport, is_git_path
from bot.beam.errors import BeamError
from bot.beam.sandbox import SandboxRoot
from bot.beam.tools import Tool, ToolSpec, json_params, string_arg
from bot.beam.types import AgentInput

# Posts the review; returns its id, or None when nothing was posted (an automatic review with no
# new findings). Each comment: path, line, side, body, optionally start_line and start_side, plus
# `finding` (the model's text, without a suggestion) and `line_text` (the line at the head).
PostReview = Callable[[str, list[dict[str, Any]]], Awaitable[int | None]]


@dataclass(frozen=True)
class CheckedSuggestions:
    """How a suggestion is checked before it is offered: the file parsed with it applied
    (suggestion_check.py), and ruff's syntax errors counted when the review's linters are on."""

    parse: bool = True
    ruff: bool = False


class ReviewChangeTool(Tool):
    """Posts the run's one pull-request review (event COMMENT, never APPROVE).

    Inline comments go only on lines GitHub accepts (in the diff); the others are folded into the
    body, so one bad line number never loses the whole review (or dropped, with `fold_outside=False`,
    as automatic reviews comment only on lines that changed). A comment on a file the change does not
    touch is dropped on every path, and the body's footer counts it: nothing in the diff can check it,
    and folded into the body it read as a finding the bot stood behind. A `suggestion` becomes a committable
    block only when it applies to lines `start_line..line` of the head (suggestions.py).
    """

    def __init__(
        self,
        diff: DiffMap,
        report: ToolReport,
        post: PostReview,
        root: SandboxRoot,
        *,
        fold_outside: bool = True,
        checked: CheckedSuggestions = CheckedSuggestions(),
        summary: str = "",
        instructions: Sequence[str] = (),
    ) -> None:
        self.diff = diff
        self.report = report
        self.post = post
        self.root = root
        self.fold_outside = fold_outside
        self.checked = checked
        # The body posted instead of one that names no problem (answer_checks.py `held_body`), and
        # what the model was told, which a body must not merely say back.
        self.summary = summary
        self.instructions = instructions

    def spec(self) -> ToolSpec:
        comment = {
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "line": {
                    "type": "integer",
                    "description": "the number shown before the line in the hunk (the new "
                    "version's line number; for several lines, the last one)",
                },
                "start_line": {
                    "type": "integer",
                    "description": "for a comment on several lines: the number shown before the "
                    "first one in the hunk",
                },
                "body": {"type": "string"},
                "severity": {
                    "type": "string",
                    "enum": list(SEVERITIES),
                    "description": "how much it matters: nit (style, naming) < minor < major (a bug "
                    "users will hit) < critical (data loss, security)",
                },
                "suggestion": {
                    "type": "string",
                    "description": "replacement for lines start_line..line (or line), offered as a "
                    "committable suggestion",
                },
            },
            "required": ["path", "line", "body", "severity"],
        }
        return ToolSpec(
            name="review_change",
            description="Post your review of the change once: a summary body and inline comments on "
            "changed lines. Call it once, at the end.",
            parameters=json_params(
                {"body": {"type": "string"}, "comments": {"type": "array", "items": comment}}, ["body"]
            ),
        )

    async def invoke(self, args: Any, input: AgentInput) -> Any:
        return await self.post_args(args)

    async def post_args(self, args: Any) -> dict[str, Any]:
        """The call's work, also for arguments a model wrote in its answer without calling the tool
        (text_review.py): the same checks of lines and suggestions either way."""
        body = md.untrusted(string_arg(args, "body"))
        if self.report.reviewed:
            return {"posted": False, "reason": "the review was already posted in this run"}
        raw = args.get("comments") if isinstance(args.get("comments"), list) else []
        inline: list[dict[str, Any]] = []
        folded: list[str] = []
        dropped = outside = 0
        for item in raw:
            if not isinstance(item, dict):
                continue
            path, line, text = item.get("path"), item.get("line"), item.get("body")
            if not (isinstance(path, str) and isinstance(line, int) and isinstance(text, str)):
                continue
            text = md.untrusted(text)
            path = change_path(path, self.diff.lines) or path  # a repository line before it, `a/`, ...
            if path not in self.diff.lines:  # a file the change does not touch: nothing to check it by
                outside += 1
                continue
            if not self.diff.accepts(path, line):
                if self.fold_outside:
                    folded.append(f"- {md.code(path)} line {line}: {text}")
                else:
                    dropped += 1
                continue
            inline.append(await self._comment(path, line, text, item))
        why = not_a_review(body) or (
            "the instructions said back" if said_back(body, self.instructions) else None
        )
        if why is not None:  # issues 30 and 41: a refusal, a thank-you, cut JSON, the instructions
            if not (inline or folded):
                return {"posted": False, "reason": f"the body is {why}, not a review: post your findings"}
            body = self.summary
        body = held_body(body, self.summary, self.instructions)  # issue 41: praise, a description
        if folded:
            body = f"{body}\n\n**Comments on lines outside the diff**\n" + "\n".join(folded)
        if outside:
            body = f"{body}\n\n<sub>{render.outside_change(outside)}.</sub>"
        self.report.reviewed = True
        self.report.review_id = await self.post(body, inline)
        result: dict[str, Any] = {"posted": self.report.review_id is not None, "inline_comments": len(inline)}
        if outside:
            result["dropped_outside_change"] = outside
        if not self.fold_outside:
            return {**result, "dropped_comments": dropped}
        return {**result, "folded_comments": len(folded)}

    async def _comment(self, path: str, line: int, text: str, item: dict[str, Any]) -> dict[str, Any]:
        start = item.get("start_line")
        start = start if isinstance(start, int) and not isinstance(start, bool) and start < line else None
        lines = await anyio.to_thread.run_sync(self._lines, path)
        comment: dict[str, Any] = {"path": path, "line": line, "side": "RIGHT", "finding": text}
        # Every finding carries a severity (the repository's `review.severity` and `max_comments`
        # read it); a model that leaves it out gets `minor`.
        severity = item.get("severity")
        comment["severity"] = severity if severity in SEVERITIES else "minor"
        comment["line_text"] = lines[line - 1] if lines is not None and 0 < line <= len(lines) else ""
        suggestion = usable_suggestion(item.get("suggestion"))  # "" would delete the lines
        # The severity shows on GitHub (and in `run review`); `finding` stays the model's words alone,
        # which is what the ledger and the matching of a finding read.
        label = render.severity_label(comment["severity"])
        body = f"{label}\n{text}"
        if isinstance(suggestion, str) and reads_as_prose(suggestion):  # words, not code: no block
            body = f"{label}\n{text}\n\n{render.suggestion_as_words(suggestion)}"
            suggestion = None
        if isinstance(suggestion, str):
            first = start or line
            check = check_suggestion(lines, first, line, suggestion, lambda n: self.diff.accepts(path, n))
            if check.applies and lines is not None:
                check = await self._still_parses(path, lines, first, line, suggestion)
            if check.applies and render.holds_comment(suggestion):
                check = SuggestionCheck(False, render.HOLDS_COMMENT)
            if check.applies:
                body = f"{label}\n{text}\n\n{render.suggestion_block(suggestion)}"
            else:
                body = f"{label}\n{text}\n\n{render.suggestion_as_text(suggestion, check.reason)}"
                start = start if start is not None and self._range_ok(path, start, line) else None
        elif start is not None and not self._range_ok(path, start, line):
            start = None
        if start is not None:
            comment.update(start_line=start, start_side="RIGHT")
        comment["body"] = body
        return comment

    async def _still_parses(
        self, path: str, lines: list[str], start: int, end: int, suggestion: str
    ) -> SuggestionCheck:
        """Refused when the file parsed before and not with the suggestion applied."""
        if not self.checked.parse:
            return SuggestionCheck(True)
        before = "\n".join(lines) + "\n"
        after = "\n".join(apply_suggestion(lines, start, end, suggestion)) + "\n"
        if await anyio.to_thread.run_sync(breaks_parse, path, before, after):
            return SuggestionCheck(False, render.NOT_PARSING)
        if self.checked.ruff and path.endswith((".py", ".pyi")):
            was = await ruff_syntax_errors(path, before, self.root.path)
            now = await ruff_syntax_errors(path, after, self.root.path)
            if was is not None and now is not None and now > was:
                return SuggestionCheck(False, render.NOT_PARSING_RUFF)
        return SuggestionCheck(True)

    def _range_ok(self, path: str, start: int, end: int) -> bool:
        return all(self.diff.accepts(path, n) for n in range(start, end + 1))

    def _lines(self, path: str) -> list[str] | None:
        if is_git_path(path):
            return None
        try:
            text = self.root.resolve(path).read_text(encoding="utf-8")
        except (BeamError, OSError, UnicodeDecodeError):
            return None
        lines = text.split("\n")
        return lines[:-1] if text.endswith("\n") else lines


async def review_in_text(tools: Sequence[Tool], answer: str) -> dict[str, Any] | None:
    """Post the review a model wrote into its answer as JSON instead of calling `review_change`
    (text_review.py), through the tool and its checks; the arguments read, None when the answer held
    none (or the review was already posted). Give it the model's own text: links added to the answer
    afterwards would change its paths."""
    tool = next((t for t in tools if isinstance(t, ReviewChangeTool)), None)
    args = review_args_from_text(answer) if tool is not None and not tool.report.reviewed else None
    if tool is None or args is None:
        return None
    await tool.post_args(args)
    return args
