"""Several whole runs of review_eval.py read as one table: each row's mean and spread over the runs,
so a default is chosen on differences larger than a run's own noise (issue 41).

At temperature 0.2 one run of the real-bug corpus moves by a case or two. A row is better than
another only when the gap between their means is wider than the spread of either; this table gives
both. "By reading" uses the verdicts a person recorded in bench/data/real_bugs/judge_check.json
(`mine`): a bug case counts when a finding within 3 lines of a gold line carries a claim the reader
accepted. A claim on a gold line nobody has read yet is counted as unread, never as a hit, and
`--unread` lists those claims so that a reader can add them to the check.

    .venv/bin/python bench/review_eval.py --runs run1.json run2.json run3.json [--unread]
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from review_eval_cases import CaseResult, hits, score

Runs = list[dict[str, list[CaseResult]]]  # each run: row -> its case results
JUDGE_CHECK = Path(__file__).resolve().parent / "data" / "real_bugs" / "judge_check.json"


def verdicts(path: Path = JUDGE_CHECK) -> dict[tuple[str, str], bool]:
    """The reader's verdict for each (case, claim) read so far."""
    rows = json.loads(path.read_text("utf-8"))["findings"]
    return {(str(r["case"]), str(r["claim"]).strip()): bool(r["mine"]) for r in rows}


def on_gold(result: CaseResult) -> list[str]:
    return [f.claim.strip() for f in result.findings if hits(f, result.case.gold)]


@dataclass(frozen=True)
class RunFigures:
    """One row of one run, in counts (cases, findings), so that means and spreads stay readable."""

    stated: int  # bug cases the judge says a finding states
    read: int  # bug cases a finding states by the reader's verdicts
    unread: int  # claims on a gold line with no verdict yet
    line: int  # bug cases with any finding on a gold line
    false_on_clean: int
    findings: int
    tokens_per_case: float
    seconds_per_case: float
    errors: int


def figures(results: list[CaseResult], read: dict[tuple[str, str], bool]) -> RunFigures:
    s = score(results)
    bugs = [r for r in results if not r.case.clean]
    claims = {r.case.name: on_gold(r) for r in bugs}
    return RunFigures(
        stated=sum(r.found for r in bugs),
        read=sum(any(read.get((name, c)) for c in cs) for name, cs in claims.items()),
        unread=sum((name, c) not in read for name, cs in claims.items() for c in cs),
        line=sum(r.found_line for r in bugs),
        false_on_clean=s.false_on_clean,
        findings=sum(len(r.findings) for r in results),
        tokens_per_case=s.prompt_tokens_per_case,
        seconds_per_case=s.seconds / max(1, s.cases),
        errors=s.errors,
    )


def mean_spread(values: Sequence[float], digits: int = 1) -> str:
    """`mean (min-max, sd)`: the sd is the sample's, over runs."""
    mean = statistics.fmean(values)
    if len(values) < 2:
        return f"{mean:.{digits}f}"
    sd = statistics.stdev(values)
    low, high = (f"{v:.{digits}f}".removesuffix(".0") for v in (min(values), max(values)))
    return f"{mean:.{digits}f} ({low}-{high}, sd {sd:.{digits}f})"


def common_cases(runs: Runs) -> Runs:
    """Each run cut to the cases every run finished, so that a stopped run compares like with like."""
    names = set.intersection(*({r.case.name for rs in run.values() for r in rs} for run in runs))
    return [{v: [r for r in rs if r.case.name in names] for v, rs in run.items()} for run in runs]


def runs_table(
    runs: Runs,
    labels: dict[str, str],
    order: Callable[[str], int],
    read: dict[tuple[str, str], bool],
) -> str:
    runs = common_cases(runs)
    rows = sorted(set.intersection(*(set(r) for r in runs)), key=order)
    bug_cases = {len([r for r in run[v] if not r.case.clean]) for run in runs for v in rows}
    clean_cases = {len([r for r in run[v] if r.case.clean]) for run in runs for v in rows}
    lines = [
        f"{len(runs)} runs; bug cases per run {sorted(bug_cases)}, clean cases {sorted(clean_cases)}; "
        "each cell: mean over the runs (min-max, sd)",
        "| row | stated, judge | stated, by reading | unread on gold | on a gold line | "
        "false on clean | findings | prompt tokens/case | wall s/case | errors |",
        "|" + "---|" * 10,
    ]
    for v in rows:
        each = [figures(run[v], read) for run in runs]
        lines.append(
            f"| {labels.get(v, v)} | {mean_spread([f.stated for f in each])} | "
            f"{mean_spread([f.read for f in each])} | {sum(f.unread for f in each)} | "
            f"{mean_spread([f.line for f in each])} | {mean_spread([f.false_on_clean for f in each])} | "
            f"{mean_spread([f.findings for f in each])} | "
            f"{mean_spread([f.tokens_per_case for f in each], 0)} | "
            f"{mean_spread([f.seconds_per_case for f in each], 0)} | {sum(f.errors for f in each)} |"
        )
    return "\n".join(lines)


def unread(runs: Runs, read: dict[tuple[str, str], bool]) -> list[dict[str, Any]]:
    """The claims on a gold line with no verdict, once each, in judge_check's shape (`mine` null)."""
    seen: dict[tuple[str, str], dict[str, Any]] = {}
    for run in runs:
        for results in run.values():
            for r in results:
                if r.case.clean:
                    continue
                for claim in on_gold(r):
                    key = (r.case.name, claim)
                    if key not in read and key not in seen:
                        seen[key] = {"case": r.case.name, "claim": claim, "mine": None}
    return list(seen.values())
