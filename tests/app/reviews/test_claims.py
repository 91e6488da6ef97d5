"""The rule that keeps a finding only when its claim names a problem (reviews/claims.py).

The praising claims are ones Qwen2.5-Coder-1.5B wrote on the very line of a real bug in issue 30's
benchmark run; the claims that state a bug are the judge check's reference claims
(bench/data/real_bugs/judge_check.json), so the rule is tried on what models and reviewers write.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.app.reviews.claims import names_a_problem, problem_claims

JUDGE_CHECK = Path(__file__).resolve().parents[3] / "bench" / "data" / "real_bugs" / "judge_check.json"

PRAISE_OR_DESCRIPTION = [
    # issue 30's run of 2026-12-03, on pflag_zero_value's gold line: the bug, praised
    "The switch statement was used to check the value of `f.DefValue`, but it is now replaced with a "
    "direct comparison with `f.Value.String()`, which is more concise and easier to read.",
    "The function now correctly handles quoted values in cookies, which was previously not handled.",
    "The method now checks the type of the output value before unmarshaling the flag's value, which "
    "prevents a panic if the type does not match.",
    "If there are no header routes, it calls the next handler. This is a minor improvement.",
    "count now uses len(), an optimisation.",
    "The Vary header is set to Accept-Encoding when compressing.",
    "Uses issupserset to compare the excluded sets.",
    "The check that the value fits in len_ bits looks correct.",
    "Good catch.",
    # What the model wrote on a clean change: a value named, as what the change now returns.
    "The function now returns 'required' when the username is empty.",
    "The function now returns null when the username is valid.",
    # From the run of 2026-12-02 11:13 on the clean changes: an error named as a value, what the
    # file went through, what a function returns, and a bare line of code.
    "The error message for the required field is added.",
    "The function now returns a string indicating the error if the username is invalid.",
    "The file has been modified, so the review is based on the new version.",
    "The function returns `null` when the username is valid.",
    "return null;",
    # A few words between the subject and "now": still what the change now does.
    "The `tolit` loop bound now stops at len_.",
    "The call to `next.ServeHTTP` now happens once per request.",
    "The method now checks if the new length of the key is greater than the current length. This "
    "ensures that the capacity is increased only when necessary, preventing unnecessary allocation.",
]
PROBLEMS = [
    "returns one less than the total",
    "`name` can be None here",
    "Missing return after next.ServeHTTP: with no routes the handler serves the request twice.",
    "s.__class__ is str is fooled by proxy objects; use type(s).",
    "With a * modifier the group (pattern)* captures only the last repetition.",
    "The != operator returns value.Num == rpvn, so not-equal queries match equal values.",
    "Consider a test for negative numbers.",
    # Praise denied: the model's claim on chi_readfrom_double_count's gold line, 2026-12-02.
    "The `basicWriter.bytes` counter is not incremented correctly when using the `tee` writer.",
    "The function does not correctly handle quoted values.",
    "The header isn't set properly for HEAD requests.",
    # Three words between the denial and the praise: Qwen2.5-Coder-0.5B on markupsafe_class_check,
    # 2026-12-03 (a wrong claim, but one that names a problem: the verifier judges it, not this rule).
    "The `__html__` method is not documented or used correctly",
    # An error as what goes wrong, not as a value.
    "An error from Close is dropped here.",
    "The function returns the error code 0 on failure.",
    "Returns null; callers expect an empty list.",
    # "now" far into the sentence, after the problem is named.
    "The `tolit` loop reads one byte past the buffer now that the bound uses <=.",
    "The loop bound in tolit may be off by one.",
    # The praise words are there, and so is the defect: the defect wins.
    "The function now correctly rounds, but raises ValueError for a negative precision.",
    # Not English: not this rule's to judge.
    "Le total est faux quand la liste est vide.",
]


@pytest.mark.parametrize("claim", PRAISE_OR_DESCRIPTION)
def test_a_claim_that_describes_or_praises_the_change_names_no_problem(claim: str) -> None:
    assert not names_a_problem(claim)


@pytest.mark.parametrize("claim", PROBLEMS)
def test_a_claim_that_says_what_is_wrong_names_a_problem(claim: str) -> None:
    assert names_a_problem(claim)


def test_no_claim_a_reader_marked_as_stating_its_bug_is_dropped() -> None:
    findings = json.loads(JUDGE_CHECK.read_text("utf-8"))["findings"]
    stated = [f["claim"] for f in findings if f["mine"]]
    assert len(stated) >= 20
    assert [c for c in stated if not names_a_problem(c)] == []


def test_the_comments_kept_and_the_count_dropped() -> None:
    comments = [
        {"path": "a.py", "line": 1, "finding": "Off by one: the last item is skipped.", "body": "x"},
        {"path": "a.py", "line": 2, "finding": "A nice cleanup.", "body": "x"},
        {"path": "a.py", "line": 3, "body": "The loop is now simpler and more readable."},
    ]
    described = problem_claims(comments)
    assert [c["line"] for c in described.kept] == [1] and described.dropped == 2
    assert described.footer().startswith("2 comments only described or praised the change")
