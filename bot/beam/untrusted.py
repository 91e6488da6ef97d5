"""Untrusted text as a model receives it: one fenced block, labelled as data (security invariant 7).

Everything written by others (a pull request's title, body, files and diff; a fact an earlier run
remembered) reaches the model inside such a block, after words that say it is data. The fence is
longer than any run of backticks inside, so the text cannot close it and write outside it.
"""

from __future__ import annotations

import re

_BACKTICKS = re.compile(r"`+")


def fence_for(text: str) -> str:
    """A fence longer than any backtick run inside `text` (at least four backticks)."""
    longest = max((len(run) for run in _BACKTICKS.findall(text)), default=0)
    return "`" * max(4, longest + 1)


def fenced(text: str) -> str:
    """`text` in one block labelled `untrusted`, which the text cannot close."""
    fence = fence_for(text)
    return f"{fence}untrusted\n{text}\n{fence}"
