"""The review-quality benchmark's cases and scoring (bench/review_eval.py runs them).

A case is plain files under `bench/data/review_cases/<case>/`: `before/` and `after/` trees and a
`case.json` with its language, its kind (`clean` for a refactor, else the kind of bug), a one-line
description, and the gold: `{path: [new-side line numbers of the buggy lines]}`. `build_repo` turns a
case into a two-commit git repository (before on `main`, after on `change`), so every reviewer reads
a real `git diff`, as it would on a pull request.

A finding is on the bug's line when it names a gold file and lies within `TOLERANCE` lines of a gold
line: models cite the line of a call or of the statement around it, and either points the maintainer
to the bug. It states the bug when, in addition, its claim matches the case's rubric (review_judge.py):
issue 30 read the findings and found that line-only hits were mostly praise of the buggy line. Recall
and precision count stated hits; line-only hits are reported beside them.

The real-bug corpus (real_bugs.py, `corpus="real"`) gives cases of the same shape, rebuilt from
mirrors of public repositories.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from real_bugs import RealBug, build_real_repo, load_real_bugs
from review_judge import Rubric, states_bug

CASES_DIR = Path(__file__).resolve().parent / "data" / "review_cases"
TOLERANCE = 3
STATUS = {"A": "added", "M": "modified", "D": "removed"}
# Fixed identity and dates: a case's commits have the same ids on every run and machine.
_GIT_ENV = {
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@example.invalid",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@example.invalid",
    "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
}


@dataclass(frozen=True)
class Case:
    name: str
    language: str
    kind: str
    description: str
    gold: dict[str, list[int]]
    before: dict[str, str]
    after: dict[str, str]
    rubric: Rubric | None = None  # what the bug is; None for a clean change
    real: RealBug | None = None  # a real bug, rebuilt from a mirror (before/after are empty)

    @property
    def clean(self) -> bool:
        return self.kind == "clean"


@dataclass(frozen=True)
class ChangedFile:
    """One file of the change as GitHub's pull-request files API gives it (`patch` has no header)."""

    path: str
    status: str
    additions: int
    deletions: int
    patch: str


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    claim: str = ""


def _tree(root: Path) -> dict[str, str]:
    if not root.is_dir():
        return {}
    return {
        p.relative_to(root).as_posix(): p.read_text("utf-8") for p in sorted(root.rglob("*")) if p.is_file()
    }


def load_case(directory: Path) -> Case:
    meta = json.loads((directory / "case.json").read_text("utf-8"))
    gold = {str(path): sorted(int(n) for n in lines) for path, lines in meta.get("gold", {}).items()}
    return Case(
        directory.name,
        str(meta["language"]),
        str(meta["kind"]),
        str(meta["description"]),
        gold,
        _tree(directory / "before"),
        _tree(directory / "after"),
        Rubric.from_json(meta["rubric"]) if "rubric" in meta else None,
    )


def real_case(bug: RealBug) -> Case:
    return Case(bug.name, bug.language, "real bug", bug.rubric.bug, bug.gold, {}, {}, bug.rubric, bug)


CORPORA = ("written", "real", "all")


def load_corpus(corpus: str = "written", names: list[str] | None = None) -> list[Case]:
    """The written cases, the real bugs, or both; `names` picks cases by name."""
    cases: list[Case] = []
    if corpus in ("written", "all"):
        cases += load_cases()
    if corpus in ("real", "all"):
        cases += [real_case(b) for b in load_real_bugs()]
    if names:
        unknown = sorted(set(names) - {c.name for c in cases})
        if unknown:
            raise SystemExit(f"unknown case(s): {', '.join(unknown)}")
        cases = [c for c in cases if c.name in names]
    return cases


def load_cases(root: Path = CASES_DIR, names: list[str] | None = None) -> list[Case]:
    cases = [load_case(d) for d in sorted(root.iterdir()) if (d / "case.json").is_file()]
    if names:
        unknown = sorted(set(names) - {c.name for c in cases})
        if unknown:
            raise SystemExit(f"unknown case(s): {', '.join(unknown)}")
        cases = [c for c in cases if c.name in names]
    return cases


def spread(cases: list[Case], limit: int | None) -> list[Case]:
    """`limit` cases evenly spaced over the name-sorted list, so a subset still mixes languages and
    clean changes."""
    if limit is None or limit >= len(cases):
        return cases
    return [cases[(i * len(cases)) // limit] for i in range(max(0, limit))]


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        env={**os.environ, **_GIT_ENV},
    )
    return done.stdout


def _write(repo: Path, files: dict[str, str]) -> None:
    for path, text in files.items():
        target = repo / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, "utf-8")


