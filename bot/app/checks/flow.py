"""The repository's checks as the app runs them: on a run's tree (for the author skill) and on the
exact commit of a held push, with the results kept so a retry never runs them twice.

`Checker` turns `.github/beam.yml`'s `checks` and the server's settings into one call of the jail
(`jail.run_checks`); where the jail cannot be built (`jail.jail_status()`), checks are off and the
report says why, and nothing runs. `check_commit` checks a pinned commit in a fresh tree of that
sha (never the run's tree, which may hold more than the commit), and records the report in the
effects journal under the run and the sha: a retried job finds it there and reuses it.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from bot.app.checks.jail import CheckOutcome, CheckSpec, JailLimits, JailStatus, jail_status, run_checks
from bot.app.checks.redaction import redact
from bot.app.effects.journal import Journal
from bot.app.git.checkout import Checkouts
from bot.app.repo_config import RepoConfig
from bot.app.settings import Settings
from bot.beam.errors import BeamError

log = logging.getLogger("beam.checks")

FAILING = ("failed", "timed_out", "error")
MAX_TAIL_CHARS = 64 * 1024  # of each check's output kept in the report (the jail keeps up to its cap)


@functools.cache
def jail_state() -> JailStatus:
    """Whether the jail can be built on this machine; asked once per process (it starts bubblewrap).
    A probe that breaks leaves checks off: it must never keep the server from starting."""
    try:
        return jail_status()
    except Exception as exc:  # whatever broke, nothing may run unjailed
        log.exception("the checks jail could not be probed")
        return JailStatus(False, f"the jail could not be probed ({type(exc).__name__}), so checks are off")


def checks_detail() -> str:
    """The `/readyz` line for checks."""
    state = jail_state()
    if not state.available:
        return f"off: {state.reason}"
    return "on (bubblewrap jail; one memory cgroup cap per check)"


@dataclass(frozen=True, slots=True)
class CheckReport:
    """What the checks said about one tree: each check's outcome, or why none ran (`off`)."""

    sha: str | None
    outcomes: tuple[CheckOutcome, ...] = ()
    off: str | None = None
    required: bool = False

    @property
    def passed(self) -> bool:
        return self.off is None and all(o.status == "passed" for o in self.outcomes)

    @property
    def failing(self) -> list[CheckOutcome]:
        return [o for o in self.outcomes if o.status in FAILING]

    @property
    def blocks(self) -> bool:
        """With `checks_required`, a commit whose checks did not all pass is not offered."""
        return self.required and not self.passed

    def to_json(self) -> dict[str, Any]:
        return {
            "sha": self.sha,
            "off": self.off,
            "required": self.required,
            "outcomes": [dataclasses.asdict(o) for o in self.outcomes],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CheckReport:
        names = {f.name for f in dataclasses.fields(CheckOutcome)}
        outcomes = tuple(
            CheckOutcome(**{k: v for k, v in item.items() if k in names}) for item in data.get("outcomes", [])
        )
        return cls(data.get("sha"), outcomes, data.get("off"), bool(data.get("required")))


def report_of(result: dict[str, Any]) -> CheckReport | None:
    """The report a held push's row keeps in its `result` (None: the repository has no checks)."""
    stored = result.get("checks")
    return CheckReport.from_json(stored) if isinstance(stored, dict) else None


class Checker:
    """Runs a repository's checks in the jail under the server's settings; one per process."""

    def __init__(self, settings: Settings, *, cache_root: Path, scratch_root: Path) -> None:
        self.settings = settings
        self.cache_root = cache_root
        self.scratch_root = scratch_root

    @property
    def status(self) -> JailStatus:
        return jail_state()

    def limits(self, config: RepoConfig) -> JailLimits:
        timeout = min(float(config.checks_seconds), self.settings.max_check_seconds)
        return JailLimits(timeout_s=timeout)

    def cache_dir(self, repo_full_name: str) -> Path | None:
        """The repository's own cache directory, when the operator made one (the jail sees it read-only)."""
        owner, _, name = repo_full_name.partition("/")
        path = self.cache_root / owner.lower() / name.lower()
        return path if path.is_dir() else None

    async def run(self, tree: Path, config: RepoConfig, repo_full_name: str, sha: str | None) -> CheckReport:
        required = config.checks_required
        state = await anyio.to_thread.run_sync(jail_state)
        if not state.available:
            log.warning(
                "checks of %s did not run: the jail is unavailable (%s)", repo_full_name, state.reason
            )
            return CheckReport(sha, off=state.reason, required=required)
        specs = [CheckSpec(c.name, c.run) for c in config.checks]
        scratch = self.scratch_root / uuid.uuid4().hex
        try:
            outcomes = await run_checks(
                tree,
                specs,
                limits=self.limits(config),
                cache_dir=self.cache_dir(repo_full_name),
                setup=config.checks_setup,
                allowed_hosts=self.settings.checks_allowed_hosts,
                scratch=scratch,
            )
        except BeamError as error:  # the jail refused to start: each check "could not run", and why
            log.warning("checks of %s could not start: %s", repo_full_name, error)
            reason = f"{error.code}: {error.message} {error.detail or ''}".strip()
            outcomes = [CheckOutcome(c.name, "error", None, 0.0, reason, False) for c in specs]
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(lambda: shutil.rmtree(scratch, ignore_errors=True))
        kept = tuple(_redacted(o) for o in outcomes)
        log.info(
            "checks of %s at %s: %s",
            repo_full_name,
            (sha or "the run's tree")[:12],
            ", ".join(f"{o.name} {o.status} in {o.duration_s:.1f}s" for o in kept) or "none",
        )
        return CheckReport(sha, kept, required=required)


def _redacted(outcome: CheckOutcome) -> CheckOutcome:
    tail = outcome.output_tail
    cut = len(tail) > MAX_TAIL_CHARS
    tail = redact(tail[-MAX_TAIL_CHARS:])
    return dataclasses.replace(outcome, output_tail=tail, output_truncated=outcome.output_truncated or cut)


def checks_key(run_id: str, sha: str) -> str:
    return f"{run_id}:checks:{sha}"


async def check_commit(
    checker: Checker | None,
    checkouts: Checkouts,
    journal: Journal,
    *,
    run_id: str,
    repo_full_name: str,
    sha: str,
    branch: str,
    config: RepoConfig,
) -> CheckReport | None:
    """The checks of exactly `sha` (None when the repository has none), run at most once per run.

    The commit is checked out afresh from the mirror (it is pinned there first): the run's own tree
    may hold files the commit does not, and a check must see what would be pushed, nothing else.
    """
    if not config.checks:
        return None
    key = checks_key(run_id, sha)
    entry = await journal.lookup(key)
    if entry is not None and entry.state == "done":
        log.info("run %s: the checks of %s ran before; reusing them", run_id, sha[:12])
        return CheckReport.from_json(entry.result)
    if checker is None:
        report = CheckReport(sha, off="this server runs no checks", required=config.checks_required)
    elif not checker.status.available:
        report = await checker.run(Path("."), config, repo_full_name, sha)  # says why it is off
    else:
        tree_id = f"{run_id}.checks"
        await checkouts.discard_leftover(repo_full_name, tree_id)
        tree = await checkouts.create_run_tree(repo_full_name, tree_id, sha, branch)
        try:
            report = await checker.run(tree.path, config, repo_full_name, sha)
        finally:
            with anyio.CancelScope(shield=True):
                await tree.remove()
    await journal.record(key, "checks", report.to_json())
    return report
