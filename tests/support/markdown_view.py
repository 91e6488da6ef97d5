"""What GitHub renders of a comment as Markdown: its text without fenced blocks and inline code spans.

Tests of the approval comment's honesty (issue 28) assert on this view: a line an attacker drew with a
file name or a commit subject must not appear in it, and neither may `<img>` or a mention.
"""

from __future__ import annotations

import re


def outside_code(body: str) -> str:
    """`body` without fenced code blocks (a fence closes only on a run at least as long) and code spans."""
    kept: list[str] = []
    fence: str | None = None
    for line in body.split("\n"):
        opener = re.match(r"^ {0,3}(`{3,})", line)
        if fence is None and opener:
            fence = opener.group(1)
        elif fence is not None and re.match(rf"^ {{0,3}}{fence}`*\s*$", line):
            fence = None
        elif fence is None:
            kept.append(line)
    return re.sub(r"(`+)(?!`).*?(?<!`)\1(?!`)", "", "\n".join(kept))


def rendered_lines(body: str) -> list[str]:
    return [line.strip() for line in outside_code(body).split("\n")]
