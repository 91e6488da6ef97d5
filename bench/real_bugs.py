"""The review benchmark's corpus of real bugs: public bug fixes, reverted (Greptile's method).

`bench/data/real_bugs/corpus.json` records, per case, only the repository, the commit that fixed the bug,
the source files of the fix, the gold lines and a rubric of the bug. No upstream source is kept here:
the case is rebuilt at run time from a local mirror of the repository (`--mirrors DIR`, a directory
of the git directories `fetch_real_bugs.py` checks), as a two-commit repository:

- `main`: the tree of the fix's parent, with the fix's source files as the fix left them (the fixed
  program, with the tests of its own time, so no test written for the fix gives the bug away);
- `change`: the same tree with those files as they were before the fix: the change that brings the
  bug in, i.e. the fix reverted.

The gold lines are the lines the fix touches, on the new side of that change: the lines it adds
back (the lines the fix removed), or, where the fix only added lines (a missing `return`, a missing
check), the lines on either side of the place they were taken from.
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import tarfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from review_judge import Rubric

DATA = Path(__file__).resolve().parent / "data" / "real_bugs" / "corpus.json"
# Cases from these are kept elsewhere, as an independent check (issue 30).
EXCLUDED = frozenset({"pallets/click", "psf/requests", "expressjs/express", "spf13/cobra", "gorilla/mux"})


@dataclass(frozen=True)
class RealBug:
    name: str
    repo: str  # owner/name on GitHub
    fix: str  # the full sha of the commit that fixed the bug
    language: str
    files: tuple[str, ...]  # the fix's source files, reverted in the case
    gold: dict[str, list[int]]
    rubric: Rubric


def load_real_bugs(path: Path = DATA) -> list[RealBug]:
    rows = json.loads(path.read_text("utf-8"))["cases"]
    return [
        RealBug(
            str(r["name"]),
            str(r["repo"]),
            str(r["fix"]),
            str(r["language"]),
            tuple(str(f) for f in r["files"]),
            {str(p): sorted(int(n) for n in lines) for p, lines in r.get("gold", {}).items()},
            Rubric.from_json(r["rubric"]),
        )
        for r in rows
    ]


def mirror_of(mirrors: Path, repo: str) -> Path:
    """The git directory of `repo` under `mirrors`: `owner+name/repo` (as the research mirror lays
    them out), `owner+name`, `owner/name.git`, `owner/name` or `name.git`."""
    owner, name = repo.split("/", 1)
    for candidate in (
        mirrors / f"{owner}+{name}" / "repo",
        mirrors / f"{owner}+{name}",
        mirrors / f"{owner}+{name}.git",
        mirrors / owner / f"{name}.git",
        mirrors / owner / name,
        mirrors / f"{name}.git",
    ):
        if (candidate / "HEAD").is_file() or (candidate / ".git").exists():
            return candidate
    raise FileNotFoundError(f"no mirror of {repo} under {mirrors}")


def _git(git_dir: Path, *args: str, binary: bool = False) -> bytes:
    return subprocess.run(
        ["git", "--git-dir", str(git_dir if not (git_dir / ".git").exists() else git_dir / ".git"), *args],
        capture_output=True,
        check=True,
        timeout=120,
        env={**os.environ, "GIT_CONFIG_NOSYSTEM": "1"},
    ).stdout


def blob(git_dir: Path, commit: str, path: str) -> str | None:
    """The file at `commit`, or None where it does not exist."""
    try:
        return _git(git_dir, "show", f"{commit}:{path}").decode("utf-8")
    except subprocess.CalledProcessError:
        return None


def tree_files(git_dir: Path, commit: str) -> dict[str, bytes]:
    """Every file of `commit`'s tree (symlinks and submodules left out)."""
    data = _git(git_dir, "archive", "--format=tar", commit)
    files: dict[str, bytes] = {}
    with tarfile.open(fileobj=io.BytesIO(data)) as archive:
        for member in archive.getmembers():
            if member.isfile():
                handle = archive.extractfile(member)
                if handle is not None:
                    files[member.name] = handle.read()
    return files


def sides(
    bug: RealBug, mirrors: Path
) -> tuple[dict[str, bytes], dict[str, str | None], dict[str, str | None]]:
    """The parent's tree, and the fix's files as the fix left them (`fixed`) and before it (`buggy`)."""
    git_dir = mirror_of(mirrors, bug.repo)
    parent = f"{bug.fix}^"
    tree = tree_files(git_dir, parent)
    fixed = {path: blob(git_dir, bug.fix, path) for path in bug.files}
    buggy = {path: blob(git_dir, parent, path) for path in bug.files}
    return tree, fixed, buggy


def touched_lines(patch: str) -> set[int]:
    """New-side lines a patch touches: the lines it adds, and around a run of rows that only deletes,
    the lines on either side of it (a comment there is a comment on what was taken out)."""
    lines: set[int] = set()
    current = 0
    run: list[str] = []  # the -/+ rows since the last context row

    def close() -> None:
        if run and not any(r.startswith("+") for r in run):
            lines.update(n for n in (current - 1, current) if n >= 1)
        run.clear()

    for row in patch.splitlines():
        match = re.match(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,\d+)? @@", row)
        if match:
            close()
            current = int(match.group(1))
        elif row.startswith(("+++", "---", "\\")):
            continue
        elif row.startswith("+"):
            lines.add(current)
            current += 1
            run.append(row)
        elif row.startswith("-"):
            run.append(row)
        else:
            close()
            current += 1
    close()
    return lines


def build_real_repo(bug: RealBug, repo: Path, mirrors: Path, git: Callable[..., str]) -> tuple[str, str]:
    """The case as a two-commit repository at `repo` (see the module's docstring): base and head."""
    tree, fixed, buggy = sides(bug, mirrors)
    repo.mkdir(parents=True, exist_ok=True)
    git(repo, "init", "-q", "-b", "main")
    for path, data in tree.items():
        target = repo / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    _put(repo, fixed)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--no-verify", "-m", f"{bug.repo} as fixed by {bug.fix[:12]}")
    base = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "checkout", "-q", "-b", "change")
    _put(repo, buggy)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--no-verify", "-m", "the change under review")
    return base, git(repo, "rev-parse", "HEAD").strip()


def _put(repo: Path, files: dict[str, str | None]) -> None:
    for path, text in files.items():
        target = repo / path
        if text is None:
            target.unlink(missing_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, "utf-8")
