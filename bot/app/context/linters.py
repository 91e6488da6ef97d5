"""Linters as evidence for a review: ruff on Python, shellcheck on shell, on the changed files of the
run's checkout; only their findings on changed lines are kept, and the model gets them as data.

A linter only parses the files: nothing of the repository runs. It never reads the repository's
configuration (ruff `--isolated`, shellcheck `--norc`, no `-x` so no sourced file is followed), loads no
plugin, gets an environment without the bot's variables, and is killed past its time or output cap. A
linter that is not installed, times out or fails is skipped and named; it never fails the review.
Files are passed only when they resolve inside the checkout (a symlink out of it is not read).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import Process

from bot.beam.errors import BeamError
from bot.beam.sandbox import SandboxRoot

log = logging.getLogger("beam.reviews")

TIME_CAP = 20.0  # seconds per linter
OUTPUT_CAP = 2 * 1024 * 1024  # bytes of output per linter; past it the linter is stopped and skipped
MAX_FINDINGS = 40  # kept for the prompt, across linters
MAX_FILES = 200  # per linter
# Ruff's default rules plus bugbear and pylint's errors: likely bugs, not style.
RUFF_SELECT = "E4,E7,E9,F,B,PLE"
SHELL_EXTENSIONS = (".sh", ".bash", ".ksh")
_SHELLS = ("sh", "bash", "ksh", "dash")


@dataclass(frozen=True, slots=True)
class LintFinding:
    tool: str
    path: str
    line: int
    code: str
    message: str

    def describe(self) -> str:
        return f"{self.path}:{self.line}: {self.tool} {self.code}: {self.message}"


@dataclass
class LintReport:
    findings: list[LintFinding] = field(default_factory=list)
    ran: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # not installed
    failed: list[str] = field(default_factory=list)  # timed out, too much output, unreadable output


def _binary(name: str) -> str | None:
    """The linter next to this interpreter (the packages install it there), else on PATH."""
    beside = Path(sys.executable).parent / name
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which(name)


def _env() -> dict[str, str]:
    """No variable of the bot's (security invariant 6): a path to find the system's tools, a locale."""
    return {"PATH": os.defpath, "LANG": "C.UTF-8", "HOME": "/nonexistent"}


class _Failed(Exception):
    pass


async def _run(argv: Sequence[str], cwd: Path, stdin: bytes | None = None) -> bytes:
    """The linter's standard output; raises _Failed past the time or output cap."""
    chunks: list[bytes] = []
    size = 0
    process: Process = await anyio.open_process(
        list(argv),
        cwd=cwd,
        env=_env(),
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        with anyio.move_on_after(TIME_CAP) as timer:
            if stdin is not None and process.stdin is not None:
                await process.stdin.send(stdin)
                await process.stdin.aclose()
            assert process.stdout is not None
            async for chunk in process.stdout:
                size += len(chunk)
                if size > OUTPUT_CAP:
                    raise _Failed("too much output")
                chunks.append(chunk)
            await process.wait()
        if timer.cancelled_caught:
            raise _Failed(f"over {TIME_CAP:.0f}s")
    finally:
        if process.returncode is None:
            process.kill()
        with anyio.CancelScope(shield=True):
            await process.aclose()  # waits, and closes the pipes (left open, they warn at collection)
    return b"".join(chunks)


def _inside(root: SandboxRoot, rel: str) -> bool:
    if any(part.lower() == ".git" for part in Path(rel).parts):
        return False
    try:
        return root.resolve(rel).is_file()
    except (BeamError, OSError):
        return False


def _is_shell(root: SandboxRoot, rel: str) -> bool:
    if rel.endswith(SHELL_EXTENSIONS):
        return True
    if "." in Path(rel).name:
        return False
    try:
        with root.resolve(rel).open("rb") as handle:
            first = handle.readline(200).decode("utf-8", "replace")
    except (BeamError, OSError):
        return False
    words = first[2:].split() if first.startswith("#!") else []
    program = words[0].rsplit("/", 1)[-1] if words else ""
    if program == "env" and len(words) > 1:
        program = words[1]
    return program in _SHELLS


def parse_ruff(output: bytes) -> list[LintFinding]:
    found: list[LintFinding] = []
    for item in json.loads(output or b"[]"):
        location = item.get("location") or {}
        code = item.get("code") or "syntax-error"
        path = str(item.get("filename", ""))
        found.append(
            LintFinding("ruff", path, int(location.get("row", 0)), code, str(item.get("message", "")))
        )
    return found


def parse_shellcheck(output: bytes) -> list[LintFinding]:
    data: Any = json.loads(output or b"{}")
    found: list[LintFinding] = []
    for item in data.get("comments", []) if isinstance(data, dict) else []:
        code = f"SC{item.get('code')}"
        found.append(
            LintFinding(
                "shellcheck", str(item.get("file")), int(item.get("line", 0)), code, str(item.get("message"))
            )
        )
    return found


async def _lint(
    name: str, argv: list[str], files: list[str], parse: Any, cwd: Path, report: LintReport
) -> list[LintFinding]:
    binary = _binary(name)
    if binary is None:
        report.missing.append(name)
        return []
    try:
        output = await _run([binary, *argv, "--", *files[:MAX_FILES]], cwd)
        found: list[LintFinding] = parse(output)
    except (_Failed, OSError, ValueError, AttributeError, TypeError) as error:
        log.warning("%s skipped: %s", name, error)
        report.failed.append(name)
        return []
    report.ran.append(name)
    root = str(cwd)  # a run tree's path, already resolved
    out = []
    for finding in found:  # ruff names files absolutely, shellcheck as given
        path = finding.path
        if path.startswith("/"):
            path = path[len(root) :].lstrip("/") if path.startswith(root + "/") else path
        out.append(
            LintFinding(finding.tool, Path(path).as_posix(), finding.line, finding.code, finding.message)
        )
    return out


def _all(name: str) -> bool:
    return True


async def run_linters(
    root: SandboxRoot, changed: Mapping[str, set[int]], *, enabled: Callable[[str], bool] = _all
) -> LintReport:
    """Lint the changed files of the checkout at `root`; keep what lands on `changed` lines.
    `enabled(name)`: the repository's `review.linters` for that linter."""
    report = LintReport()
    paths = [p for p in sorted(changed) if changed[p]]
    python = [p for p in paths if p.endswith((".py", ".pyi")) and _inside(root, p)]
    shell = [p for p in paths if _inside(root, p) and _is_shell(root, p)]
    found: list[LintFinding] = []
    if python and enabled("ruff"):
        argv = ["check", "--isolated", "--no-cache", "--exit-zero", "--output-format", "json"]
        found += await _lint("ruff", [*argv, "--select", RUFF_SELECT], python, parse_ruff, root.path, report)
    if shell and enabled("shellcheck"):
        argv = ["--norc", "--format", "json1", "--severity", "warning"]
        found += await _lint("shellcheck", argv, shell, parse_shellcheck, root.path, report)
    kept = [f for f in found if f.line in changed.get(f.path, set())]
    report.findings = sorted(kept, key=lambda f: (f.path, f.line, f.code))[:MAX_FINDINGS]
    return report


def lint_skipped(report: LintReport | None) -> list[str]:
    """The linters a review meant to run and could not, each with why, for its summary."""
    if report is None:
        return []
    return [f"{name} (not installed)" for name in report.missing] + [
        f"{name} (failed or over its cap)" for name in report.failed
    ]


async def ruff_syntax_errors(path: str, text: str, cwd: Path) -> int | None:
    """How many syntax errors ruff finds in `text` as file `path` (None: ruff could not say)."""
    binary = _binary("ruff")
    if binary is None:
        return None
    argv = [binary, "check", "--isolated", "--no-cache", "--exit-zero", "--output-format", "json"]
    argv += ["--select", "E9", "--stdin-filename", path, "-"]
    try:
        found = parse_ruff(await _run(argv, cwd, stdin=text.encode()))
    except (_Failed, OSError, ValueError, AttributeError, TypeError):
        return None
    return sum(1 for f in found if f.code in {"syntax-error", "invalid-syntax"} or f.code.startswith("E9"))
