"""Votes (issue 30): a review run several times, with the hunks in a different order each time, keeps
the findings a majority of its passes reported.

A small model's findings change with the order it reads the change in and with sampling; a real bug
tends to come back, a guess tends not to. Cursor's Bugbot ran eight shuffled passes and kept what a
majority found; SWR-Bench measured up to +44% F1 from aggregating reviews. Two findings are the
same when they are on the same file, within `NEAR` lines, and say the same thing once normalised:
the same words, or mostly the same words (a pass rarely repeats a sentence word for word, even at a
low temperature).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from bot.app.context.diff_context import normalised_claim

NEAR = 3  # lines apart that still count as the same place
SAME_WORDS = 0.5  # share of the two claims' words in common (Jaccard) that counts as the same claim
_STOP = frozenset(
    {"the", "an", "is", "are", "was", "were", "be", "been", "this", "that", "these", "those", "its"}
    | {"of", "to", "in", "on", "at", "for", "with", "and", "or", "but", "not", "no", "should", "would"}
    | {"could", "will", "can", "may", "might", "here", "there", "line", "code", "which", "when", "than"}
    | {"then", "it", "a"}
)


def claim_words(text: str) -> frozenset[str]:
    """The words that carry a claim: lower-cased, without the words every claim has."""
    return frozenset(w for w in re.findall(r"[a-z0-9_]+", text.lower()) if len(w) > 2 and w not in _STOP)


def same_claim(a: str, b: str) -> bool:
    if normalised_claim(a) == normalised_claim(b):
        return True
    left, right = claim_words(a), claim_words(b)
    if not left or not right:
        return False
    return len(left & right) / len(left | right) >= SAME_WORDS


def claim_of(comment: dict[str, Any]) -> str:
    """A posted comment's claim: the model's words (`finding`), without the suggestion block."""
    return str(comment.get("finding", comment.get("body", "")))


def same_place(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return a.get("path") == b.get("path") and abs(int(a["line"]) - int(b["line"])) <= NEAR


def same_finding(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return same_place(a, b) and same_claim(claim_of(a), claim_of(b))


@dataclass
class Tally:
    """The findings a majority of the passes reported (each once, as the earliest pass wrote it), and
    how many distinct findings fewer passes reported."""

    passes: int
    kept: list[dict[str, Any]] = field(default_factory=list)
    fewer: int = 0

    def line(self, planned: int) -> str:
        """The review body's line: what the vote was, and what it left out."""
        ran = f"{self.passes} of {planned}" if self.passes != planned else str(planned)
        found = len(self.kept)
        return (
            f"{ran} review passes: {found} finding{'s' if found != 1 else ''} reported by a majority"
            f"{f'; {self.fewer} reported by fewer, not posted' if self.fewer else ''}."
        )


def majority(votes: Sequence[Sequence[dict[str, Any]]]) -> Tally:
    """Each distinct finding with the passes that reported it; kept when more than half did. A pass
    counts once per finding, however many times it repeated it."""
    clusters: list[tuple[dict[str, Any], set[int]]] = []
    for index, found in enumerate(votes):
        for comment in found:
            match = next((c for c in clusters if same_finding(c[0], comment)), None)
            if match is None:
                clusters.append((comment, {index}))
            else:
                match[1].add(index)
    needed = len(votes) // 2 + 1
    tally = Tally(len(votes))
    for comment, voters in clusters:
        if len(voters) >= needed:
            tally.kept.append(comment)
        else:
            tally.fewer += 1
    return tally


def distinct(comments: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each finding once, as first written: a repeat is the same claim, once normalised, on the same
    file within `NEAR` lines. One answer of the 1.5B model posted one claim on three lines in a row
    of a clean change, and the calls of a chunked review may repeat each other. Stricter than a
    vote's `same_finding`, whose mostly-the-same words would make "f2 subtracts" and "f3 subtracts
    now" one finding: within one review, two wordings are two findings."""
    kept: list[dict[str, Any]] = []
    for comment in comments:
        if not any(_repeats(earlier, comment) for earlier in kept):
            kept.append(comment)
    return kept


def _repeats(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return same_place(a, b) and normalised_claim(claim_of(a)) == normalised_claim(claim_of(b))
