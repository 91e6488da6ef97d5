"""The review benchmark's cases, loader and scorer (bench/review_eval_cases.py), and its reviewers
driven against the fake OpenAI server: what the benchmark counts, not what a model finds."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import anyio
import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import review_eval  # noqa: E402
from review_eval_cases import (  # noqa: E402
    Case,
    CaseResult,
    Finding,
    added_lines,
    build_repo,
    changed_files,
    dump,
    git,
    hits,
    load_cases,
    parse_findings,
    score,
    spread,
    undump,
)
from review_judge import Rubric  # noqa: E402

from bot.beam.openai_client import OpenAiCompatible  # noqa: E402
from tests.support.openai_server import FakeOpenAI, usage  # noqa: E402

CASES = load_cases()


def test_the_case_set_is_what_the_issue_asks_for() -> None:
    kinds = Counter("clean" if c.clean else "bug" for c in CASES)
    assert kinds == {"bug": 20, "clean": 4}
    languages = {c.language for c in CASES}
    assert {"python", "go"} <= languages and languages & {"javascript", "typescript"}
    for case in CASES:
        assert 1 <= len(case.after) <= 3 and case.description
        assert bool(case.gold) != case.clean, case.name  # a bug has gold lines, a refactor none


def test_a_case_becomes_a_two_commit_repository(tmp_path: Path) -> None:
    case = next(c for c in CASES if c.name == "py_swapped_transfer")
    base, head = build_repo(case, tmp_path / "repo")
    repo = tmp_path / "repo"
    assert git(repo, "rev-list", "--count", "HEAD").strip() == "2"
    assert git(repo, "rev-parse", "HEAD~1").strip() == base
    assert git(repo, "branch", "--show-current").strip() == "change"
    assert set(git(repo, "ls-tree", "--name-only", base).split()) == set(case.before)
    for path, text in case.after.items():
        assert git(repo, "show", f"{head}:{path}") == text
    files = changed_files(repo, base, head)
    assert [(f.path, f.status) for f in files] == [("refunds.py", "modified")]  # ledger.py is unchanged
    assert files[0].patch.startswith("@@ ") and files[0].additions == 6 and files[0].deletions == 3
    # The same case built twice has the same commits: runs are comparable.
    assert build_repo(case, tmp_path / "again") == (base, head)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_every_gold_line_is_a_line_the_change_adds(case: Case, tmp_path: Path) -> None:
    base, head = build_repo(case, tmp_path / "repo")
    added = {f.path: added_lines(f.patch) for f in changed_files(tmp_path / "repo", base, head)}
    assert set(case.gold) <= set(added)
    for path, lines in case.gold.items():
        assert lines and set(lines) <= added[path], (path, lines, sorted(added[path]))


RUBRIC = Rubric(
    "the loop stops one item early", ((r"off[- ]by[- ]one", r"<= ?len"), (r"last", r"past the end"))
)


def _case(gold: dict[str, list[int]], kind: str = "wrong operator") -> Case:
    return Case("hand", "python", kind, "hand-made", gold, {}, {}, None if kind == "clean" else RUBRIC)


def test_a_finding_counts_within_three_lines_of_a_gold_line_in_the_same_file() -> None:
    gold = {"pkg/a.py": [10, 20]}
    assert hits(Finding("pkg/a.py", 13), gold) and hits(Finding("./pkg/a.py", 7), gold)
    assert hits(Finding("b/pkg/a.py", 23), gold) and hits(Finding("a.py", 20), gold)
    assert not hits(Finding("pkg/a.py", 14), gold) and not hits(Finding("pkg/a.py", 24), gold)
    assert not hits(Finding("pkg/b.py", 10), gold) and not hits(Finding("xa.py", 10), gold)


STATES = "off by one: the loop reads past the end on the last item"


def test_recall_precision_and_false_findings_on_hand_made_results() -> None:
    found = CaseResult(
        _case({"a.py": [10]}), [Finding("a.py", 11, STATES), Finding("a.py", 40, STATES)], 100, 2.0
    )
    praised = CaseResult(
        _case({"e.py": [10]}), [Finding("e.py", 10, "Nice improvement of the loop.")], 50, 1.0
    )
    missed = CaseResult(_case({"b.go": [5]}), [Finding("b.go", 9, STATES)], 300, 1.0)
    silent = CaseResult(_case({"c.ts": [3]}), [], 200, 1.0, error="BeamError: timed out")
    clean = CaseResult(_case({}, "clean"), [Finding("d.py", 1, STATES), Finding("d.py", 2)], 400, 4.0)
    result = score([found, praised, missed, silent, clean])
    assert result.cases == 5 and result.bug_cases == 4
    assert result.recall == pytest.approx(1 / 4)  # stated on its line: only `found`
    assert result.recall_line == pytest.approx(2 / 4)  # on the line, whatever it says: `praised` too
    assert result.precision == pytest.approx(1 / 6)  # one of six findings states a bug on its line
    assert result.precision_line == pytest.approx(2 / 6)
    assert result.false_on_clean == 2
    assert result.findings_per_case == pytest.approx(6 / 5)
    assert result.prompt_tokens_per_case == 210 and result.seconds == 9.0 and result.errors == 1
    quiet = score([CaseResult(_case({}, "clean"))])
    assert quiet.recall is None and quiet.precision is None and quiet.false_on_clean == 0


def test_a_finding_on_the_gold_line_that_praises_the_bug_is_a_miss_one_that_states_it_a_hit() -> None:
    """Issue 30's three praised bugs, as findings on their gold line."""
    case = _case({"a.py": [10]})
    for praise in (
        "This is an improvement: the loop now stops at the last item.",  # names the concept, approves
        "Good change, cleaner loop bounds.",
        "A minor optimisation of the loop.",
    ):
        result = CaseResult(case, [Finding("a.py", 10, praise)])
        assert result.found_line and not result.found, praise
    stated = CaseResult(case, [Finding("a.py", 10, "Off-by-one: with <= len the loop reads past the end.")])
    assert stated.found and stated.matched == stated.on_line == 1
    elsewhere = CaseResult(case, [Finding("a.py", 30, STATES)])  # states the bug, on another line
    assert not elsewhere.found and not elsewhere.found_line


