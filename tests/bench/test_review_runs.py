"""Issue 41's measurement of the default: one verified run gives its unverified row too (`--staged`),
and several whole runs read as one table of means and spreads (bench/review_runs.py), with the
claims on gold lines nobody has read yet listed, never counted as hits."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import review_eval  # noqa: E402
from review_eval_cases import CaseResult, Finding, dump, load_corpus  # noqa: E402
from review_runs import common_cases, figures, mean_spread, verdicts  # noqa: E402

from tests.support.openai_server import FakeOpenAI, usage  # noqa: E402

CASES = {c.name: c for c in load_corpus("all")}


def _comment(line: int, claim: str) -> dict[str, object]:
    return {"path": "cache.go", "line": line, "severity": "major", "claim": claim, "suggestion": None}


def test_a_verified_structured_run_gives_the_unverified_row_from_its_first_vote(
    capsys: pytest.CaptureFixture[str],
) -> None:
    case = CASES["go_nil_map"]
    with FakeOpenAI(structured=True) as llm:
        llm.reply_text(
            json.dumps(
                {"body": "x", "comments": [_comment(14, "nil map: Put panics"), _comment(9, "rename")]}
            ),
            usage=usage(100),
        )
        # The check keeps the nil map and drops the rename.
        llm.reply_text(
            json.dumps({"real": True, "line": 14, "evidence": "c.items[key] = v"}), usage=usage(40)
        )
        llm.reply_text(json.dumps({"real": False, "line": 9, "evidence": ""}), usage=usage(40))
        args = ["--base-url", llm.url, "--model", "m", "--cases", case.name]
        options = review_eval.parse_args([*args, "--variants", "structured_verify", "--staged"])
        anyio.run(review_eval.main, options)
        assert llm.errors == [] and llm.pending == 0
        structured_requests = [r for r in llm.requests if "response_format" in r]
        assert len(structured_requests) == 3  # one pass over the whole change, then two checks
    out = capsys.readouterr().out
    assert "staged rows: structured: the structured_verify run's before verification" in out
    rows = {line.split(" | ")[0]: line for line in out.splitlines() if line.startswith("| ")}
    assert rows["| + structured output"].startswith(
        "| + structured output | 1 | 100% | 100% | 50% | 50% | 0 | 2.00 | 100 |"
    )
    verified = rows["| structured, whole change, verified"]
    assert verified.startswith(
        "| structured, whole change, verified | 1 | 100% | 100% | 100% | 100% | 0 | 1.00 | 180 |"
    )


def test_several_runs_make_one_table_of_means_and_spreads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bug, clean = CASES["go_nil_map"], next(c for c in CASES.values() if c.clean)
    stated = "Put writes to a nil map and panics"
    meta = {"model": "m", "base_url": "u", "max_tokens": 1, "machine": "x", "date": "d"}
    paths = []
    for n, (claims, false) in enumerate([([stated], 0), ([], 2), ([stated, "a nice cleanup"], 1)]):
        rows = {
            "structured": [
                CaseResult(bug, [Finding("cache.go", 14, c) for c in claims], 100 * (n + 1), 10.0),
                CaseResult(clean, [Finding("x.go", 1, "style")] * false, 100, 2.0),
            ]
        }
        path = tmp_path / f"run{n}.json"
        path.write_text(json.dumps(dump(rows, meta)), "utf-8")
        paths.append(str(path))
    anyio.run(review_eval.main, review_eval.parse_args(["--runs", *paths]))
    out = capsys.readouterr().out
    assert out.startswith("3 runs; bug cases per run [1], clean cases [1]")
    row = next(line for line in out.splitlines() if line.startswith("| + structured output"))
    cells = [c.strip() for c in row.split("|")[1:-1]]
    assert cells[1] == "0.7 (0-1, sd 0.6)"  # the judge states the nil map in two runs of three
    assert cells[5] == "1.0 (0-2, sd 1.0)"  # false findings on the clean change: 0, 2 and 1
    # Neither claim was read by a person: counted as unread, not as hits by reading.
    assert cells[2] == "0.0 (0-0, sd 0.0)" and cells[3] == "3"
    anyio.run(review_eval.main, review_eval.parse_args(["--runs", *paths, "--unread"]))
    listed = json.loads(capsys.readouterr().out)
    assert {r["claim"] for r in listed} == {stated, "a nice cleanup"} and all(
        r["mine"] is None for r in listed
    )


def test_a_claim_the_reader_accepted_counts_by_reading() -> None:
    read = verdicts()
    (case_name, claim), _ = next((k, v) for k, v in read.items() if v and k[0] in CASES)
    case = CASES[case_name]
    path, lines = next(iter(case.gold.items()))
    got = figures([CaseResult(case, [Finding(path, lines[0], claim)])], read)
    assert got.read == 1 and got.unread == 0


def test_mean_and_spread_of_one_run_is_the_value_alone() -> None:
    assert mean_spread([3]) == "3.0" and mean_spread([1, 3], 0) == "2 (1-3, sd 1)"
    assert mean_spread([2.5, 3.0]) == "2.8 (2.5-3, sd 0.4)"


def test_a_stopped_run_cuts_every_run_to_the_cases_all_finished() -> None:
    bug, other = CASES["go_nil_map"], CASES["toml_extra_advance"]
    whole = {"structured": [CaseResult(bug), CaseResult(other, [Finding("x", 1, "y")])]}
    stopped = {"structured": [CaseResult(bug)]}
    cut = common_cases([whole, stopped])
    assert [[r.case.name for r in run["structured"]] for run in cut] == [["go_nil_map"], ["go_nil_map"]]


def test_a_run_taken_up_again_is_read_from_its_parts(tmp_path: Path) -> None:
    meta = {"model": "m", "base_url": "u", "max_tokens": 1, "machine": "x", "date": "d"}
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    first.write_text(json.dumps(dump({"structured": [CaseResult(CASES["go_nil_map"])]}, meta)), "utf-8")
    second.write_text(
        json.dumps(dump({"structured": [CaseResult(CASES["toml_extra_advance"])]}, meta)), "utf-8"
    )
    run = review_eval.joined([str(first), str(second)])
    assert [r.case.name for r in run["structured"]] == ["go_nil_map", "toml_extra_advance"]
