"""Committable suggestions: whether a `suggestion` replacing lines `start..end` of the new file can be
offered as GitHub's ```suggestion block, decided without I/O.

GitHub applies a suggestion by replacing exactly the commented lines (`start_line..line`, new side)
with the block's text. The bot offers one only when every one of those lines is in the diff (GitHub
refuses a comment elsewhere), they exist in the file at the head, and the block changes them; any
other suggestion is shown as plain text, so a reader never gets a button that does the wrong thing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SuggestionCheck:
    applies: bool
    reason: str = ""  # why not, for the plain-text fallback


def check_suggestion(
    lines: list[str] | None, start: int, end: int, text: str, in_diff: Callable[[int], bool]
) -> SuggestionCheck:
    """`lines`: the file at the head (None if unreadable); `in_diff(n)`: line n is commentable."""
    if start < 1 or end < start:
        return SuggestionCheck(False, f"lines {start}..{end} are not a range")
    if lines is None:
        return SuggestionCheck(False, "the file could not be read at the head commit")
    if end > len(lines):
        return SuggestionCheck(False, f"the file has {len(lines)} lines, not {end}")
    missing = [n for n in range(start, end + 1) if not in_diff(n)]
    if missing:
        return SuggestionCheck(False, f"line {missing[0]} is not part of the diff")
    if "\r" in text:
        return SuggestionCheck(False, "it contains a carriage return")
    if apply_suggestion(lines, start, end, text) == lines:
        return SuggestionCheck(False, "it would not change the lines")
    return SuggestionCheck(True)


def suggestion_lines(text: str) -> list[str]:
    """The replacement lines of a block (one trailing newline is the block's own end)."""
    body = text[:-1] if text.endswith("\n") else text
    return body.split("\n") if body else []


def apply_suggestion(lines: list[str], start: int, end: int, text: str) -> list[str]:
    """The file after GitHub applied the block (1-based, inclusive range)."""
    return [*lines[: start - 1], *suggestion_lines(text), *lines[end:]]
