"""A review the model wrote into its answer instead of calling `review_change`.

Small self-hosted models often end a review with the findings in the text: `review_change`'s
arguments without the call around them (`{"body": ..., "comments": [...]}`), a bare list of
findings (`[{"file": ..., "line": ..., "issue": ...}]`), fenced or not, after a sentence of prose.
Calls written as text (a name and arguments) are the runner's to read (bot/beam/tool_dialects.py);
this is what is left: findings the model meant to post. Dropping them made the pipeline find less
than the same model asked for JSON alone (docs/review.md, the benchmark), so they are read here and
posted through `ReviewChangeTool.post_args`, under the same checks as a real call: a line outside
the diff is folded or dropped, a suggestion is offered only when it applies and parses.

Only JSON counts. A finding needs a path and a line number; prose that merely mentions a line
stays the review's body, as before.
"""

from __future__ import annotations

import json
import re
from typing import Any

from bot.app.repo_config.review_rules import SEVERITIES
from bot.app.reviews.answer_checks import every_finding

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_-]*)[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL)
_PATH_KEYS = ("path", "file", "filename", "file_path", "filepath")
_LINE_KEYS = ("line", "line_number", "lineno", "end_line", "start_line", "lines", "line_numbers")
_TEXT_KEYS = ("body", "comment", "claim", "message", "issue", "description", "finding", "problem", "text")
_LIST_KEYS = ("comments", "findings", "issues", "results", "problems", "bugs")
_MAX_COMMENTS = 50


def _loads(text: str) -> Any:
    try:
        return json.loads(text.strip())
    except ValueError:
        return None


def _spans(text: str) -> list[tuple[Any, int, int]]:
    """JSON values in the text, each with where it stands: fenced blocks first, then the whole text,
    then the widest `{...}` or `[...]` span, the one that opens first (a value after a sentence, or
    inside `name(...)`). Code in another language's fence is not read: it is code, not an answer."""
    found: list[tuple[Any, int, int]] = []
    masked = text
    for match in _FENCE.finditer(text):
        if match.group(1).lower() in ("", "json", "javascript", "js"):
            value = _loads(match.group(2))
            if value is not None:
                found.append((value, match.start(), match.end()))
        else:
            masked = masked[: match.start()] + " " * (match.end() - match.start()) + masked[match.end() :]
    whole = _loads(masked)
    if whole is not None:
        found.append((whole, 0, len(text)))
    widest = []
    for opening, closing in (("{", "}"), ("[", "]")):
        start, end = masked.find(opening), masked.rfind(closing)
        if 0 <= start < end:
            widest.append((start, end + 1))
    for start, end in sorted(widest):
        value = _loads(masked[start:end])
        if value is not None:
            found.append((value, start, end))
    return found


def _line(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value > 0 else None
    if isinstance(value, list) and value:
        return _line(value[-1])  # a range: GitHub anchors a comment on its last line
    if isinstance(value, str):
        numbers = re.findall(r"\d+", value)
        return int(numbers[-1]) if numbers and int(numbers[-1]) > 0 else None
    return None


def _comment(item: Any) -> dict[str, Any] | None:
    """One finding as `review_change` takes it, or None without a path, a line and a text."""
    if not isinstance(item, dict):
        return None
    path = next((item[k] for k in _PATH_KEYS if isinstance(item.get(k), str) and item[k].strip()), None)
    line = next((n for k in _LINE_KEYS if (n := _line(item.get(k))) is not None), None)
    text = next((item[k] for k in _TEXT_KEYS if isinstance(item.get(k), str) and item[k].strip()), None)
    if path is None or line is None or text is None:
        return None
    comment: dict[str, Any] = {"path": path.strip().strip("`").removeprefix("./"), "line": line, "body": text}
    severity = item.get("severity")
    if isinstance(severity, str) and severity.lower() in SEVERITIES:
        comment["severity"] = severity.lower()
    if isinstance(item.get("suggestion"), str):
        comment["suggestion"] = item["suggestion"]
    start = _line(item.get("start_line"))
    if start is not None and start < line:
        comment["start_line"] = start
    return comment


def _args(value: Any) -> tuple[str | None, list[dict[str, Any]]] | None:
    """(the body if the value holds one, its findings), or None when it holds none."""
    if isinstance(value, dict):
        for key in ("arguments", "parameters", "args", "input"):  # a call whose name was wrong or absent
            if isinstance(value.get(key), dict):
                return _args(value[key])
        lists = [value[k] for k in _LIST_KEYS if isinstance(value.get(k), list)]
        items = lists[0] if lists else [value]
        body = value.get("body") if lists and isinstance(value.get("body"), str) else None
    elif isinstance(value, list):
        items, body = value, None
    else:
        return None
    comments = [c for c in map(_comment, items) if c is not None]
    if not comments and body is None:
        return None
    return body, comments[:_MAX_COMMENTS]  # a body with an empty list is a review without comments


def review_args_from_text(text: str) -> dict[str, Any] | None:
    """`review_change`'s arguments from an answer that holds findings as JSON; None when it holds
    none. The body is the one the JSON gives, else the prose around the JSON."""
    found = [(*args, start, end) for value, start, end in _spans(text) if (args := _args(value)) is not None]
    return every_finding(text, found, limit=_MAX_COMMENTS)  # all blocks, not only the first (issue 30)
