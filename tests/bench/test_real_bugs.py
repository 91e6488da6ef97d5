"""The real-bug corpus (bench/real_bugs.py) and the judge (bench/review_judge.py): what the data file
may hold, how a case is rebuilt from a mirror (a local bare repository made here, as GitHub is not
reachable), and how a claim is judged. No model is called."""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from pathlib import Path

import anyio
import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import review_eval  # noqa: E402
from real_bugs import DATA, EXCLUDED, RealBug, build_real_repo, load_real_bugs, mirror_of, touched_lines  # noqa: E402
from review_eval_cases import CaseResult, Finding, changed_files, git, load_corpus, real_case  # noqa: E402
from review_judge import Rubric, missing_concepts, praises, reverses, states_bug  # noqa: E402

from bot.beam.openai_client import OpenAiCompatible  # noqa: E402
from tests.support.openai_server import FakeOpenAI, usage  # noqa: E402

BUGS = load_real_bugs()


def test_the_corpus_is_what_the_issue_asks_for() -> None:
    assert len(BUGS) >= 30 and len({b.name for b in BUGS}) == len(BUGS)
    repos = Counter(b.repo for b in BUGS)
    assert len(repos) >= 8 and not set(repos) & EXCLUDED
    assert len({b.language for b in BUGS}) >= 3
    for bug in BUGS:
        assert re.fullmatch(r"[0-9a-f]{40}", bug.fix), bug.name
        assert bug.files and set(bug.gold) <= set(bug.files) and all(bug.gold.values()), bug.name
        assert bug.rubric.concepts and all(bug.rubric.concepts), bug.name


def test_the_data_file_holds_no_upstream_source() -> None:
    """Only the repository, the fix, the files, the gold lines and a rubric: nothing of the code."""
    rows = json.loads(DATA.read_text("utf-8"))["cases"]
    for row in rows:
        assert set(row) == {"name", "repo", "fix", "language", "files", "gold", "rubric"}
        assert set(row["rubric"]) <= {"bug", "concepts", "backwards"} and len(row["rubric"]["bug"]) < 300


@pytest.mark.parametrize("case", load_corpus("all"), ids=lambda c: c.name)
def test_every_rubric_compiles_and_accepts_its_own_statement_of_the_bug(case: object) -> None:
    rubric = case.rubric
    if case.clean:
        assert rubric is None
        return
    assert rubric is not None
    for terms in rubric.concepts:
        for term in terms:
            re.compile(term)
    for form in rubric.backwards:
        re.compile(form)
    assert states_bug(rubric.bug, rubric)  # so its backwards forms do not match the bug either


def test_the_judge_reads_the_claim_not_the_line() -> None:
    rubric = Rubric("nil map", ((r"nil map", r"\bmap\b"), (r"panic", r"initiali")))
    assert states_bug("New() no longer makes the map: the first Put panics on a nil map.", rubric)
    assert not states_bug("The map is created lazily now, a nice improvement.", rubric)  # praise
    assert not states_bug("Consider renaming the map.", rubric)  # a concept missing
    assert not states_bug("", rubric) and not states_bug("nil map panics", None)
    assert praises("Looks good to me, cleaner code.") and not praises("Better check for nil: it panics.")
    # A description of the change that happens to name the rubric's words states no bug.
    assert not states_bug("The function New now initialises the map before the first Put.", rubric)
    assert states_bug("The function New now skips the map: the first Put panics on a nil map.", rubric)


def test_a_claim_with_the_bug_backwards_is_a_miss_though_it_names_every_concept() -> None:
    """Claims of the 1.5B model, each on its case's gold line: the right tokens, the wrong way round."""
    cases = {c.name: c.rubric for c in load_corpus("real")}
    backwards = {
        "cookie_has_own_property": "The `__hasOwnProperty.call(obj, key)` check is incorrect. It should be "
        "`obj.hasOwnProperty(key)`.",
        "chi_route_headers_return": "The function now returns early if no routes are set, which is "
        "incorrect. It should continue processing the request if no routes are set.",
        "markupsafe_class_check": "The `type(s)` check is incorrect: it should use `s.__class__` to "
        "support proxy objects.",
    }
    for name, claim in backwards.items():
        rubric = cases[name]
        assert rubric is not None and not missing_concepts(claim, rubric), name  # keywords alone: a hit
        assert reverses(claim, rubric) and not states_bug(claim, rubric), name
    # The same tokens the right way round state the bug.
    right = (
        "`obj.hasOwnProperty(key)` throws when a cookie is named hasOwnProperty: use the prototype's `.call`."
    )
    assert states_bug(right, cases["cookie_has_own_property"])
    assert states_bug(
        "After next.ServeHTTP there is no return any more, so the handler continues and serves twice.",
        cases["chi_route_headers_return"],
    )


