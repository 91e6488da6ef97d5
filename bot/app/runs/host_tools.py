"""Tools the host provides under the skills' allowlisted names: `search` and `get_page`.

They read the run's tree (a review's head commit from the object store, `CommitTree`; another run's
checkout, `WorkingTree`), never outside it and never `.git`, through the tree's own jail, so the
model gets what the framework's sandbox tools cannot give it: a way to search the code and to cite a
range of lines at the PR head. The review's own tool, `review_change`, is the review pass's
(reviews/review_tool.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from bot.beam.errors import BeamError
from bot.beam.text_search import MAX_LINE_CHARS, MAX_SEARCH_FILE_BYTES, MAX_SEARCH_FILES, MAX_SEARCH_MATCHES
from bot.beam.tools import Tool, ToolSpec, json_params, string_arg
from bot.beam.tree_view import FileView
from bot.beam.types import AgentInput

__all__ = [
    "MAX_LINE_CHARS",
    "MAX_PAGE_LINES",
    "MAX_SEARCH_FILES",
    "MAX_SEARCH_FILE_BYTES",
    "MAX_SEARCH_MATCHES",
    "GetPageTool",
    "SearchTool",
    "ToolReport",
    "host_tools",
    "is_git_path",
]

MAX_PAGE_LINES = 400


@dataclass
class ToolReport:
    """What the tools of one call did that the run reports: files read only in part, the posted review.
    (Not a "ledger": that word is the findings ledger's, reviews/ledger.py, and the limits' one.)"""

    truncated: list[str] = field(default_factory=list)
    review_id: int | None = None
    reviewed: bool = False  # review_change ran (it may have posted nothing)


def _int_arg(args: Any, name: str, default: int) -> int:
    value = args.get(name) if isinstance(args, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def is_git_path(rel: str) -> bool:
    return any(part.lower() == ".git" for part in Path(rel).parts)


class SearchTool(Tool):
    """Case-insensitive text search over the run's tree, capped so a big repository stays cheap."""

    def __init__(self, view: FileView, report: ToolReport) -> None:
        self.view = view
        self.report = report

    def spec(self) -> ToolSpec:
        return ToolSpec(
            name="search",
            description="Search the files at the change's head for a text (case-insensitive). Returns path, "
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
        if is_git_path(sub):
            raise BeamError("BEM-337", sub)
        return await anyio.to_thread.run_sync(self.view.search, sub, query.lower())


class GetPageTool(Tool):
    """A file or a range of its lines at the PR head, with a link the answer can cite."""

    def __init__(self, view: FileView, report: ToolReport, blob_url: Callable[[str, int, int], str]) -> None:
        self.view = view
        self.report = report
        self.blob_url = blob_url

    def spec(self) -> ToolSpec:
        return ToolSpec(
            name="get_page",
            description="Read lines of a file at the change's head (at most 400 lines per call), "
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
        if is_git_path(rel):
            raise BeamError("BEM-337", rel)
        start = max(1, _int_arg(args, "start", 1))
        end = _int_arg(args, "end", start + MAX_PAGE_LINES - 1)
        return await anyio.to_thread.run_sync(self._page, rel, start, end)

    def _page(self, rel: str, start: int, end: int) -> dict[str, Any]:
        data = self.view.read_bytes(rel, None)  # the jail's refusals, and BEM-307 for what is no file
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise BeamError("BEM-307", f"{rel}: UnicodeDecodeError") from None
        lines = text.splitlines()
        end = min(end, len(lines), start + MAX_PAGE_LINES - 1)
        truncated = end < len(lines) and end - start + 1 >= MAX_PAGE_LINES
        body = "\n".join(f"{n}: {lines[n - 1][:MAX_LINE_CHARS]}" for n in range(start, end + 1))
        if truncated:
            self.report.truncated.append(rel)
        return {
            "path": rel,
            "start": start,
            "end": end,
            "total_lines": len(lines),
            "text": body,
            "url": self.blob_url(rel, start, end),
            "truncated": truncated,
        }


def host_tools(view: FileView, report: ToolReport, *, blob_url: Callable[[str, int, int], str]) -> list[Tool]:
    return [SearchTool(view, report), GetPageTool(view, report, blob_url)]
