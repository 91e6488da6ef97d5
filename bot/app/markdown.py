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

Every other text from outside that the bot posts as Markdown (a model's answer, a review and its
inline comments, a thread reply, a quoted error) goes through `untrusted(text)`, and the helpers above
call it too. The bot keeps its own state in hidden HTML comments (`<!-- beam-effect:… -->`,
`<!-- beam-finding:… -->`, `<!-- beam-review-summary -->`, …) and finds its comments by them, so a
`<!--` from outside would both hide text from the people reading the comment and forge the bot's
state (issue 40). `untrusted` leaves no `<!` that opens anything in the raw text: in prose it is
written `&lt;!`, which GitHub shows as `<!` exactly; inside code (a span or a fence, where an entity
shows as typed) it is written `<! ` with a space after the `!`, which shows and never opens a comment.
Neither spelling holds `<!--`, so no marker reader can parse either, however the text is later placed.
"""

from __future__ import annotations

import html as _html
import re

from bot.beam.unsafe_text import UNSAFE, UNSAFE_IN_LINES, escape_char

_BACKTICKS = re.compile(r"`+")
# `<!`, the start of every HTML comment and declaration, also with characters between that GitHub
# may drop on the way (NUL, other controls, zero-width characters) and so join up again.
_HIDDEN = "\x00-\x1f\x7f\u200b-\u200f\u2060\ufeff"
_OPENER = re.compile(f"<([{_HIDDEN}]*)!")
_OPENER_IN_CODE = re.compile(f"<([{_HIDDEN}]*)!(?! )")  # `<! ` is already the code spelling
# A line that opens or closes a fenced code block (CommonMark: up to three spaces, three or more
# backticks or tildes); and an inline code span, a backtick run closed by one of the same length.
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_SPAN = re.compile(r"(?<!`)(`+)(?!`).+?(?<!`)\1(?!`)", re.DOTALL)


def _unopened_in_code(text: str) -> str:
    return _OPENER_IN_CODE.sub(lambda m: f"<{m.group(1)}! ", text)


def _unopened_in_prose(text: str) -> str:
    """Prose with every `<!` written `&lt;!`, its code spans with the code spelling."""
    out: list[str] = []
    at = 0
    for span in _SPAN.finditer(text):
        out.append(_OPENER.sub(lambda m: f"&lt;{m.group(1)}!", text[at : span.start()]))
        out.append(_unopened_in_code(span.group(0)))
        at = span.end()
    out.append(_OPENER.sub(lambda m: f"&lt;{m.group(1)}!", text[at:]))
    return "".join(out)


def untrusted(text: str, *, code: bool = False) -> str:
    """`text` from a model, a pull request or a commenter, safe to post: no HTML comment in it hides
    anything, and none can be read back as one of the bot's markers (issue 40).

    `code=True` is for text the caller shows as code (a span, a fenced block): there `<!` becomes
    `<! `. Otherwise `text` is Markdown: `<!` becomes `&lt;!` (shown as `<!`) in its prose and `<! `
    inside its fenced blocks and code spans. Telling prose from code is a reading of CommonMark that
    may differ from GitHub's on odd input; either spelling is safe wherever it lands, and a misreading
    only shows `&lt;!` or `<! ` where `<!` was. Idempotent: what it returns holds no `<!` but `<! `."""
    if "!" not in text or "<" not in text:
        return text
    if code:
        return _unopened_in_code(text)
    out: list[str] = []
    prose: list[str] = []
    fence: str | None = None
    for line in text.split("\n"):
        opener = _FENCE.match(line)
        if fence is None and opener and not (opener.group(1)[0] == "`" and "`" in line[opener.end() :]):
            if prose:
                out.append(_unopened_in_prose("\n".join(prose)))
            prose = []
            fence = opener.group(1)
            out.append(_unopened_in_code(line))
        elif fence is not None:
            close = _FENCE.match(line)
            if close and close.group(1)[0] == fence[0] and len(close.group(1)) >= len(fence):
                fence = fence if line[close.end() :].strip() else None
            out.append(_unopened_in_code(line))
        else:
            prose.append(line)
    if prose:
        out.append(_unopened_in_prose("\n".join(prose)))
    return "\n".join(out)


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
    """An inline code span that shows `text` exactly (but a `<!`, as `untrusted` writes it in code),
    and renders nothing in it."""
    shown = untrusted(visible(text), code=True) or '""'
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
    """Text for inside a fenced block: control and bidi characters escaped, newlines and tabs kept,
    no HTML comment opened (`untrusted`)."""
    return untrusted(UNSAFE_IN_LINES.sub(_escaped, text.replace("\r\n", "\n")), code=True)


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
