"""How a review pass ends and says so (issue 29): the three ends (`PassEnd.kind`), and the lines a
partial or unreviewed pass carries, written once here for every path that runs a pass
(reviews/review_pass.py): `/beam review`, automatic reviews, `beam-bot run review` and
`beam-bot review <URL>`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

from bot.app.context.diff_context import OVERFLOW_CODE as OVERFLOW_CODE  # BEM-092, for every skill
from bot.app.context.diff_context import DiffCut
from bot.app.runs import render
from bot.app.runs.usage import Stop
from bot.beam.errors import CATALOG
from bot.beam.types import AgentResult

PassKind = Literal["reviewed", "partial", "not_reviewed"]
PostedWith = Literal["review_change", "structured", "json", "text"]

NO_ANSWER_CODE = "BEM-095"  # the model's answers held no review at all
CAPPED_CODE = "BEM-096"  # a per-run cap stopped the review before any call answered
# Where a call's answer fell back to plain text (the runner's `answered_in_text`), its code leads.
_WHY_CODE = re.compile(r"^(BEM-\d{3})")
_CONTEXT_SIZE = re.compile(
    r"(?:context(?: length| size| window)?|n_ctx|max_model_len)\D{0,40}?(\d{3,7})\s*(?:tokens)?", re.I
)


@dataclass
class PassEnd:
    """How a review pass ended, for its caller to say (tracking comment, summary, check run, exit)."""

    kind: PassKind
    code: str | None = None  # not reviewed: why, as a BEM code
    detail: str | None = None  # not reviewed: the code's detail (what the model or server did)
    reason: str = ""  # not reviewed: the catalogue's sentence and what to do; partial: the line
    result: AgentResult | None = None  # the last call's result
    posted_with: PostedWith | None = None
    review_id: int | None = None
    stop: Stop | None = None
    files_read: int = 0
    files_total: int = 0
    truncated: list[str] = field(default_factory=list)
    reported: list[dict[str, Any]] = field(default_factory=list)  # every comment, before screening
    cut: DiffCut | None = None
    answered_in_text: str | None = None  # why the model was asked for plain text, when it was
    collected: tuple[str, list[dict[str, Any]]] | None = None  # a vote's review, not posted yet
    held: list[dict[str, Any]] = field(default_factory=list)  # dropped by verification, with its answer

    @property
    def answer(self) -> str:
        return self.result.text if self.result is not None else ""

    @property
    def posted(self) -> bool:
        return self.kind != "not_reviewed"


def cap_words(stop: Stop) -> str:
    if stop.by is not None:
        return f"a cancel by @{stop.by}"
    assert stop.limit is not None
    return render.limit_words(stop.limit, stop.value)


def files_read(call_files: list[list[str]], answered: set[int]) -> int:
    """The files every call of which answered: a file whose hunks were split across calls
    (context/review_context.py, "per hunk") is not read while one of its calls is not."""
    unread = {name for i, names in enumerate(call_files) if i not in answered for name in names}
    return len({name for names in call_files for name in names} - unread)


def partial_line(by: str, read: int, total: int) -> str:
    """The line a partial review's body carries, the same on every path."""
    return f"**partial:** stopped by {by} after {read} of {total} file{'s' if total != 1 else ''}."


def not_reviewed_reason(code: str, detail: str | None = None) -> str:
    """The catalogue's sentence for why no review was posted, with what to do about it."""
    entry = CATALOG[code]
    return render.beam_failure(entry.message, detail, entry.hint)


def context_size(detail: str) -> int | None:
    """The context size a server's overflow error named, if it named one."""
    match = _CONTEXT_SIZE.search(detail)
    return int(match.group(1)) if match else None


def unchecked_line(stop: Stop) -> str:
    return f"**partial:** stopped by {cap_words(stop)} before every finding was checked."


def code_words(why: str | None) -> str:
    """A call that never answered, in the words a partial line uses."""
    code = _WHY_CODE.match(why or "")
    return f"{code.group(1)} (a call gave no answer)" if code else f"{NO_ANSWER_CODE} (a call gave no answer)"


def not_reviewed(end: PassEnd, why: str | None) -> PassEnd:
    """The pass answered nothing: its end, with the BEM code and the catalogue's sentence."""
    end.kind = "not_reviewed"
    if end.stop is not None:
        end.code = CAPPED_CODE
        end.detail = f"stopped by {cap_words(end.stop)}"
        end.reason = not_reviewed_reason(CAPPED_CODE, end.detail)
        return end
    match = _WHY_CODE.match(why or "")
    code = match.group(1) if match and match.group(1) in CATALOG else NO_ANSWER_CODE
    detail = (why or "")[len(code) :].lstrip(": ") or None if match else None
    end.code, end.detail = code, detail
    end.reason = not_reviewed_reason(code, detail)
    return end