def build_repo(case: Case, repo: Path, mirrors: Path | None = None) -> tuple[str, str]:
    """The case as a repository at `repo` (created): its base and head commits; the work tree is
    left at the head, on branch `change`. A real bug is rebuilt from its mirror under `mirrors`."""
    if case.real is not None:
        if mirrors is None:
            raise FileNotFoundError(f"{case.name} is a real bug: give --mirrors DIR")
        return build_real_repo(case.real, repo, mirrors, git)
    repo.mkdir(parents=True, exist_ok=True)
    git(repo, "init", "-q", "-b", "main")
    _write(repo, case.before)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "the program before the change")
    base = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "checkout", "-q", "-b", "change")
    for path in set(case.before) - set(case.after):
        (repo / path).unlink()
    _write(repo, case.after)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "the change under review")
    return base, git(repo, "rev-parse", "HEAD").strip()


def changed_files(repo: Path, base: str, head: str) -> list[ChangedFile]:
    out: list[ChangedFile] = []
    for row in git(repo, "diff", "--numstat", "--no-renames", base, head).splitlines():
        added, removed, path = row.split("\t", 2)
        status = git(repo, "diff", "--name-status", "--no-renames", base, head, "--", path).split("\t")[0]
        diff = git(repo, "diff", "--no-color", "--no-renames", base, head, "--", path)
        patch = diff[diff.index("@@") :] if "@@" in diff else ""
        out.append(ChangedFile(path, STATUS.get(status[:1], "modified"), int(added), int(removed), patch))
    return out


def raw_diff(repo: Path, base: str, head: str) -> str:
    return git(repo, "diff", "--no-color", "--no-renames", base, head)


def added_lines(patch: str) -> set[int]:
    """New-side numbers of the lines a patch adds (where the gold must lie)."""
    lines: set[int] = set()
    current = 0
    for row in patch.splitlines():
        match = re.match(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,\d+)? @@", row)
        if match:
            current = int(match.group(1))
        elif row.startswith("+"):
            lines.add(current)
            current += 1
        elif not row.startswith(("-", "\\")):
            current += 1
    return lines


# -- findings a model wrote as text ----------------------------------------------------------------

_FENCED = re.compile(r"```[a-zA-Z]*\s*\n(.*?)```", re.DOTALL)
_PATH_KEYS = ("path", "file", "filename", "file_path")
_LINE_KEYS = ("line", "line_number", "lineno", "start_line", "lines")
_CLAIM_KEYS = ("claim", "body", "message", "comment", "description", "issue", "finding")


def _first_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, list) and value:
        return _first_int(value[0])
    match = re.search(r"\d+", str(value)) if isinstance(value, str) else None
    return int(match.group()) if match else None


def _finding(item: Any) -> Finding | None:
    if not isinstance(item, dict):
        return None
    path = next((item[k] for k in _PATH_KEYS if isinstance(item.get(k), str)), None)
    line = next((n for k in _LINE_KEYS if (n := _first_int(item.get(k))) is not None), None)
    claim = next((item[k] for k in _CLAIM_KEYS if isinstance(item.get(k), str)), "")
    return Finding(path, line, claim) if path and line is not None else None


def _items(value: Any) -> list[Any] | None:
    if isinstance(value, list):
        return value
    if isinstance(value, dict):
        for key in ("findings", "comments", "issues", "results"):
            if isinstance(value.get(key), list):
                return list(value[key])
        return [value]
    return None


def parse_findings(text: str) -> list[Finding]:
    """Findings from a reply that was asked for a JSON list: bare or fenced, wrapped in an object
    or not, with the key names models use for path, line and claim. Unreadable: no findings."""
    fenced: list[Finding] = []  # every fenced block is read, not only the first (issue 30)
    for block in _FENCED.findall(text):
        try:
            items = _items(json.loads(block.strip()))
        except ValueError:
            continue
        fenced += [f for f in map(_finding, items or []) if f is not None]
    if fenced:
        return fenced
    candidates = [text]
    for opening, closing in (("[", "]"), ("{", "}")):
        if opening in text and closing in text:
            candidates.append(text[text.index(opening) : text.rindex(closing) + 1])
    for candidate in candidates:
        try:
            items = _items(json.loads(candidate.strip()))
        except ValueError:
            continue
        if items is not None:
            return [f for f in map(_finding, items) if f is not None]
    return []


