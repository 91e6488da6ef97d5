"""The review benchmark's judge: does a finding's claim state the case's bug?

Issue 30 found that a finding on the gold line is not a finding of the bug: in 45 reviews of real
bugs, every "hit" on a changed line described or praised the change ("a minor improvement"). So a
hit needs two things: the finding is on a gold line (review_eval_cases.hits), and its claim states
the bug, which this module decides.

The judge is a keyword rubric, not a model. Each case lists the concepts a statement of its bug
must mention (the wrong token or the missing check, and what goes wrong), each concept as a few
regular expressions that say the same thing. A claim states the bug when it mentions every concept
and is neither praise, a description of the change, nor one of the case's known ways of having the
bug backwards (`Rubric.backwards`). Why not a model as judge: the only model this machine can run
is the 1.5B model under test, which would grade its own answers and is no more reliable a judge
than a reviewer; a rubric is deterministic, runs with no model and no network, gives the same
verdict on every machine, and its misses can be read and fixed in the data file. Its agreement with a person's
reading is measured on recorded findings (bench/data/real_bugs/judge_check.json,
`review_eval.py --check-judge`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Words of approval: a claim that only approves states no bug, whatever tokens it repeats.
_PRAISE = re.compile(
    r"\b(improv\w*|optimi[sz]\w*|cleaner|simplif\w*|looks? (good|fine|correct)|lgtm|nice|better|"
    r"good (change|practice|job)|well done|correctly|more robust|more efficient|more readable|"
    r"enhance\w*|concise|easier to (read|understand|follow|maintain)|"
    r"no (issues?|problems?|bugs?)( found)?)\b",
    re.IGNORECASE,
)
# Words that say something is wrong; one of them turns approval words back into a possible finding
# ("this is not handled correctly", "better to check for nil").
_PROBLEM = re.compile(
    r"\b(bug\w*|wrong\w*|incorrect\w*|error\w*|fail\w*|crash\w*|panic\w*|missing|miss\w*|should\w*|"
    r"must|never|instead|leak\w*|race\w*|break\w*|broke\w*|throw\w*|exception\w*|overflow\w*|"
    r"underflow\w*|undefined|inject\w*|unsafe|unsound|invalid\w*|lost|lose\w*|drop\w*|ignor\w*|"
    r"forgot\w*|without|not|no longer|doesn'?t|does not|isn'?t|won'?t|cannot|can'?t|problem\w*|"
    r"issue\w*|risk\w*|vulnerab\w*|off[- ]by[- ]one|out of (range|bounds)|typo\w*|mistak\w*|"
    r"regress\w*|unintended|accidental\w*|inverted|reversed|swapped)\b",
    re.IGNORECASE,
)

# The opening of a claim that tells what the change does: "The function now ...", "This change adds".
_DESCRIBES = re.compile(
    r"^\W*(?:the|this)\s+(?:[\w`.()]+\s+){0,4}?(?:now|adds?|added|introduces?|changes?|updates?)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Rubric:
    """What the bug is: `bug`, a sentence for people; `concepts`, what a claim must mention, each
    a tuple of regular expressions (case-insensitive) any one of which mentions it; `backwards`,
    regular expressions for claims that have the bug the wrong way round.

    Keywords cannot read direction: a small model names the right tokens and asks for the bug
    ("It should be `obj.hasOwnProperty(key)`"), calls the fix wrong ("the `type(s)` check is
    incorrect"), or takes the fix for the new code ("uses `Math.floor(maxAge)` instead of
    `maxAge`"). Such a claim mentions every concept; read by a person it is a miss, and in the runs
    of 2026-12-02 it was half of what the judge accepted. A case lists the backwards forms a
    reader has seen (or can foresee from its tokens), and a claim that matches one states no bug."""

    bug: str
    concepts: tuple[tuple[str, ...], ...]
    backwards: tuple[str, ...] = ()

    @classmethod
    def from_json(cls, data: dict[str, object]) -> Rubric:
        concepts = data.get("concepts")
        if not isinstance(concepts, list) or not concepts:
            raise ValueError("a rubric needs a non-empty list of concepts")
        backwards = data.get("backwards", [])
        if not isinstance(backwards, list):
            raise ValueError("a rubric's backwards forms are a list")
        return cls(
            str(data["bug"]),
            tuple(tuple(str(term) for term in concept) for concept in concepts),
            tuple(str(form) for form in backwards),
        )

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"bug": self.bug, "concepts": [list(c) for c in self.concepts]}
        if self.backwards:
            out["backwards"] = list(self.backwards)
        return out


def praises(claim: str) -> bool:
    """Whether the claim approves of the change without saying anything is wrong."""
    return bool(_PRAISE.search(claim)) and not _PROBLEM.search(claim)


def missing_concepts(claim: str, rubric: Rubric) -> list[int]:
    """The indexes of the rubric's concepts the claim does not mention."""
    return [
        i
        for i, terms in enumerate(rubric.concepts)
        if not any(re.search(term, claim, re.IGNORECASE) for term in terms)
    ]


def states_bug(claim: str, rubric: Rubric | None) -> bool:
    """The judge's verdict: the claim mentions every concept of the rubric, and is neither praise, a
    description of the change, nor the bug backwards: one that names the right tokens ("The
    function now returns the nickname if it exists") says nothing is wrong, so it states no bug. A
    case without a rubric (a clean change) has no bug to state."""
    if rubric is None or not claim.strip() or describes(claim) or reverses(claim, rubric):
        return False
    return not praises(claim) and not missing_concepts(claim, rubric)


def reverses(claim: str, rubric: Rubric) -> bool:
    """Whether the claim has the bug the wrong way round, by one of the rubric's backwards forms."""
    return any(re.search(form, claim, re.IGNORECASE) for form in rubric.backwards)


def describes(claim: str) -> bool:
    """Whether the claim only tells what the change does ("The function now returns ..."), with no
    word that says something is wrong."""
    return bool(_DESCRIBES.match(claim)) and not _PROBLEM.search(claim)
