"""Claims that name no problem (issue 30): a finding that describes or praises the change is not posted.

Read issue 30's benchmark run: a small model asked for bugs answers, on the very line of the bug,
"The function now correctly handles quoted values", "a data race called an optimisation", "This is a
minor improvement". On a two-line change any comment lands within three lines of the bug, so such a
comment looks like a hit and reads, to the maintainer, as the bot calling the bug fine. The
verification pass does not catch it either: the same small model confirms its own praise. So every
posted finding must name a problem, in words a reviewer uses for one.

The rule reads English only, and errs towards posting:

- a claim with a word for a defect (`wrong`, `missing`, `raises`, `off by one`, `should`, ...), a
  request for a change (a sentence that starts `Use`, `Add`, `Check`, ...) or a question names a
  problem, unless
  the only defect words sit in a clause that says the change *prevents* or *fixes* them;
- praise denied ("is not incremented correctly") names a problem;
- a claim that praises (`improves`, `correctly`, `more efficient`, `cleaner`, `easier to read`) and
  names no defect does not;
- an error named as a value ("the error message is added") is not a word for a defect, and a
  claim that is only a line of code names nothing;
- a claim with no word for a problem that reads as a description ("The function now returns ...",
  "The Vary header is set to ...", "Uses X to ...") is not posted; any other (a terse "returns one
  less than the total", a claim in another language) is given the benefit of the doubt.

Each finding dropped this way is counted in the review's footer, so nothing is dropped silently.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

# An error named as a value the code produces (its message, its code), not as something that goes
# wrong: "The error message for the required field is added" describes the change.
_ERROR_VALUE = re.compile(
    r"\berror (?:messages?|strings?|texts?|codes?)\b|\bindicat\w* (?:an? |the )?error\b", re.I
)
# A claim that is only a line of code ("return null;") says nothing about it.
_CODE_ONLY = re.compile(r"^[^.?!]*[;{}]$")
# A clause that says what the change guards against: its defect words are not a claim of a defect.
_BENEFIT = re.compile(
    r"\b(?:prevent\w*|avoid\w*|ensur\w*|fix\w*|guard\w* against|protect\w* against|"
    r"(?:correctly|properly|now|safely) (?:handl\w*|check\w*|deal\w* with|catch\w*|reject\w*))\b[^.;:]*",
    re.IGNORECASE,
)
_DEFECT = re.compile(
    r"\b(?:bugs?|buggy|wrong\w*|incorrect\w*|missing|misses|typo\w*|misspel\w*|fail\w*|panic\w*|"
    r"crash\w*|rais(?:e|es|ing)|throw\w*|exceptions?|leak\w*|races?|racy|deadlock\w*|overflow\w*|"
    r"underflow\w*|off[- ]by[- ]one|undefined|unchecked|unsafe|insecure|vulnerab\w*|injection|never|"
    r"no longer|mismatch\w*|discard\w*|overwrit\w*|lost|los(?:e|es|ing)|breaks?|broken|regress\w*|"
    r"should(?:n't)?|must|cannot|can't|won't|redundant|unnecessar\w*|unused|deprecated|risk\w*|"
    r"problem\w*|issues?|errors?|ignor\w*|skip\w*|forg[eo]t\w*|fool\w*|stale|truncat\w*|infinite|"
    r"hang\w*|unreachable|dead code|shadow\w*|out of (?:bounds|range)|twice|double[sd]?|"
    r"one (?:less|more|fewer)|too (?:many|few|much|little|early|late|soon))\b",
    re.IGNORECASE,
)
# Words that hedge or contrast: a problem when nothing praises, nothing when something does.
_WEAK = re.compile(r"\b(?:not|may|might|could|instead|only|consider|but|however|although)\b|n't\b", re.I)
_PRAISE = re.compile(
    r"\b(?:improv\w*|optimi[sz]\w*|efficien\w*|readab\w*|simpl(?:er|ifie[sd]|ify|ified)|cleaner|"
    r"idiomatic|correct(?:ly)?|proper(?:ly)?|nice\w*|good|great|better|saves?|secure|robust\w*|"
    r"elegant|consistent(?:ly)?|faster|right|clear(?:er)?|well|concise|"
    r"easier to (?:read|understand|follow|maintain))\b",
    re.IGNORECASE,
)
# Praise denied ("is not incremented correctly", "does not properly close", "is not documented or
# used correctly"): a defect.
_DENIED_PRAISE = re.compile(
    r"(?:\b(?:not|never)|n't)\s+(?:\w+\s+){0,3}"
    r"(?:correct(?:ly)?|proper(?:ly)?|right|secure|consistent(?:ly)?)\b",
    re.IGNORECASE,
)
_REQUEST = re.compile(
    r"(?:^|[.;:!]\s+|\s-\s)(?:please\s+)?(?:use|add|remove|replace|consider|check|handle|call|"
    r"return|move|rename|make|do not|don't|avoid|guard|validate|close|await|wrap|pass|initiali[sz]e|"
    r"swap|revert|restore|keep)\b",
    re.IGNORECASE,
)
# What a description of the change says: what it now does, what is set or added, what it uses.
_DESCRIBES = re.compile(
    r"^(?:the|this|it|that) (?:(?:\w+|`[^`]*`) ){0,3}now\b|"
    r"^(?:the|this|it|that) (?:\w+ )?(?:`[^`]*` )?(?:returns|calls|checks|pads|computes)\b|"
    r"\b(?:has|have) been (?:modified|changed|updated|added|removed|renamed|moved|refactored)\b|"
    r"\bnow (?:correctly|properly|also)\b|"
    r"\b(?:this|the) (?:change|pr|pull request|commit|patch|diff|update)\b|"
    r"^(?:it |this )?(?:adds|uses|sets|removes|moves|renames|updates|introduces|changes|appends|"
    r"replaces|refactors|implements)\b|"
    r"\b(?:is|are|gets|get) (?:now )?(?:set|appended|added|created|initiali[sz]ed|moved|renamed|"
    r"updated|called|used|stored|assigned|returned|passed|computed|calculated)\b",
    re.IGNORECASE,
)


def names_a_problem(claim: str) -> bool:
    """Whether a finding's claim says something is wrong (or asks for a change), rather than only
    describing or praising what the change does."""
    text = " ".join(claim.split())
    if not text or _CODE_ONLY.match(text):
        return False
    bare = _ERROR_VALUE.sub(" ", _BENEFIT.sub(" ", text))
    if _DENIED_PRAISE.search(text) or text.endswith("?"):
        return True  # a question to the author ("intended?") asks for a check too
    if _DEFECT.search(bare) or _REQUEST.search(bare):
        return True
    if _PRAISE.search(text):
        return False
    if _WEAK.search(bare):
        return True
    # A value (`None`, empty, zero) is as often what a description says the change returns ("The
    # function now returns null when the name is valid") as the problem; so it does not count, and
    # a terse claim ("returns one less", "`x` can be None") is given the benefit of the doubt.
    return not _DESCRIBES.search(text)


@dataclass
class Described:
    """What the rule kept of a review's comments, and how many it dropped."""

    kept: list[dict[str, Any]] = field(default_factory=list)
    dropped: int = 0

    def footer(self) -> str:
        n = self.dropped
        return (
            f"{n} comment{'s' if n != 1 else ''} only described or praised the change without "
            "naming a problem: not posted."
        )


def problem_claims(comments: Sequence[dict[str, Any]]) -> Described:
    """The comments whose claim (the model's `finding`, without its suggestion) names a problem."""
    out = Described()
    for comment in comments:
        claim = comment.get("finding", comment.get("body", ""))
        if isinstance(claim, str) and not names_a_problem(claim):
            out.dropped += 1
        else:
            out.kept.append(comment)
    return out
