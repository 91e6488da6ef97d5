"""The checks flow on real bubblewrap, real git and a real store: a held commit is checked in a fresh
tree of exactly its sha, secrets are cut from the output, the server caps the timeout, a retried job
reuses the recorded report, and `run_checks` stops at the run's cap (issue 22)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pygit2
import pytest

from bot.app.checks.flow import Checker, CheckReport, check_commit, checks_key, jail_state
from bot.app.checks.jail import CheckOutcome
from bot.app.checks.tool import checks_tool
from bot.app.effects.journal import Journal
from bot.app.git.checkout import Checkouts
from bot.app.jobs.store import Store
from bot.app.repo_config import RepoConfig, parse_repo_config
from bot.app.settings import Settings
from bot.beam.errors import BeamError
from bot.beam.types import AgentInput
from tests.support.db import db_url_fixture, pg_database_url_fixture, store_fixture  # noqa: F401
from tests.support.git_http import GitHttpServer

pytestmark = pytest.mark.anyio
TOKEN = "ghs_FlowTestToken0123456789abcdefghij"
REPO = "octo/calc"
FILES = {
    "calc.py": "def add(a, b):\n    return a + b\n",
    "test_calc.py": "import unittest\nfrom calc import add\n\n\nclass T(unittest.TestCase):\n"
    "    def test_add(self):\n        self.assertEqual(add(2, 2), 4)\n",
}
TESTS = "python -m unittest -q test_calc"


def needs_jail() -> None:
    state = jail_state()
    if not state.available:
        pytest.skip(f"the checks jail cannot be built here: {state.reason}")


def config(text: str) -> RepoConfig:
    result = parse_repo_config(text)
    assert result.ok, result.errors
    return result.config


@dataclass
class World:
    checkouts: Checkouts
    checker: Checker
    head: str
    url: str


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    needs_jail()
    with GitHttpServer(tmp_path / "srv", token=TOKEN) as server:
        head = server.seed(REPO, FILES)
        checkouts = Checkouts(tmp_path / "work", tmp_path / "runs")
        checker = Checker(
            Settings(_env_file=None, max_check_seconds=5),  # type: ignore[call-arg]
            cache_root=tmp_path / "cache",
            scratch_root=tmp_path / "scratch",
        )
        yield World(checkouts, checker, head, server.repo_url(REPO))


async def tree_with_commit(world: World, run_id: str, committed: str, dirty: str) -> tuple[Path, str, str]:
    """A run tree whose commit holds `committed` as calc.py while the file on disk says `dirty`."""
    await world.checkouts.update_mirror(REPO, world.url, TOKEN, ["refs/heads/main:refs/heads/main"])
    tree = await world.checkouts.create_run_tree(REPO, run_id, world.head, f"beam/pr-1/author-{run_id}")
    repo = pygit2.Repository(str(tree.path))
    (tree.path / "calc.py").write_text(committed)
    repo.index.add("calc.py")
    repo.index.write()
    sig = pygit2.Signature("beam-bot", "bot@example.com")
    sha = str(repo.create_commit("HEAD", sig, sig, "change", repo.index.write_tree(), [repo.head.target]))
    (tree.path / "calc.py").write_text(dirty)  # never committed: the held commit must not see it
    await world.checkouts.pin(REPO, tree, sha, f"p{run_id}")
    return tree.path, sha, tree.branch


BROKEN = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n"


async def test_the_held_commit_is_checked_not_the_dirty_tree(world: World, store: Store) -> None:
    cfg = config(f"checks:\n  - name: tests\n    run: {TESTS}\n")
    path, sha, branch = await tree_with_commit(world, "run1", committed=BROKEN, dirty=FIXED)
    journal = Journal(store)
    report = await check_commit(
        world.checker,
        world.checkouts,
        journal,
        run_id="run1",
        repo_full_name=REPO,
        sha=sha,
        branch=branch,
        config=cfg,
    )
    assert report is not None and report.sha == sha
    [outcome] = report.outcomes
    assert outcome.status == "failed" and outcome.exit_code == 1, outcome
    assert "AssertionError: 0 != 4" in outcome.output_tail
    assert not report.passed and not report.blocks  # not required: still offered
    # The run's own tree, with the fix on disk, passes: the two are different trees.
    on_tree = await world.checker.run(path, cfg, REPO, None)
    assert on_tree.passed and on_tree.outcomes[0].status == "passed"
    # The fresh tree of the commit is gone again.
    assert not world.checkouts.run_path(REPO, "run1.checks").exists()
    entry = await journal.lookup(checks_key("run1", sha))
    assert entry is not None and entry.state == "done" and entry.result == report.to_json()


async def test_a_retry_reuses_the_recorded_report(world: World, store: Store) -> None:
    cfg = config("checks:\n  - name: stamp\n    run: cat /proc/sys/kernel/random/uuid; exit 3\n")
    _, sha, branch = await tree_with_commit(world, "run2", committed=FIXED, dirty=FIXED)
    journal = Journal(store)

    async def once() -> CheckReport:
        report = await check_commit(
            world.checker,
            world.checkouts,
            journal,
            run_id="run2",
            repo_full_name=REPO,
            sha=sha,
            branch=branch,
            config=cfg,
        )
        assert report is not None
        return report

    first, second = await once(), await once()
    assert first.outcomes[0].status == "failed" and first.outcomes[0].exit_code == 3
    assert second == first  # the same random output: it did not run again
    fresh = await world.checker.run(world.checkouts.run_path(REPO, "run2"), cfg, REPO, None)
    assert fresh.outcomes[0].output_tail != first.outcomes[0].output_tail  # a real run would differ


async def test_secrets_are_cut_and_the_server_caps_the_timeout(world: World, store: Store) -> None:
    cfg = config(
        "checks_timeout: 1h\nchecks:\n"
        "  - name: leak\n"
        "    run: echo token=ghs_abcdefghijklmnopqrstuvwxyz0123; echo API_KEY=hunter2hunter; exit 1\n"
        "  - name: slow\n    run: sleep 60\n"
    )
    assert world.checker.limits(cfg).timeout_s == 5  # BEAM_MAX_CHECK_SECONDS wins over the file's 1h
    _, sha, branch = await tree_with_commit(world, "run3", committed=FIXED, dirty=FIXED)
    report = await check_commit(
        world.checker,
        world.checkouts,
        Journal(store),
        run_id="run3",
        repo_full_name=REPO,
        sha=sha,
        branch=branch,
        config=cfg,
    )
    assert report is not None
    leak, slow = report.outcomes
    assert leak.status == "failed" and "ghs_" not in leak.output_tail and "hunter2" not in leak.output_tail
    assert "[redacted]" in leak.output_tail
    assert slow.status == "timed_out" and slow.duration_s < 30


async def test_required_checks_block_and_no_checks_run_nothing(world: World, store: Store) -> None:
    cfg = config(f"checks_required: true\nchecks:\n  - name: tests\n    run: {TESTS}\n")
    _, sha, branch = await tree_with_commit(world, "run4", committed=BROKEN, dirty=BROKEN)
    journal = Journal(store)
    report = await check_commit(
        world.checker,
        world.checkouts,
        journal,
        run_id="run4",
        repo_full_name=REPO,
        sha=sha,
        branch=branch,
        config=cfg,
    )
    assert report is not None and report.blocks
    none = await check_commit(
        world.checker,
        world.checkouts,
        journal,
        run_id="run5",
        repo_full_name=REPO,
        sha=sha,
        branch=branch,
        config=RepoConfig(),
    )
    assert none is None and await journal.lookup(checks_key("run5", sha)) is None
    off = await check_commit(
        None, world.checkouts, journal, run_id="run6", repo_full_name=REPO, sha=sha, branch=branch, config=cfg
    )
    assert off is not None and off.off and off.blocks and not off.outcomes  # off and required: not offered


async def test_run_checks_counts_against_the_cap(world: World, store: Store) -> None:
    cfg = config(f"checks:\n  - name: tests\n    run: {TESTS}\n")
    path, _, _ = await tree_with_commit(world, "run7", committed=FIXED, dirty=BROKEN)
    [tool] = checks_tool(world.checker, path, cfg, REPO, 2)
    assert tool.spec().name == "run_checks"
    request = AgentInput(content=[], session_id=uuid.uuid4(), run_id=uuid.uuid4())
    first = await tool.invoke({}, request)
    assert first["all_passed"] is False and first["runs_left"] == 1
    assert first["checks"][0]["status"] == "failed" and "AssertionError" in first["checks"][0]["output_tail"]
    (path / "calc.py").write_text(FIXED)  # the model fixes it; the next call sees the current files
    second = await tool.invoke({}, request)
    assert second["all_passed"] is True and second["runs_left"] == 0
    with pytest.raises(BeamError) as refused:
        await tool.invoke({}, request)
    assert refused.value.code == "BEM-360"
    assert checks_tool(world.checker, path, RepoConfig(), REPO, 2) == []  # no checks: no tool
    assert checks_tool(None, path, cfg, REPO, 2) == []


def test_a_report_survives_its_round_trip() -> None:
    outcome = CheckOutcome("tests", "timed_out", None, 3.5, "tail", True)
    report = CheckReport("a" * 40, (outcome,), None, True)
    assert CheckReport.from_json(report.to_json()) == report
    assert report.blocks and report.failing == [outcome]


async def test_a_jail_that_refuses_to_start_is_a_check_that_could_not_run(
    world: World, tmp_path: Path
) -> None:
    cfg = config(f"checks_required: true\nchecks:\n  - name: tests\n    run: {TESTS}\n")
    report = await world.checker.run(tmp_path / "no-such-tree", cfg, REPO, None)
    [outcome] = report.outcomes
    assert outcome.status == "error" and outcome.output_tail.startswith("BEM-353: ")
    assert report.blocks and not report.passed
