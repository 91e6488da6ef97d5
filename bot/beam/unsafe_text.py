"""Characters that make a path, a commit subject or a line of output lie about what it is.

A file name with a newline can draw a fake line in a comment (`**Checks** … all 3 checks passed`);
the Unicode bidirectional overrides and isolates reorder what a reader sees ("Trojan Source",
CVE-2021-42574). The framework refuses to write such a path (`WorkingTree.write_file`, BEM-346), and
the app shows one, wherever it shows it, through `bot.app.markdown`, which escapes exactly these.
One definition serves both, so what is refused and what is escaped can never drift apart.
"""

from __future__ import annotations

import re

# C0 controls (newline, CR, NUL, ESC, ...), DEL, C1 controls; the bidi marks, embeddings, overrides
# and isolates (U+061C, U+200E, U+200F, U+202A-U+202E, U+2066-U+2069); the Unicode line and
# paragraph separators, which some renderers break lines at.
_BIDI_AND_C1 = r"\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
UNSAFE = re.compile(rf"[\x00-\x1f{_BIDI_AND_C1}]")
# The same, but newline and tab, for text shown as lines (a fenced block of output or of a diff).
UNSAFE_IN_LINES = re.compile(rf"[\x00-\x08\x0b-\x1f{_BIDI_AND_C1}]")


def first_unsafe(text: str) -> str | None:
    """The first character of `text` that must not appear in a path the bot writes, or None."""
    match = UNSAFE.search(text)
    return match.group(0) if match else None


def escape_char(char: str) -> str:
    """One unsafe character as a visible escape: `\\n`, `\\r`, `\\t`, `\\x00`, `\\u202e`."""
    named = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
    if char in named:
        return named[char]
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
