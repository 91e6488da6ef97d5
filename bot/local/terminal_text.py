"""A model's answer or a review, written in GitHub's markup, as a terminal shows it.

The text a run prints is the one GitHub would get, written for GitHub's renderer: headings, bold and
italic, `code`, links, fenced code, `<sub>` footers, `<details>` blocks, hidden `<!-- ... -->`
markers the bot reads back later, and committable ```` ```suggestion ```` blocks that mean "replace
the commented lines with these". On a terminal the markup is noise or, for a suggestion, says less
than it means; here it becomes text: a heading its words (the first two levels underlined), emphasis
and inline code their words, a link its words and its address, tags and markers dropped, entities
decoded, a fenced block its code indented by four spaces, and a suggestion a diff of the lines it
replaces (`- old`, `+ new`). Code is never touched inside: what it says is exactly what was written.
One function (`as_text`) for reviews, summaries and answers alike (issue 42).
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence

_SUGGESTION = re.compile(
    r"^(?P<fence>`{3,}|~{3,})suggestion[ \t]*\n(?P<body>.*?)\n?(?P=fence)[ \t]*$", re.MULTILINE | re.DOTALL
)
_FENCED = re.compile(
    r"^(?P<fence>`{3,}|~{3,})[^\n]*\n(?P<body>.*?)\n?(?P=fence)[ \t]*$", re.MULTILINE | re.DOTALL
)
_INLINE_CODE = re.compile(r"(?<!`)(?P<ticks>`+)(?!`)(?P<code>.+?)(?<!`)(?P=ticks)(?!`)")
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_BREAK = re.compile(r"<br\s*/?>", re.IGNORECASE)
_SUMMARY = re.compile(r"<summary\b[^>]*>(.*?)</summary>", re.IGNORECASE | re.DOTALL)
# GitHub's formatting tags that carry no meaning in plain text (what our render modules write, and
# what a model copies from them).
_TAGS = re.compile(
    r"</?(?:sub|sup|details|summary|b|strong|i|em|p|span|div|kbd|ins|del|small)\b[^>]*>", re.IGNORECASE
)
_HEADING = re.compile(r"^ {0,3}(?P<level>#{1,6})[ \t]+(?P<text>.*?)(?:[ \t]+#+)?[ \t]*$", re.MULTILINE)
_IMAGE = re.compile(r"!\[(?P<text>[^\]\n]*)\]\((?P<url>[^()\s]+)(?:\s+\"[^\"]*\")?\)")
_LINK = re.compile(r"\[(?P<text>[^\]\n]+)\]\((?P<url>[^()\s]+)(?:\s+\"[^\"]*\")?\)")
_AUTOLINK = re.compile(r"<(?P<url>https?://[^\s<>]+)>")
_STRONG = re.compile(
    r"(?<![\w*])\*\*(?=\S)(?P<text>.+?)(?<=\S)\*\*(?![\w*])|(?<!\w)__(?=\S)(?P<under>.+?)(?<=\S)__(?!\w)"
)
_EMPHASIS = re.compile(
    r"(?<![\w*])\*(?=[^\s*])(?P<text>[^*\n]+?)(?<=\S)\*(?![\w*])|(?<!\w)_(?=[^\s_])(?P<under>[^_\n]+?)(?<=\S)_(?!\w)"
)
_ESCAPE = re.compile(r"\\(?P<char>[\\`*_{}\[\]()#+\-.!|~<>])")
_BLANK_RUNS = re.compile(r"\n{3,}")
_CODE = "\x00"  # around the number of a piece of code taken out of the prose


def suggestion_diff(new: str, replaced: Sequence[str]) -> str:
    """The lines a suggestion replaces (`- `) and what it puts there (`+ `)."""
    added = new.split("\n") if new else []
    return "\n".join([f"- {line}" for line in replaced] + [f"+ {line}" for line in added])


def _heading(found: re.Match[str]) -> str:
    text = found.group("text").strip()
    level = len(found.group("level"))
    if level > 2 or not text:
        return text
    return f"{text}\n{('=' if level == 1 else '-') * len(text)}"


def _link(found: re.Match[str]) -> str:
    text, url = found.group("text").strip(), found.group("url")
    return url if text in (url, "") else f"{text} ({url})"


def _prose(text: str) -> str:
    """Markup of prose as its text; the code in it is held apart by the caller."""
    text = _BREAK.sub("\n", text)
    text = _SUMMARY.sub(lambda found: f"{found.group(1).strip()}:", text)
    text = _TAGS.sub("", text)
    text = _HEADING.sub(_heading, text)
    text = _IMAGE.sub(lambda found: f"image: {_link(found)}", text)
    text = _LINK.sub(_link, text)
    text = _AUTOLINK.sub(lambda found: found.group("url"), text)
    for style in (_STRONG, _EMPHASIS):
        text = style.sub(lambda found: found.group("text") or found.group("under") or "", text)
    return html.unescape(text)


def as_text(markdown: str, replaced: Sequence[str] = ()) -> str:
    """`markdown` for a terminal; `replaced` are the head's lines a suggestion in it would replace."""
    code: list[str] = []

    def hold(piece: str) -> str:
        code.append(piece)
        return f"{_CODE}{len(code) - 1}{_CODE}"

    text = _COMMENT.sub("", markdown)
    text = _SUGGESTION.sub(lambda found: hold(suggestion_diff(found.group("body"), replaced)), text)
    text = _FENCED.sub(
        lambda found: hold(
            "\n".join(f"    {line}" if line else "" for line in found.group("body").split("\n"))
        ),
        text,
    )
    text = _INLINE_CODE.sub(lambda found: hold(found.group("code").strip(" ") or found.group("code")), text)
    text = _ESCAPE.sub(lambda found: hold(found.group("char")), text)  # `\*` is a star, never markup
    shown = _prose(text)
    shown = re.sub(f"{_CODE}(\\d+){_CODE}", lambda found: code[int(found.group(1))], shown)
    lines = [line.rstrip() for line in shown.split("\n")]
    return _BLANK_RUNS.sub("\n\n", "\n".join(lines)).strip("\n")
