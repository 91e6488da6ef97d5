"""No noise: a finding the bot already made on the same line is not posted again.

A finding is keyed by its path, the content of its line (not the line number, which moves) and its
normalised text. Each inline comment the bot posts carries the key in a hidden marker, its last line;
comments without one (older, or posted by `/beam review`) are keyed from their diff hunk's last line.
A marker anywhere else is not the bot's (issue 40: the model's words pass `markdown.untrusted`, and a
marker counts only where the bot puts it).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from typing import Any

from bot.app.github.models import ReviewComment

_MARKER = re.compile(r"(?:\A|\n)<!-- beam-finding:([0-9a-f]{16}) -->\s*\Z")
_SUGGESTION = re.compile(r"\n*(`{3,})suggestion\n.*?\n\1", re.DOTALL)
_WORDS = re.compile(r"[^\w]+")


def marker(key: str) -> str:
    return f"<!-- beam-finding:{key} -->"


def marker_key(body: str) -> str | None:
    """The finding key a comment's hidden marker holds, if it has one."""
    found = _MARKER.search(body)
    return found[1] if found else None


def normalise(text: str) -> str:
    """Case, punctuation, markup and whitespace do not make a finding new."""
    text = _MARKER.sub("", _SUGGESTION.sub("", text))
    return _WORDS.sub(" ", text.lower()).strip()


def finding_key(path: str, line_text: str, finding: str) -> str:
    basis = f"{path}\0{line_text.strip()}\0{normalise(finding)}"
    return hashlib.sha256(basis.encode()).hexdigest()[:16]


def known_keys(comments: Iterable[ReviewComment], bot_login: str) -> set[str]:
    """Keys of the findings the bot already posted on this pull request."""
    keys: set[str] = set()
    for comment in comments:
        if comment.user is None or comment.user.login.lower() != bot_login.lower():
            continue
        body = comment.body or ""
        found = _MARKER.findall(body)
        if found:
            keys.update(found)
        elif comment.path and comment.diff_hunk and comment.in_reply_to_id is None:
            last = comment.diff_hunk.splitlines()[-1] if comment.diff_hunk.strip() else ""
            keys.add(finding_key(comment.path, last[1:] if last[:1] in "+ -" else last, body))
    return keys


def fresh_findings(
    comments: list[dict[str, Any]], changed: dict[str, set[int]] | None, seen: set[str]
) -> list[dict[str, Any]]:
    """The comments worth posting: on a line that changed since the last review (`changed`; None for
    a full review), not already made; each gets its key as a hidden marker."""
    out: list[dict[str, Any]] = []
    taken = set(seen)
    for comment in comments:
        path, line = comment["path"], comment["line"]
        if changed is not None:
            lines = changed.get(path, set())
            first = comment.get("start_line") or line
            if not any(n in lines for n in range(first, line + 1)):
                continue
        key = finding_key(path, comment.get("line_text", ""), comment.get("finding", comment["body"]))
        if key in taken:
            continue
        taken.add(key)
        out.append({**comment, "body": f"{comment['body']}\n\n{marker(key)}"})
    return out


def review_holding(
    comments: list[dict[str, Any]], existing: Iterable[ReviewComment], bot_login: str
) -> tuple[int, int] | None:
    """The review of the bot's that already holds findings of `comments`, and how many: a review a
    retry would post again, which GitHub made after all (its answer was lost, the client gave up)."""
    keys = {finding_key(c["path"], c.get("line_text", ""), c.get("finding", c["body"])) for c in comments}
    held: dict[int, int] = {}
    for comment in existing:
        if comment.user is None or comment.user.login.lower() != bot_login.lower():
            continue
        key = marker_key(comment.body or "")
        if key in keys and comment.pull_request_review_id is not None:
            held[comment.pull_request_review_id] = held.get(comment.pull_request_review_id, 0) + 1
    if not held:
        return None
    review_id = max(held, key=lambda review: held[review])
    return review_id, held[review_id]
