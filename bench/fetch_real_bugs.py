"""Checks that a directory of git mirrors can rebuild every real-bug case, and (with `--write-gold`)
records each case's gold lines: the lines its fix touches, on the new side of the reverted change.

    .venv/bin/python bench/fetch_real_bugs.py --mirrors DIR [--cases a,b] [--write-gold]

DIR holds one git directory per repository (`owner+name/repo`, `owner+name`, `owner/name.git`, ...,
see real_bugs.mirror_of); a bare `git clone --mirror` of each repository named in
bench/data/real_bugs/corpus.json will do. Nothing is downloaded here: GitHub need not be reachable from the
machine that runs the benchmark, only the mirrors.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from real_bugs import DATA, RealBug, build_real_repo, load_real_bugs, touched_lines
from review_eval_cases import changed_files, git


def gold_of(bug: RealBug, mirrors: Path) -> dict[str, list[int]]:
    """The lines the fix touches, computed from the rebuilt case."""
    with tempfile.TemporaryDirectory(prefix="real-bug-") as scratch:
        repo = Path(scratch) / "repo"
        base, head = build_real_repo(bug, repo, mirrors, git)
        return {
            f.path: sorted(touched_lines(f.patch))
            for f in changed_files(repo, base, head)
            if f.path in bug.files
        }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--mirrors", required=True, type=Path)
    parser.add_argument("--cases", help="comma-separated case names (default: all)")
    parser.add_argument("--write-gold", action="store_true", help="record the computed gold lines")
    options = parser.parse_args(argv)
    names = {n for n in (options.cases or "").split(",") if n}
    bugs = [b for b in load_real_bugs() if not names or b.name in names]
    computed: dict[str, dict[str, list[int]]] = {}
    failed = 0
    for bug in bugs:
        try:
            computed[bug.name] = gold_of(bug, options.mirrors)
        except (OSError, ValueError, RuntimeError, __import__("subprocess").CalledProcessError) as exc:
            failed += 1
            print(f"{bug.name:32} FAILED {type(exc).__name__}: {exc}", file=sys.stderr)
            continue
        recorded_ok = all(set(lines) <= set(computed[bug.name].get(p, [])) for p, lines in bug.gold.items())
        same = "ok" if bug.gold and recorded_ok else f"recorded {bug.gold}"
        print(f"{bug.name:32} {bug.repo:28} {bug.fix[:12]} gold {computed[bug.name]} {same}")
    if options.write_gold:
        data = json.loads(DATA.read_text("utf-8"))
        for row in data["cases"]:
            if row["name"] in computed:
                row["gold"] = computed[row["name"]]
        DATA.write_text(json.dumps(data, indent=1) + "\n", "utf-8")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