# -- scoring --------------------------------------------------------------------------------------


def _norm(path: str) -> str:
    path = path.strip().strip("`").replace("\\", "/")
    for prefix in ("./", "a/", "b/"):
        if path.startswith(prefix):
            path = path[len(prefix) :]
    return path


def same_file(cited: str, gold: str) -> bool:
    a, b = _norm(cited), _norm(gold)
    return a == b or a.endswith("/" + b) or b.endswith("/" + a)


def hits(finding: Finding, gold: dict[str, list[int]]) -> bool:
    return any(
        same_file(finding.path, path) and abs(finding.line - line) <= TOLERANCE
        for path, lines in gold.items()
        for line in lines
    )


@dataclass
class CaseResult:
    case: Case
    findings: list[Finding] = field(default_factory=list)
    prompt_tokens: int = 0
    seconds: float = 0.0
    error: str | None = None
    reply: str = ""  # the model's last answer, for reading a run afterwards
    # the findings the verification dropped, each with the check's answer (reviews/verification.py)
    dropped: list[dict[str, Any]] = field(default_factory=list)

    @property
    def on_line(self) -> int:
        """Findings on a gold line, whatever they say (the measure before issue 30)."""
        return sum(hits(f, self.case.gold) for f in self.findings)

    @property
    def matched(self) -> int:
        """Findings on a gold line whose claim states the bug (the judge's verdict)."""
        return sum(hits(f, self.case.gold) and states_bug(f.claim, self.case.rubric) for f in self.findings)

    @property
    def found(self) -> bool:
        return self.matched > 0

    @property
    def found_line(self) -> bool:
        return self.on_line > 0


@dataclass(frozen=True)
class Score:
    cases: int
    bug_cases: int
    recall: float | None  # bug cases with a finding that states the bug on its line, out of bug cases
    precision: float | None  # findings that state a bug on its line, out of all findings (None: none)
    false_on_clean: int  # findings on clean changes (every one is false)
    findings_per_case: float
    prompt_tokens_per_case: float
    seconds: float
    errors: int
    recall_line: float | None = None  # as recall, counting any finding on a gold line
    precision_line: float | None = None  # as precision, counting any finding on a gold line


def score(results: list[CaseResult]) -> Score:
    bugs = [r for r in results if not r.case.clean]
    findings = sum(len(r.findings) for r in results)
    matched = sum(r.matched for r in bugs)
    on_line = sum(r.on_line for r in bugs)
    count = max(1, len(results))
    return Score(
        cases=len(results),
        bug_cases=len(bugs),
        recall=sum(r.found for r in bugs) / len(bugs) if bugs else None,
        precision=matched / findings if findings else None,
        false_on_clean=sum(len(r.findings) for r in results if r.case.clean),
        findings_per_case=findings / count,
        prompt_tokens_per_case=sum(r.prompt_tokens for r in results) / count,
        seconds=sum(r.seconds for r in results),
        errors=sum(r.error is not None for r in results),
        recall_line=sum(r.found_line for r in bugs) / len(bugs) if bugs else None,
        precision_line=on_line / findings if findings else None,
    )


def dump(results: dict[str, list[CaseResult]], meta: dict[str, Any]) -> dict[str, Any]:
    rows = {
        v: [
            {
                "case": r.case.name,
                "findings": [f.__dict__ for f in r.findings],
                "found": r.found,
                "found_line": r.found_line,
                "prompt_tokens": r.prompt_tokens,
                "seconds": round(r.seconds, 1),
                "error": r.error,
                "reply": r.reply,
                "dropped": r.dropped,
            }
            for r in rs
        ]
        for v, rs in results.items()
    }
    return {"meta": meta, "results": rows}


def undump(data: dict[str, Any]) -> dict[str, list[CaseResult]]:
    """The results of a dump, only for the cases every variant finished (a stopped run's last case
    may lack some), so the rows compare the same cases."""
    cases = {c.name: c for c in load_corpus("all")}
    rows: dict[str, list[dict[str, Any]]] = data["results"]
    done = set.intersection(*({r["case"] for r in rs} for rs in rows.values())) if rows else set()
    return {
        v: [
            CaseResult(
                cases[r["case"]],
                [Finding(**f) for f in r["findings"]],
                int(r["prompt_tokens"]),
                float(r["seconds"]),
                r["error"],
                r.get("reply", ""),
                list(r.get("dropped", [])),
            )
            for r in rs
            if r["case"] in done
        ]
        for v, rs in rows.items()
    }
