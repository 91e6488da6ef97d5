"""Untrusted text in GitHub Markdown: the one escaping helper every comment renderer uses.

Paths, commit subjects, author names, check names and check output come from the model or the
repository. Pasted raw into a comment, a file name with a newline draws a fake `**Checks** … all
checks passed` line, `<img>` renders, `#` makes a heading, `@team` pings a team, a bidi override
reorders what a maintainer reads. So every such value is shown one of two ways:

- `code(text)`: an inline code span (no Markdown, HTML or mention renders inside one), with every
  control and bidi character written as an escape and the whole value quoted when it had any, as
  git quotes such paths (`"a\\nb"`); a value that starts with a quote is quoted too, so a quoted
  form is never ambiguous. Inside a table, `|` is escaped, since GitHub splits cells on it even
  inside code spans.
- `fenced(text)`: a fenced block whose fence is longer than any backtick run inside, with control
  and bidi characters (but newlines and tabs) escaped.

`html(text)` is for the few places inside HTML tags (`<summary>`). The characters themselves are
defined once, in `bot.beam.unsafe_text`, which the sandbox's write tools refuse in a path.
"""

from __future__ import annotations

import html as _html
import re

from bot.beam.unsafe_text import UNSAFE, UNSAFE_IN_LINES, escape_char

_BACKTICKS = re.compile(r"`+")


def _escaped(match: re.Match[str]) -> str:
    return escape_char(match.group(0))


def visible(text: str) -> str:
    """`text` with nothing hidden: unchanged when it holds no control or bidi character (and does
    not start with `"`); otherwise quoted, with `\\` and `"` escaped and every such character written
    as `\\n`, `\\x1b`, `\\u202e`."""
    if not UNSAFE.search(text) and not text.startswith('"'):
        return text
    inner = text.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + UNSAFE.sub(_escaped, inner) + '"'


def one_line(text: str, limit: int = 120) -> str:
    """The first line of a message (a commit subject), cut at `limit` characters with an ellipsis."""
    first = text.strip().split("\n", 1)[0].strip() if text.strip() else ""
    return first if len(first) <= limit else first[: limit - 1] + "…"


def code(text: str, *, table: bool = False) -> str:
    """An inline code span that shows `text` exactly, and renders nothing in it."""
    shown = visible(text) or '""'
    longest = max((len(run) for run in _BACKTICKS.findall(shown)), default=0)
    ticks = "`" * (longest + 1)
    if shown.startswith("`") or shown.endswith("`") or (shown[0] == " " and shown[-1] == " "):
        shown = f" {shown} "
    if table:
        shown = shown.replace("|", "\\|")
    return f"{ticks}{shown}{ticks}"


def fence_for(text: str) -> str:
    """A backtick fence longer than any backtick run in `text` (at least three)."""
    longest = max((len(run) for run in _BACKTICKS.findall(text)), default=0)
    return "`" * max(3, longest + 1)


def block_text(text: str) -> str:
    """Text for inside a fenced block: control and bidi characters escaped, newlines and tabs kept."""
    return UNSAFE_IN_LINES.sub(_escaped, text.replace("\r\n", "\n"))


def fenced(text: str, info: str = "") -> str:
    """A fenced code block that shows `text` and that nothing in `text` can close."""
    body = block_text(text).rstrip("\n")
    fence = fence_for(body)
    return f"{fence}{info}\n{body}\n{fence}"


def inline(text: str) -> str:
    """`text` inside a sentence of the bot's own (an error's detail): one line, nothing hidden, no HTML.

    Prefer `code`; this is for words that read as prose, where a value sits among the bot's words."""
    return _html.escape(visible(text), quote=False)


def html(text: str) -> str:
    """`text` for inside an HTML element of a comment: visible, then HTML-escaped."""
    return _html.escape(visible(text), quote=True)
