"""Tools the host provides under the skills' allowlisted names: `review_change`, `search`, `get_page`.

They read the run's own checkout (never outside its root, never `.git`) and publish through the
GitHub layer, so the model gets what the framework's sandbox tools cannot give it: a way to post one
review with inline comments, to search the code, and to cite a range of lines at the PR head.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from bot.app.repo_config.review_rules import SEVERITIES
from bot.app.runs import render
from bot.app.runs.answer_checks import change_path, review_body, usable_suggestion
from bot.app.runs.diffmap import DiffMap
from bot.app.runs.linters import ruff_syntax_errors
from bot.app.runs.suggestion_check import breaks_parse
from bot.app.runs.suggestions import SuggestionCheck, apply_suggestion, check_suggestion
from bot.beam.errors import BeamError
from bot.beam.sandbox import SandboxRoot
from bot.beam.tools import Tool, ToolSpec, json_params, string_arg
from bot.beam.types import AgentInput

MAX_SEARCH_MATCHES = 50
MAX_SEARCH_FILES = 20_000
MAX_SEARCH_FILE_BYTES = 512 * 1024
MAX_PAGE_LINES = 400
MAX_LINE_CHARS = 500

# Posts the review; returns its id, or None when nothing was posted (an automatic review with no
# new findings). Each comment: path, line, side, body, optionally start_line and start_side, plus
# `finding` (the model's text, without a suggestion) and `line_text` (the line at the head).
PostReview = Callable[[str, list[dict[str, Any]]], Awaitable[int | None]]


@dataclass(frozen=True)
class CheckedSuggestions:
    """How a suggestion is checked before it is offered: the file parsed with it applied
    (runs/suggestion_check.py), and ruff's syntax errors counted when the review's linters are on."""

    parse: bool = True
    ruff: bool = False


@dataclass
class RunLedger:
    """What the host tools did that the run reports: files read only in part, the posted review."""

    truncated: list[str] = field(default_factory=list)
    review_id: int | None = None
    reviewed: bool = False  # review_change ran (it may have posted nothing)


def _int_arg(args: Any, name: str, default: int) -> int:
    value = args.get(name) if isinstance(args, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _is_git_path(rel: str) -> bool:
    return any(part.lower() == ".git" for part in Path(rel).parts)


class SearchTool(Tool):
    """Case-insensitive text search over the checkout, capped so a big repository stays cheap."""

    def __init__(self, root: SandboxRoot, ledger: RunLedger) -> None:
        self.root = root
        self.ledger = ledger

    def spec(self) -> ToolSpec:
        return ToolSpec(
            name="search",
            description="Search the pull request's files for a text (case-insensitive). Returns path, "
            "line number and the line for each match, at most 50.",
            parameters=json_params(
                {"query": {"type": "string"}, "path": {"type": "string", "description": "folder to search"}},
                ["query"],
            ),
        )

    async def invoke(self, args: Any, input: AgentInput) -> Any:
        query = string_arg(args, "query")
        if not query.strip():
            raise BeamError("BEM-108", {"detail": "query"})
        sub = args.get("path") if isinstance(args.get("path"), str) else ""
        if _is_git_path(sub):
            raise BeamError("BEM-337", sub)
        base = self.root.resolve(sub)
        return await anyio.to_thread.run_sync(self._search, base, query.lower())

    def _search(self, base: Path, needle: str) -> dict[str, Any]:
        matches: list[dict[str, Any]] = []
        scanned = 0
        truncated = False
        root = self.root.path
        for dirpath, dirnames, filenames in os.walk(base, followlinks=False):
            dirnames[:] = sorted(d for d in dirnames if d.lower() != ".git")
            for name in sorted(filenames):
                path = Path(dirpath) / name
                if path.is_symlink():
                    continue
                scanned += 1
                if scanned > MAX_SEARCH_FILES or len(matches) >= MAX_SEARCH_MATCHES:
                    truncated = True
                    break
                try:
                    if path.stat().st_size > MAX_SEARCH_FILE_BYTES:
                        continue
                    data = path.read_bytes()
                except OSError:
                    continue
                if b"\0" in data[:8192]:
                    continue
                rel = path.relative_to(root).as_posix()
                for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), start=1):
                    if needle in line.lower():
                        matches.append({"path": rel, "line": number, "text": line[:MAX_LINE_CHARS]})
                        if len(matches) >= MAX_SEARCH_MATCHES:
                            break
            if truncated:
                break
        return {"matches": matches, "truncated": truncated}


class GetPageTool(Tool):
    """A file or a range of its lines at the PR head, with a link the answer can cite."""

    def __init__(
        self, root: SandboxRoot, ledger: RunLedger, blob_url: Callable[[str, int, int], str]
    ) -> None:
        self.root = root
        self.ledger = ledger
        self.blob_url = blob_url

    def spec(self) -> ToolSpec:
        return ToolSpec(
            name="get_page",
            description="Read lines of a file at the pull request's head (at most 400 lines per call), "
            "with numbered lines and a link to cite.",
            parameters=json_params(
                {
                    "path": {"type": "string"},
                    "start": {"type": "integer", "description": "first line, from 1"},
                    "end": {"type": "integer", "description": "last line, inclusive"},
                },
                ["path"],
            ),
        )

    async def invoke(self, args: Any, input: AgentInput) -> Any:
        rel = string_arg(args, "path")
        if _is_git_path(rel):
            raise BeamError("BEM-337", rel)
        path = self.root.resolve(rel)
        start = max(1, _int_arg(args, "start", 1))
        end = _int_arg(args, "end", start + MAX_PAGE_LINES - 1)
        return await anyio.to_thread.run_sync(self._page, rel, path, start, end)

    def _page(self, rel: str, path: Path, start: int, end: int) -> dict[str, Any]:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise BeamError("BEM-307", f"{rel}: {error.__class__.__name__}") from None
        lines = text.splitlines()
        end = min(end, len(lines), start + MAX_PAGE_LINES - 1)
        truncated = end < len(lines) and end - start + 1 >= MAX_PAGE_LINES
        body = "\n".join(f"{n}: {lines[n - 1][:MAX_LINE_CHARS]}" for n in range(start, end + 1))
        if truncated:
            self.ledger.truncated.append(rel)
        return {
            "path": rel,
            "start": start,
            "end": end,
            "total_lines": len(lines),
            "text": body,
            "url": self.blob_url(rel, start, end),
            "truncated": truncated,
        }


class ReviewChangeTool(Tool):
    """Posts the run's one pull-request review (event COMMENT, never APPROVE).

    Inline comments go only on lines GitHub accepts (in the diff); the others are folded into the
    body, so one bad line number never loses the whole review (or dropped, with `fold_outside=False`,
    as automatic reviews comment only on lines that changed). A `suggestion` becomes a committable
    block only when it applies to lines `start_line..line` of the head (runs/suggestions.py).
    """

    def __init__(
        self,
        diff: DiffMap,
        ledger: RunLedger,
        post: PostReview,
        root: SandboxRoot,
        *,
        fold_outside: bool = True,
        checked: CheckedSuggestions = CheckedSuggestions(),
    ) -> None:
        self.diff = diff
        self.ledger = ledger
        self.post = post
        self.root = root
        self.fold_outside = fold_outside
        self.checked = checked

    def spec(self) -> ToolSpec:
        comment = {
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "line": {
                    "type": "integer",
                    "description": "the number shown before the line in `__new hunk__` (the new "
                    "version's line number; for several lines, the last one)",
                },
                "start_line": {
                    "type": "integer",
                    "description": "for a comment on several lines: the number shown before the "
                    "first one in `__new hunk__`",
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
            description="Post your review of the pull request once: a summary body and inline comments on "
            "changed lines. Call it once, at the end.",
            parameters=json_params(
                {"body": {"type": "string"}, "comments": {"type": "array", "items": comment}}, ["body"]
            ),
        )

    async def invoke(self, args: Any, input: AgentInput) -> Any:
        return await self.post_args(args)

    async def post_args(self, args: Any) -> dict[str, Any]:
        """The call's work, also for arguments a model wrote in its answer without calling the tool
        (runs/text_review.py): the same checks of lines and suggestions either way."""
        body = string_arg(args, "body")
        if self.ledger.reviewed:
            return {"posted": False, "reason": "the review was already posted in this run"}
        raw = args.get("comments") if isinstance(args.get("comments"), list) else []
        inline: list[dict[str, Any]] = []
        folded: list[str] = []
        dropped = 0
        for item in raw:
            if not isinstance(item, dict):
                continue
            path, line, text = item.get("path"), item.get("line"), item.get("body")
            if not (isinstance(path, str) and isinstance(line, int) and isinstance(text, str)):
                continue
            path = change_path(path, self.diff.lines) or path  # a repository line before it, `a/`, ...
            if not self.diff.accepts(path, line):
                if self.fold_outside:
                    folded.append(f"- `{path}` line {line}: {text}")
                else:
                    dropped += 1
                continue
            inline.append(await self._comment(path, line, text, item))
        body = review_body(body, has_comments=bool(inline or folded), empty=render.EMPTY_REVIEW)  # issue 30
        if folded:
            body = f"{body}\n\n**Comments on lines outside the diff**\n" + "\n".join(folded)
        self.ledger.reviewed = True
        self.ledger.review_id = await self.post(body, inline)
        result = {"posted": self.ledger.review_id is not None, "inline_comments": len(inline)}
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
        body = text
        if isinstance(suggestion, str):
            first = start or line
            check = check_suggestion(lines, first, line, suggestion, lambda n: self.diff.accepts(path, n))
            if check.applies and lines is not None:
                check = await self._still_parses(path, lines, first, line, suggestion)
            if check.applies:
                body = f"{text}\n\n{render.suggestion_block(suggestion)}"
            else:
                body = f"{text}\n\n{render.suggestion_as_text(suggestion, check.reason)}"
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
        if _is_git_path(path):
            return None
        try:
            text = self.root.resolve(path).read_text(encoding="utf-8")
        except (BeamError, OSError, UnicodeDecodeError):
            return None
        lines = text.split("\n")
        return lines[:-1] if text.endswith("\n") else lines


def host_tools(
    root: SandboxRoot,
    ledger: RunLedger,
    *,
    diff: DiffMap,
    post_review: PostReview,
    blob_url: Callable[[str, int, int], str],
    fold_outside: bool = True,
    checked: CheckedSuggestions = CheckedSuggestions(),
) -> list[Tool]:
    return [
        SearchTool(root, ledger),
        GetPageTool(root, ledger, blob_url),
        ReviewChangeTool(diff, ledger, post_review, root, fold_outside=fold_outside, checked=checked),
    ]