def test_touched_lines_are_the_added_lines_or_the_lines_around_a_deletion() -> None:
    replaced = "@@ -10,3 +10,3 @@\n a\n-b\n+B\n c\n"
    assert touched_lines(replaced) == {11}
    deleted = "@@ -10,4 +10,3 @@\n a\n-return\n c\n d\n"  # a fix's added line, reverted
    assert touched_lines(deleted) == {10, 11}
    two = "@@ -1,2 +1,2 @@\n-x\n+y\n z\n@@ -20,3 +20,2 @@\n p\n-q\n r\n"
    assert touched_lines(two) == {1, 20, 21}


def make_mirror(tmp_path: Path) -> tuple[Path, str]:
    """A bare mirror of a tiny repository whose last commit fixes a bug; its sha."""
    work = tmp_path / "upstream"
    work.mkdir()
    git(work, "init", "-q", "-b", "main")
    (work / "lib").mkdir()
    (work / "lib" / "bound.py").write_text("def ok(i, n):\n    return i > n\n", "utf-8")
    (work / "test_bound.py").write_text("# before the fix\n", "utf-8")
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "bound")
    (work / "lib" / "bound.py").write_text("def ok(i, n):\n    return i >= n\n", "utf-8")
    (work / "test_bound.py").write_text("# the fix's test\n", "utf-8")
    git(work, "commit", "-qam", "fix the bound")
    fix = git(work, "rev-parse", "HEAD").strip()
    mirrors = tmp_path / "mirrors"
    mirrors.mkdir()
    git(mirrors, "clone", "-q", "--mirror", str(work), "acme+bound")
    return mirrors, fix


def bug_of(fix: str) -> RealBug:
    rubric = Rubric("`>` lets i == n through", ((r">=?", r"off[- ]by[- ]one"), (r"equal", r"== ?n")))
    return RealBug(
        "acme_bound", "acme/bound", fix, "python", ("lib/bound.py",), {"lib/bound.py": [2]}, rubric
    )


def test_a_real_bug_is_rebuilt_as_the_fix_reverted_without_the_fixs_tests(tmp_path: Path) -> None:
    mirrors, fix = make_mirror(tmp_path)
    assert mirror_of(mirrors, "acme/bound") == mirrors / "acme+bound"
    repo = tmp_path / "case"
    base, head = build_real_repo(bug_of(fix), repo, mirrors, git)
    assert git(repo, "show", f"{base}:lib/bound.py").endswith("return i >= n\n")  # fixed on main
    assert git(repo, "show", f"{head}:lib/bound.py").endswith("return i > n\n")  # the change brings the bug
    assert git(repo, "show", f"{head}:test_bound.py") == "# before the fix\n"  # the fix's test is not there
    [changed] = changed_files(repo, base, head)
    assert changed.path == "lib/bound.py" and touched_lines(changed.patch) == {2}
    assert git(repo, "rev-list", "--count", "HEAD").strip() == "2"  # no upstream history
    with pytest.raises(FileNotFoundError):
        mirror_of(mirrors, "acme/other")


def test_the_bare_model_reviews_a_real_bug_rebuilt_from_a_mirror(tmp_path: Path) -> None:
    mirrors, fix = make_mirror(tmp_path)
    case = real_case(bug_of(fix))
    claim = "off-by-one: i > n lets i equal to n through"
    with FakeOpenAI() as llm:
        llm.reply_text(json.dumps([{"path": "lib/bound.py", "line": 2, "claim": claim}]))
        client = lambda: OpenAiCompatible(llm.url, "k", "m", timeout=10, temperature=0.2)  # noqa: E731
        result = anyio.run(review_eval.run_case, case, "bare", client, mirrors)
        prompt = llm.requests[0]["messages"][0]["content"]
        temperature = llm.requests[0]["temperature"]
    assert result.error is None and result.found and result.found_line
    assert "-    return i >= n\n+    return i > n" in prompt and temperature == 0.2


