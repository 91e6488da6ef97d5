"""A review's GitHub markup as a terminal shows it.

The review a run prints is the one GitHub would get, and its text is written for GitHub's renderer:
`<sub>` footers, `<details>` blocks, hidden `<!-- ... -->` markers the bot reads back later, and
committable ```` ```suggestion ```` blocks that mean "replace the commented lines with these". On a
terminal those are noise or, for a suggestion, say less than they mean; here they become text: tags
and markers dropped, entities decoded, and a suggestion shown as a diff of the lines it replaces
(`- old`, `+ new`). Code blocks other than suggestions are left exactly as written.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence

_SUGGESTION = re.compile(
    r"^(?P<fence>`{3,}|~{3,})suggestion[ \t]*\n(?P<body>.*?)\n?(?P=fence)[ \t]*$", re.MULTILINE | re.DOTALL
)
_FENCED = re.compile(r"^(?P<fence>`{3,}|~{3,})[^\n]*\n.*?\n(?P=fence)[ \t]*$", re.MULTILINE | re.DOTALL)
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_BREAK = re.compile(r"<br\s*/?>", re.IGNORECASE)
_SUMMARY = re.compile(r"<summary\b[^>]*>(.*?)</summary>", re.IGNORECASE | re.DOTALL)
# GitHub's formatting tags that carry no meaning in plain text (what our render modules write, and
# what a model copies from them).
_TAGS = re.compile(
    r"</?(?:sub|sup|details|summary|b|strong|i|em|p|span|div|kbd|ins|del|small)\b[^>]*>", re.IGNORECASE
)
_BLANK_RUNS = re.compile(r"\n{3,}")


def suggestion_diff(new: str, replaced: Sequence[str]) -> str:
    """The lines a suggestion replaces (`- `) and what it puts there (`+ `)."""
    added = new.split("\n") if new else []
    return "\n".join([f"- {line}" for line in replaced] + [f"+ {line}" for line in added])


def _prose(text: str) -> str:
    text = _BREAK.sub("\n", text)
    text = _SUMMARY.sub(lambda found: f"{found.group(1).strip()}:", text)
    return html.unescape(_TAGS.sub("", text))


def as_text(markdown: str, replaced: Sequence[str] = ()) -> str:
    """`markdown` for a terminal; `replaced` are the head's lines a suggestion in it would replace."""
    text = _COMMENT.sub("", markdown)
    text = _SUGGESTION.sub(
        lambda found: "\x00" + suggestion_diff(found.group("body"), replaced) + "\x00", text
    )
    # Tags and entities are prose only: code (a fenced block, or a suggestion's diff) stays as written.
    parts: list[str] = []
    for i, piece in enumerate(text.split("\x00")):
        if i % 2:
            parts.append(piece)
            continue
        at = 0
        for block in _FENCED.finditer(piece):
            parts.append(_prose(piece[at : block.start()]))
            parts.append(block.group(0))
            at = block.end()
        parts.append(_prose(piece[at:]))
    joined = "".join(parts)
    lines = [line.rstrip() for line in joined.split("\n")]
    return _BLANK_RUNS.sub("\n\n", "\n".join(lines)).strip()