def test_findings_are_read_leniently_from_what_models_write() -> None:
    fenced = 'Here:\n```json\n[{"path": "a.py", "line": 4, "claim": "off by one"}]\n```\nDone.'
    assert parse_findings(fenced) == [Finding("a.py", 4, "off by one")]
    wrapped = '{"findings": [{"file": "b.go", "line_number": "12", "message": "nil map"}]}'
    assert parse_findings(wrapped) == [Finding("b.go", 12, "nil map")]
    chatty = 'I found: [{"path": "c.ts", "lines": [7, 8], "comment": "sorts in place"}, {"path": "c.ts"}]'
    assert parse_findings(chatty) == [Finding("c.ts", 7, "sorts in place")]
    assert parse_findings("[]") == [] and parse_findings("The change looks fine.") == []
    two = (
        'A:\n```json\n[{"path": "a.py", "line": 1, "claim": "x"}]\n```\n'
        'B:\n```json\n{"path": "b.py", "line": 2}\n```'
    )
    assert parse_findings(two) == [Finding("a.py", 1, "x"), Finding("b.py", 2, "")]


def test_a_subset_spreads_over_the_cases() -> None:
    picked = spread(CASES, 6)
    assert len(picked) == 6 and len({c.name for c in picked}) == 6
    assert len({c.language for c in picked}) >= 3 and any(c.clean for c in picked)
    assert spread(CASES, None) == CASES


def _client(llm: FakeOpenAI) -> OpenAiCompatible:
    return OpenAiCompatible(llm.url, "test-key", "fake-model", timeout=10).with_max_tokens(256)


def test_the_bare_model_gets_the_raw_diff_and_its_usage_is_counted() -> None:
    case = next(c for c in CASES if c.name == "go_index_bound")
    with FakeOpenAI() as llm:
        claim = "the bound check i > len(q.jobs) lets i == len through: index out of range panic"
        llm.reply_text(json.dumps([{"path": "queue.go", "line": 26, "claim": claim}]), usage=usage(321, 9))
        result = anyio.run(review_eval.run_case, case, "bare", lambda: _client(llm))
        prompt = llm.requests[0]["messages"][0]["content"]
    assert result.error is None and result.found and result.prompt_tokens == 321
    assert "diff --git a/queue.go b/queue.go" in prompt and "+\tif i < 0 || i > len(q.jobs) {" in prompt