def test_the_verify_configuration_runs_the_bots_review_pass_with_every_step(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Structured answers for three votes (two agree), then one verdict: the benchmark's last row is the
    bot's own review pass with structured output, focus, votes and verification, over real HTTP."""
    case = next(c for c in load_corpus("written") if c.name == "go_nil_map")
    bug = {
        "path": "cache.go",
        "line": 14,
        "severity": "major",
        "claim": "nil map: Put panics",
        "suggestion": None,
    }
    other = {"path": "cache.go", "line": 9, "severity": "nit", "claim": "rename the type", "suggestion": None}
    with FakeOpenAI(structured=True) as llm:
        llm.reply_text(json.dumps({"body": "One bug.", "comments": [bug, other]}))
        llm.reply_text(json.dumps({"body": "One bug.", "comments": [dict(bug, claim="Put panics: nil map")]}))
        llm.reply_text(json.dumps({"body": "Fine.", "comments": []}))
        llm.reply_text(json.dumps({"real": True, "line": 14, "evidence": "c.items[key] = value"}))
        options = review_eval.parse_args(
            ["--base-url", llm.url, "--model", "m", "--cases", case.name, "--variants", "verify"]
        )
        anyio.run(review_eval.main, options)
        sent = llm.requests
        assert llm.errors == [] and llm.pending == 0
    assert [r["response_format"]["json_schema"]["name"] for r in sent] == ["review_change"] * 3 + ["verdict"]
    prompts = [r["messages"][-1]["content"] for r in sent[:3]]
    assert all("in function `New`" in p or "in method" in p or "in function" in p for p in prompts)
    out = capsys.readouterr().out
    assert "| + verification | 1 | 100% | 100% | 100% | 100% |" in out
    assert set(review_eval.CONFIGS) >= {"bare", "pipeline", "structured", "focused", "votes3", "verify"}


def test_staged_rows_are_read_from_the_verify_runs_first_vote_and_majority(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`--staged`: one verify run gives the focused row (its first vote) and the votes3 row (its
    majority) too, each with the tokens spent when it was reached, and the praise left out as the
    bot's own posting leaves it out."""
    case = next(c for c in load_corpus("written") if c.name == "go_nil_map")

    def comment(line: int, claim: str) -> dict[str, object]:
        return {"path": "cache.go", "line": line, "severity": "major", "claim": claim, "suggestion": None}

    first = [
        comment(14, "nil map: Put panics"),
        comment(9, "rename the type"),
        comment(14, "A nice cleanup."),
    ]
    with FakeOpenAI(structured=True) as llm:
        llm.reply_text(json.dumps({"body": "x", "comments": first}), usage=usage(100))
        llm.reply_text(
            json.dumps({"body": "x", "comments": [comment(14, "Put panics: nil map")]}), usage=usage(100)
        )
        llm.reply_text(json.dumps({"body": "x", "comments": []}), usage=usage(100))
        llm.reply_text(
            json.dumps({"real": True, "line": 14, "evidence": "c.items[key] = v"}), usage=usage(50)
        )
        options = review_eval.parse_args(
            ["--base-url", llm.url, "--model", "m", "--cases", case.name, "--variants", "verify", "--staged"]
        )
        anyio.run(review_eval.main, options)
        assert llm.errors == [] and llm.pending == 0
    out = capsys.readouterr().out
    assert "staged rows: focused: the verify run's vote 1; votes3: the verify run's majority" in out
    rows = [line for line in out.splitlines() if line.startswith("| + ")]
    assert rows[0].startswith("| + focused passes | 1 | 100% | 100% | 50% | 50% | 0 | 2.00 | 100 |")
    assert rows[1].startswith("| + votes (3) | 1 | 100% | 100% | 100% | 100% | 0 | 1.00 | 300 |")
    assert rows[2].startswith("| + verification | 1 | 100% | 100% | 100% | 100% | 0 | 1.00 | 350 |")


def test_the_judge_check_file_reads_enough_findings_and_reports_agreement() -> None:
    path = BENCH / "data" / "real_bugs" / "judge_check.json"
    rows = json.loads(path.read_text("utf-8"))["findings"]
    assert len(rows) >= 30
    names = {c.name for c in load_corpus("all")}
    assert {r["case"] for r in rows} <= names and all(isinstance(r["mine"], bool) for r in rows)
    cases = {c.name: c for c in load_corpus("all")}
    for row in rows:  # the recorded verdicts are the judge's today
        assert row["judge"] == states_bug(row["claim"], cases[row["case"]].rubric), row
    report = review_eval.check_judge(path)
    assert report.startswith(f"findings read: {len(rows)}; judge agrees with the reader on ")


def test_results_of_real_bugs_survive_a_dump(tmp_path: Path) -> None:
    case = real_case(BUGS[0])
    line = next(iter(case.gold.values()))[0]
    results = {
        "bare": [
            CaseResult(case, [Finding(next(iter(case.gold)), line, case.rubric.bug if case.rubric else "")])
        ]
    }
    meta = {"model": "m", "base_url": "u", "max_tokens": 1, "machine": "x", "date": "d", "corpus": "real"}
    back = review_eval.undump(review_eval.dump(results, meta))
    assert back["bare"][0].case.real == BUGS[0] and back["bare"][0].found
