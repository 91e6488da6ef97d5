"""Tools the host provides under the skills' allowlisted names: `search` and `get_page`.

They read the run's own checkout (never outside its root, never `.git`), so the model gets what the
framework's sandbox tools cannot give it: a way to search the code and to cite a range of lines at
the PR head. The review's own tool, `review_change`, is the review pass's (reviews/review_tool.py).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from bot.beam.errors import BeamError
from bot.beam.sandbox import SandboxRoot
from bot.beam.tools import Tool, ToolSpec, json_params, string_arg
from bot.beam.types import AgentInput

MAX_SEARCH_MATCHES = 50
MAX_SEARCH_FILES = 20_000
MAX_SEARCH_FILE_BYTES = 512 * 1024
MAX_PAGE_LINES = 400
MAX_LINE_CHARS = 500


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
    """Case-insensitive text search over the checkout, capped so a big repository stays cheap."""

    def __init__(self, root: SandboxRoot, report: ToolReport) -> None:
        self.root = root
        self.report = report

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
        if is_git_path(sub):
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
        self, root: SandboxRoot, report: ToolReport, blob_url: Callable[[str, int, int], str]
    ) -> None:
        self.root = root
        self.report = report
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
        if is_git_path(rel):
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


def host_tools(
    root: SandboxRoot, report: ToolReport, *, blob_url: Callable[[str, int, int], str]
) -> list[Tool]:
    return [SearchTool(root, report), GetPageTool(root, report, blob_url)]
