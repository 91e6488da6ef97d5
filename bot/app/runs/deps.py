"""What a run is given and what it comes to: its deps (built once per process), its
outcome, and the run id, derived from the delivery so every attempt of one command is the same run."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from bot.app.effects.crash import NO_CRASH, CrashPoints
from bot.app.github.timeouts import in_flight_seconds
from bot.app.limits.policy import Policy

if TYPE_CHECKING:  # annotations only: `beam-bot run` takes this module's limits without the App's store
    from bot.app.checks.flow import Checker
    from bot.app.effects.writer import GitHubEffects
    from bot.app.git.checkout import Checkouts
    from bot.app.github.client import InstallationClient
    from bot.app.github.identity import BotIdentity
    from bot.app.jobs.queue import Job
    from bot.app.jobs.store import Store
    from bot.beam.completion import CompletionClient
    from bot.beam.types import AgentResult

RUN_NAMESPACE = uuid.UUID("5b0e3a52-8f0d-4c55-9a57-4be2a7d1c0de")
MAX_PULL_FILES = 300
MAX_KNOWN_PATHS = 20_000
# Skills that never change the tree: a retry may continue their conversation on a fresh checkout.
RESUMABLE_SKILLS = frozenset({"review", "summarize", "commit-notes"})
# Skills that only read: their tools read the head commit's objects, and no work tree is written for
# them (issue 43, bot/beam/commit_tree.py). `consume` is `/beam ask`'s skill.
READING_SKILLS = frozenset({"review", "summarize", "commit-notes", "ask", "consume"})
DEFAULT_MAX_FETCH_BYTES = 256 * 1024 * 1024
# A run stops this long before the worker's hard job timeout, so it can still write its final comment.
FINAL_COMMENT_MARGIN = 60.0


def run_timeout(job_timeout: float) -> float:
    """How long a run may work under a job timeout: the margin for its final comment taken off, at
    least 30 s. The App's worker and `beam-bot run` both stop a run here."""
    return max(30.0, job_timeout - FINAL_COMMENT_MARGIN)


def run_id_for(job: Job) -> str:
    """Stable per delivery, so every attempt of one command is the same run."""
    basis = f"delivery:{job.delivery_id}" if job.delivery_id else f"job:{job.id}"
    return str(uuid.uuid5(RUN_NAMESPACE, basis))


@dataclass(frozen=True)
class RunDeps:
    """What a run needs from the process; built once by the app's lifespan."""

    store: Store
    checkouts: Checkouts
    llm: CompletionClient
    installation_token: Callable[[int], Awaitable[str]]
    identity: BotIdentity
    run_timeout: float = 600.0
    policy: Policy = field(default_factory=Policy)  # costs and limits (issue 11)
    # Told of every finished run: skill, status, seconds, prompt and completion tokens (for /metrics).
    observe: Callable[[str, str, float, int, int], None] | None = None
    crash: CrashPoints = NO_CRASH
    # How long a write begun by a dead attempt may still land at GitHub (effects/writer.py).
    in_flight: float = in_flight_seconds()  # effects/writer.py's IN_FLIGHT_SECONDS, without its imports
    # A fresh installation token after GitHub refused the cached one to git (a 401), if given.
    refresh_token: Callable[[int], Awaitable[str]] | None = None
    # Runs the repositories' checks in the jail (docs/checks.md); None: this process runs none.
    checks: Checker | None = None
    # How long a run that GitHub fails with 5xx or no answer waits for it (BEAM_GITHUB_OUTAGE_WAIT,
    # runs/outage.py); 0: it fails at once.
    outage_wait: float = 1800.0
    # The blob bytes one run may fetch into a partial mirror (BEAM_MAX_FETCH_BYTES, git/blob_budget.py).
    max_fetch_bytes: int = DEFAULT_MAX_FETCH_BYTES

    def effects(self, gh: InstallationClient) -> GitHubEffects:
        """The one path for this job's writes on GitHub (exactly once, ARCHITECTURE.md section 10)."""
        # Imported here, on the App's path: their SQLAlchemy stays out of `beam-bot run`'s start.
        from bot.app.effects.journal import Journal
        from bot.app.effects.writer import GitHubEffects

        return GitHubEffects(gh, Journal(self.store), self.crash, in_flight=self.in_flight)

    def refresher(self, installation_id: int) -> Callable[[], Awaitable[str]] | None:
        """How git gets a fresh token for this installation after a 401, if the process can."""
        refresh = self.refresh_token
        if refresh is None:
            return None

        async def fresh() -> str:
            return await refresh(installation_id)

        return fresh


@dataclass
class Outcome:
    answer: str
    notes: list[str] = field(default_factory=list)
    result: AgentResult | None = None
    held: bool = False  # the run ended by asking for approval (its status is `interrupted`)
    cancelled_by: str | None = None  # `/beam cancel` stopped it (its status is `cancelled`)
