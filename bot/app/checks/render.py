"""The words of checks: the section of the approval comment, the refusals of an approval that
`checks_required` forbids, the `beam / checks` check run, and what `run_checks` tells the model.

Every check shows as passed, failed or timed out with its duration; a failing one also shows the
tail of its output (already redacted by `flow.Checker`).
"""

from __future__ import annotations

from typing import Any

from bot.app import markdown as md
from bot.app.checks.flow import CheckReport

CHECK_RUN_NAME = "beam / checks"
COMMENT_TAIL_LINES = 40
COMMENT_TAIL_CHARS = 4000
MODEL_TAIL_CHARS = 4000
CHECK_RUN_TEXT_CHARS = 60_000  # GitHub takes 65,535 characters of a check run's text

_STATUS = {
    "passed": "✅ passed",
    "failed": "❌ failed",
    "timed_out": "⌛ timed out",
    "error": "⚠️ could not run",
}


def _tail(text: str, lines: int, chars: int) -> str:
    # Shown only in `markdown.fenced`, which keeps a `<!--` in it from hiding text or posing as a marker.
    return "\n".join(text.rstrip("\n").splitlines()[-lines:])[-chars:]


def _seconds(value: float) -> str:
    return f"{value:.1f} s" if value < 60 else f"{int(value // 60)} min {int(value % 60)} s"


def _status(status: str, exit_code: int | None) -> str:
    word = _STATUS.get(status, status)
    return f"{word} (exit {exit_code})" if status == "failed" and exit_code is not None else word


def headline(report: CheckReport) -> str:
    total = len(report.outcomes)
    if report.off is not None:
        return f"checks are off on this server: {report.off}"
    bad = len(report.failing)
    if not bad:
        return f"all {total} checks passed" if total != 1 else "the check passed"
    return f"{bad} of {total} checks did not pass"


def _table(report: CheckReport) -> str:
    rows = [
        f"| {md.code(o.name, table=True)} | {_status(o.status, o.exit_code)} | {_seconds(o.duration_s)} |"
        for o in report.outcomes
    ]
    return "| check | result | time |\n|---|---|---|\n" + "\n".join(rows)


def _tails(report: CheckReport, lines: int, chars: int) -> str:
    blocks = []
    for outcome in report.failing:
        tail = _tail(outcome.output_tail, lines, chars) or "(no output)"
        blocks.append(
            f"<details><summary>Output of <code>{md.html(outcome.name)}</code> (its end)</summary>\n\n"
            f"{md.fenced(tail, 'text')}\n\n</details>"
        )
    return "\n\n".join(blocks)


def section(report: CheckReport | None) -> str:
    """The checks part of the approval comment ("" when the repository has no checks)."""
    if report is None:
        return ""
    where = f"`{report.sha}`" if report.sha else "this tree"
    if report.off is not None:
        return f"**Checks**: off on this server ({report.off}); nothing was run on commit {where}."
    text = f"**Checks** on exactly commit {where}: {headline(report)}.\n\n{_table(report)}"
    tails = _tails(report, COMMENT_TAIL_LINES, COMMENT_TAIL_CHARS)
    return f"{text}\n\n{tails}" if tails else text


def pushed_note(report: CheckReport, check_run_url: str | None) -> str:
    """On the approval comment once pushed: what the checks said, and where GitHub shows it."""
    where = f" ([`{CHECK_RUN_NAME}`]({check_run_url}) on the commit)" if check_run_url else ""
    return f"Checks: {headline(report)}{where}."


def why_blocked(report: CheckReport) -> str:
    if report.off is not None:
        return f"its checks could not run ({report.off})"
    names = ", ".join(md.code(o.name) for o in report.failing) or "a check"
    return f"{names} did not pass"


def not_offered(report: CheckReport) -> str:
    """Instead of how to answer, on a commit `checks_required` keeps from approval."""
    return (
        f"🚫 **Not offered for approval**: this repository requires its checks to pass "
        f"(`checks_required: true` in `.github/beam.yml`), and {why_blocked(report)}. Nothing can "
        "approve this commit; ask for a fix with `/beam author`, or 👎 to close it."
    )


def approval_refused(login: str, push_id: str, report: CheckReport) -> str:
    return (
        f"@{login}, held push `{push_id}` cannot be approved: {why_blocked(report)}, and this "
        "repository requires its checks to pass (`checks_required: true`; BEM-361)."
    )


# -- the `beam / checks` check run on the pushed commit ---------------------------------------------


def conclusion(report: CheckReport) -> str:
    if report.off is not None:
        return "neutral"
    return "success" if report.passed else "failure"


def check_run_output(report: CheckReport, push_id: str, approvers: list[str]) -> dict[str, str]:
    """The check run's title, summary and text: what the maintainer saw when they approved."""
    by = ", ".join(f"@{a}" for a in approvers) or "a maintainer"
    summary = (
        f"Run by beam-bot in a jail on this exact commit before it was pushed; held push `{push_id}` "
        f"was approved by {by} with these results."
    )
    if report.off is not None:
        return {"title": "Checks were off", "summary": f"{summary}\n\n{section(report)}"}
    text = f"{_table(report)}\n\n{_tails(report, 200, 20_000)}".strip()
    return {
        "title": headline(report)[:1].upper() + headline(report)[1:],
        "summary": summary,
        "text": text[:CHECK_RUN_TEXT_CHARS],
    }


# -- what `run_checks` returns to the model -------------------------------------------------------

RUN_CHECKS_DESCRIPTION = (
    "Run the repository's own checks (its tests and linters, as `.github/beam.yml` names them) on "
    "your current files, in a sandbox without network. Returns each check's status, exit code, "
    "duration and the end of its output, so you can fix what fails before you push. Each call counts "
    "against the run's limit of check runs."
)


def for_model(report: CheckReport, runs_left: int | None) -> dict[str, Any]:
    return {
        "all_passed": report.passed,
        "checks": [
            {
                "name": o.name,
                "status": o.status,
                "exit_code": o.exit_code,
                "seconds": round(o.duration_s, 2),
                "output_tail": o.output_tail[-MODEL_TAIL_CHARS:],
            }
            for o in report.outcomes
        ],
        "runs_left": runs_left,
    }


def cap_reached(cap: int) -> str:
    return f"this run may run the checks {cap} times and has used them all"
