"""Rows for the dashboard's tests: runs, findings and held pushes written straight into the tables,
with every figure the page should show derivable by hand from the arguments."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, insert

from bot.app.jobs.schema import pending_pushes, review_findings, runs

DAY = 86400.0
SEEDED_AT = 1_800_000_000.0  # "now" of the story the query tests read (tests/app/dashboard `seeded_store`)
_ids = itertools.count(1)


@dataclass(frozen=True)
class SeedRun:
    repo: str
    number: int | None
    skill: str
    status: str
    age_days: float
    input_tokens: int = 0
    output_tokens: int = 0
    seconds: float | None = 10.0
    error_code: str | None = None
    error_message: str | None = None


def run_row(run: SeedRun, now: float) -> dict[str, Any]:
    created = now - run.age_days * DAY
    n = next(_ids)
    return {
        "id": f"run-{n:06d}",
        "repo": run.repo,
        "number": run.number,
        "skill": run.skill,
        "requester": "octocat",
        "status": run.status,
        "created_at": created,
        "started_at": created if run.seconds is not None else None,
        "finished_at": created + run.seconds if run.seconds is not None else None,
        "installation_id": 1,
        "input_tokens": run.input_tokens,
        "output_tokens": run.output_tokens,
        "error_code": run.error_code,
        "error_message": run.error_message,
        "command_url": None if run.number is None else f"https://github.com/{run.repo}/pull/{run.number}",
    }


def finding_row(
    repo: str, number: int, state: str, age_days: float, left_days: float, now: float
) -> dict[str, Any]:
    """A finding posted `age_days` ago that left `open` `left_days` ago (ignored while open)."""
    n = next(_ids)
    return {
        "repo": repo,
        "number": number,
        "comment_id": n,
        "path": "a.py",
        "line": 1,
        "line_text": "x = 1",
        "claim": f"claim {n}",
        "severity": "warning",
        "head_sha": "a" * 40,
        "state": state,
        "created_at": now - age_days * DAY,
        "updated_at": now - (left_days if state != "open" else age_days) * DAY,
    }


def held_row(repo: str, number: int, comment_id: int, now: float, state: str = "pending") -> dict[str, Any]:
    n = next(_ids)
    return {
        "id": f"push{n:04d}",
        "repo": repo,
        "number": number,
        "commit_sha": f"{n:040x}",
        "branch": f"beam/pr-{number}/author-{n:08x}",
        "requester": "octocat",
        "state": state,
        "approval_comment_id": comment_id,
        "created_at": now - DAY,
        "expires_at": now + 6 * DAY,
    }


def write(
    conn: Connection,
    run_rows: list[dict[str, Any]],
    findings: list[dict[str, Any]],
    held: list[dict[str, Any]],
) -> None:
    if run_rows:
        conn.execute(insert(runs), run_rows)
    if findings:
        conn.execute(insert(review_findings), findings)
    if held:
        conn.execute(insert(pending_pushes), held)


def standard(
    now: float, repo: str = "octo-org/widgets", other: str = "octo-org/secret"
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """The story every dashboard test tells: in `repo`, within 7 days three review runs (one failed)
    and one author run; 20 days ago two more reviews; 60 days ago one. Six findings (two fixed, one
    dismissed, three open) and one held push. `other` has one run and one finding of its own."""
    plan = [
        SeedRun(repo, 1, "review", "succeeded", 1, 1000, 200, 30.0),
        SeedRun(repo, 1, "review", "succeeded", 2, 3000, 600, 50.0),
        SeedRun(repo, 2, "review", "failed", 3, 500, 0, 5.0, "BEM-380", "GitHub did not answer\nmore"),
        SeedRun(repo, 2, "author", "succeeded", 4, 10000, 2000, 120.0),
        SeedRun(repo, 3, "review", "succeeded", 20, 2000, 400, 40.0),
        SeedRun(repo, 3, "review", "succeeded", 21, 2000, 400, 40.0),
        SeedRun(repo, 4, "review", "succeeded", 60, 4000, 800, 60.0),
        SeedRun(other, 9, "review", "succeeded", 1, 7777, 777, 10.0),
    ]
    run_rows = [run_row(r, now) for r in plan]
    findings = [
        finding_row(repo, 1, "fixed", 2, 1, now),
        finding_row(repo, 1, "fixed", 2, 1.5, now),
        finding_row(repo, 2, "dismissed", 3, 2, now),
        finding_row(repo, 2, "open", 3, 0, now),
        finding_row(repo, 3, "open", 20, 0, now),
        finding_row(repo, 4, "open", 60, 0, now),
        finding_row(other, 9, "open", 1, 0, now),
    ]
    held = [held_row(repo, 2, 555, now), held_row(repo, 1, 556, now, state="pushed")]
    return run_rows, findings, held
