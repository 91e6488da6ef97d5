"""Automatic reviews count against the same limits as commands (issue 11), through the same ledger.

A head that is about to be reviewed (past every skip, with a diff to read) is admitted like a command:
the installation's monthly token budget, then the per-user and per-repository runs of the UTC day,
on the same counters. A refused head runs nothing; the summary comment says which limit and when it
resets. The run id is derived from the pull request and the head, so a redelivered push, a retried
job or a second review of the same head is the same run and is counted once.

An automatic review counts as a run of the pull request's author. Commands count against whoever
asked for the run; an automatic review is asked for by the pull request itself, and counting its
author (not whoever sent the push) keeps the pushes of maintainers, "update branch" buttons and
merge-queue bots from using up their own command budget on other people's pull requests.

The run row (skill `auto_review`) gets the review's tokens, status and time, so `beam-bot usage` and
`/metrics` show what automatic reviews cost beside the commands.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

from sqlalchemy import update

from bot.app.github.client import PullRequest
from bot.app.jobs.schema import runs
from bot.app.jobs.store import Store
from bot.app.limits.ledger import ACTIVE, Ledger, OverLimit, RunRequest
from bot.app.limits.policy import effective
from bot.app.repo_config import RepoLimits
from bot.app.reviews.auto_review_run import AgentOutcome, Target
from bot.app.runs.run import RUN_NAMESPACE, RunDeps
from bot.beam.errors import CATALOG

SKILL = "auto_review"


def review_run_id(repo: str, number: int, head: str) -> str:
    """One run per reviewed head of a pull request."""
    return str(uuid.uuid5(RUN_NAMESPACE, f"auto-review:{repo}#{number}:{head}"))


def author_of(pull: PullRequest) -> str:
    return pull.user.login if pull.user is not None else "ghost"


async def end_abandoned(store: Store, repo: str, number: int, head: str, code: str) -> bool:
    """The run row of a head whose job gave up becomes `failed`, by compare-and-set: only a row still
    queued or running moves, so doing it again (the hook, then the sweep) changes nothing."""
    stmt = (
        update(runs)
        .where(runs.c.id == review_run_id(repo, number, head), runs.c.status.in_(ACTIVE))
        .values(
            status="failed", error_code=code, error_message=CATALOG[code].message, finished_at=time.time()
        )
    )
    async with store.write() as conn:
        return (await conn.execute(stmt)).rowcount == 1


@dataclass
class ReviewRun:
    """The ledger's side of one automatic review: its admission, then its end on the run row."""

    deps: RunDeps
    target: Target
    pull: PullRequest

    def __post_init__(self) -> None:
        self.run_id = review_run_id(self.target.repo, self.target.number, self.pull.head.sha)
        self.started = time.monotonic()

    async def admit(self, limits: RepoLimits) -> OverLimit | None:
        """Count the review, or say which limit refuses it (nothing is counted then)."""
        target, head = self.target, self.pull.head.sha
        request = RunRequest(
            run_id=self.run_id,
            repo=target.repo,
            number=target.number,
            skill=SKILL,
            requester=author_of(self.pull),
            installation_id=target.installation_id,
            command_key=f"{SKILL}\n{head}",
            command_url=self.pull.html_url,
            delivery_id=None,
            issue_url=self.pull.html_url,
            queue_job=False,
        )
        result = await Ledger(self.deps.store).admit(request, effective(self.deps.policy.limits, limits))
        if isinstance(result, OverLimit):
            return result
        await self.deps.store.update_run(self.run_id, status="running", started_at=time.time())
        return None

    async def end(self, status: str, outcome: AgentOutcome | None = None) -> None:
        """The run's final status; the ledger already added its tokens (RunUsage.record)."""
        seconds = time.monotonic() - self.started
        values: dict[str, object] = {
            "status": status,
            "finished_at": time.time(),
            "latency_ms": int(seconds * 1000),
        }
        usage = outcome.usage if outcome is not None else None
        if usage is not None and usage.model is not None:
            values["model_used"] = usage.model
        await self.deps.store.update_run(self.run_id, **values)
        if self.deps.observe is not None:
            tokens = (usage.input_tokens, usage.output_tokens) if usage is not None else (0, 0)
            self.deps.observe(SKILL, status, seconds, *tokens)
