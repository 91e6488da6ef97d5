"""What one `beam-bot action` run did, read back from its database, and how the workflow is told:
the log's last line, the job's step summary (`GITHUB_STEP_SUMMARY`) and the step's outputs
(`GITHUB_OUTPUT`).

Only rows this run made count: the database also holds what was carried from the last run (a held
push's run, the findings ledger), so rows are taken from `since`, the moment the run began, on.

https://docs.github.com/actions/writing-workflows/choosing-what-your-workflow-does/workflow-commands-for-github-actions#adding-a-job-summary
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import select

from bot.app.jobs.schema import effects, jobs, review_findings, runs
from bot.app.jobs.store import Store
from bot.app.limits.policy import Prices
from bot.beam.errors import BeamError

log = logging.getLogger("beam.action")

UNFINISHED = "BEM-393"
NO_STATE = "BEM-394"
FAILED_STATES = ("failed", "dead")
# The step's outputs (action.yml `outputs:`), one word each for `outcome`.
SUCCESS, FAILURE, SKIPPED, CANCELLED = "success", "failure", "skipped", "cancelled"


@dataclass(frozen=True, slots=True)
class RunRow:
    """One run of this workflow run, as its row records it."""

    skill: str
    status: str
    code: str | None
    message: str | None
    model: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float | None = None


@dataclass(frozen=True, slots=True)
class Finding:
    """One inline finding this run posted (the findings ledger's row)."""

    path: str
    line: int
    severity: str
    claim: str


@dataclass(frozen=True, slots=True)
class Outcome:
    """What the run did: its runs, the jobs that failed for good, the jobs left when time ran out,
    a problem with the pull request's state, and what a review posted."""

    runs: list[RunRow] = field(default_factory=list)
    failed_jobs: list[str] = field(default_factory=list)
    unfinished: int = 0
    state_problem: BeamError | None = None
    review_url: str = ""
    findings: list[Finding] = field(default_factory=list)
    time_limit: float = 0.0

    @property
    def ok(self) -> bool:
        return (
            not self.failed_jobs
            and not self.unfinished
            and self.state_problem is None
            and all(r.status != "failed" for r in self.runs)
        )

    @property
    def word(self) -> str:
        """The `outcome` output."""
        return SUCCESS if self.ok else FAILURE


async def read_outcome(
    store: Store,
    since: float,
    prices: Prices,
    *,
    unfinished: int,
    state_problem: BeamError | None,
    time_limit: float,
) -> Outcome:
    """The rows of this run (made at or after `since`), with the review it posted and its findings."""
    async with store.read() as conn:
        done = await conn.execute(
            select(
                runs.c.skill,
                runs.c.status,
                runs.c.error_code,
                runs.c.error_message,
                runs.c.model_used,
                runs.c.input_tokens,
                runs.c.output_tokens,
            )
            .where(runs.c.created_at >= since)
            .order_by(runs.c.created_at)
        )
        rows = []
        for skill, status, code, message, model, given, got in done.all():
            given, got = int(given or 0), int(got or 0)
            rows.append(RunRow(skill, status, code, message, model, given, got, prices.cost(given, got)))
        bad = await conn.execute(
            select(jobs.c.kind, jobs.c.last_error).where(
                jobs.c.state.in_(FAILED_STATES), jobs.c.created_at >= since
            )
        )
        failed = [f"the {kind} job failed: {error or 'no error was recorded'}" for kind, error in bad.all()]
        posted = await conn.execute(
            select(effects.c.result)
            .where(effects.c.kind == "review", effects.c.state == "done", effects.c.created_at >= since)
            .order_by(effects.c.updated_at)
        )
        urls = [str(r.get("html_url") or "") for (r,) in posted.all() if isinstance(r, dict)]
        found = await conn.execute(
            select(
                review_findings.c.path,
                review_findings.c.line,
                review_findings.c.severity,
                review_findings.c.claim,
            )
            .where(review_findings.c.created_at >= since)
            .order_by(review_findings.c.id)
        )
        findings = [Finding(p, int(n), s, c) for p, n, s, c in found.all()]
    return Outcome(
        rows,
        failed,
        unfinished,
        state_problem,
        next((u for u in reversed(urls) if u), ""),
        findings,
        time_limit,
    )


def write_outputs(env: Mapping[str, str], values: Mapping[str, str]) -> None:
    """Appends the step's outputs to `GITHUB_OUTPUT` (nothing outside Actions). Each value goes in
    GitHub's multiline form under a random delimiter, so no value can end its own or start another."""
    path = env.get("GITHUB_OUTPUT")
    if not path:
        return
    lines = []
    for name, value in values.items():
        delimiter = f"beam_{secrets.token_hex(8)}"
        lines.append(f"{name}<<{delimiter}\n{value}\n{delimiter}\n")
    _append(Path(path), "".join(lines))


def write_summary(env: Mapping[str, str], markdown: str) -> None:
    """Appends the job's step summary to `GITHUB_STEP_SUMMARY` (nothing outside Actions)."""
    path = env.get("GITHUB_STEP_SUMMARY")
    if path:
        _append(Path(path), markdown.rstrip("\n") + "\n")


def _append(path: Path, text: str) -> None:
    """The runner's file; one that cannot be written loses the summary, never the run's exit code."""
    try:
        with path.open("a", encoding="utf-8") as out:
            out.write(text)
    except OSError as error:
        log.warning("could not write %s: %s", path, error)