def test_the_pipeline_reviews_with_numbered_hunks_and_counts_the_posted_comments() -> None:
    case = next(c for c in CASES if c.name == "py_sql_injection")
    comment = {
        "path": "users.py",
        "line": 18,
        "body": "SQL built with an f-string: injection",
        "severity": "major",
    }
    with FakeOpenAI() as llm:
        posted = {"body": "One problem.", "comments": [comment]}
        llm.reply_tool_calls(("review_change", posted), usage=usage(900))
        llm.reply_text("Posted.", usage=usage(950))
        result = anyio.run(review_eval.run_case, case, "pipeline", lambda: _client(llm))
        prompt = llm.requests[0]["messages"][-1]["content"]
        tools = {t["function"]["name"] for t in llm.requests[0]["tools"]}
    assert result.error is None, result.error
    assert [(f.path, f.line) for f in result.findings] == [("users.py", 18)] and result.found
    assert result.prompt_tokens == 1850  # both calls of the run
    assert "18 +    query = f" in prompt and "review_change" in tools


def test_the_pipeline_with_items_off_reads_the_raw_patch_and_no_linter() -> None:
    case = next(c for c in CASES if c.name == "py_sql_injection")
    with FakeOpenAI() as llm:
        llm.reply_tool_calls(("review_change", {"body": "Looks fine.", "comments": []}))
        llm.reply_text("Posted.")
        result = anyio.run(review_eval.run_case, case, "plain", lambda: _client(llm))
        prompt = llm.requests[0]["messages"][-1]["content"]
    assert result.error is None and result.findings == []
    assert "18 +    query = f" not in prompt and "--- users.py (modified, +5 -0)" in prompt
    assert "linter findings" not in prompt
    assert "@@ -12,3 +12,8 @@ def connect(path):\n def find_by_email" in prompt


def test_a_dump_reports_the_same_figures_and_only_cases_every_variant_finished(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bug = next(c for c in CASES if c.name == "go_nil_map")
    clean = next(c for c in CASES if c.clean)
    results = {
        "bare": [CaseResult(bug, [Finding("cache.go", 14, "nil map")], 200, 3.0), CaseResult(clean)],
        "pipeline": [CaseResult(bug, [Finding("cache.go", 30, "style")], 1500, 9.0)],  # stopped early
    }
    meta = {"model": "m", "base_url": "u", "max_tokens": 1, "machine": "x, 2 cores", "date": "d"}
    path = tmp_path / "run.json"
    path.write_text(json.dumps(dump(results, meta)), "utf-8")
    back = undump(json.loads(path.read_text("utf-8")))
    assert [r.case.name for r in back["bare"]] == ["go_nil_map"] == [r.case.name for r in back["pipeline"]]
    assert score(back["bare"]).recall == 1.0 and score(back["pipeline"]).recall == 0.0
    anyio.run(review_eval.main, review_eval.parse_args(["--report", str(path)]))
    out = capsys.readouterr().out
    assert (
        "cases: 1" in out and "| bare model | 1 | 100% | 100% | 100% | 100% | 0 | 1.00 | 200 | 3 | 0 |" in out
    )
    assert "| pipeline | 0.00x | 0.00x | 7.50x | 3.00x |" in out


def test_the_findings_the_verification_dropped_are_kept_with_the_checks_answer(tmp_path: Path) -> None:
    """Issue 41: the benchmark can read what the check held back and why, in its results file too."""
    case = next(c for c in CASES if c.name == "py_sql_injection")
    claim = "SQL built with an f-string: injection"
    comment = {"path": "users.py", "line": 18, "severity": "major", "claim": claim, "suggestion": None}
    answer = {"real": False, "line": None, "evidence": "query = f..."}
    with FakeOpenAI(structured=True) as llm:
        llm.reply_text(json.dumps({"body": "One problem.", "comments": [comment]}))
        llm.reply_text(json.dumps(answer))
        result = anyio.run(review_eval.run_case, case, "default", lambda: _client(llm))
    assert result.error is None and result.findings == []
    assert result.dropped == [{"path": "users.py", "line": 18, "claim": claim, "check": answer}]
    back = undump(dump({"default": [result]}, {}))
    assert back["default"][0].dropped == result.dropped
