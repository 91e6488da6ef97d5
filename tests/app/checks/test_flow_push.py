"""The two ends of a verified push on the fake GitHub and a real store: the `beam / checks` check run
completed once on the pushed sha (also when an attempt died after GitHub completed it), and the one
reply that refuses an approval `checks_required` forbids (issue 22)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from bot.app.approvals.pushes import HeldPush, PushAction, PushContext
from bot.app.approvals.verified import blocking_report, publish_check_run, refuse_approval
from bot.app.checks.flow import CheckReport
from bot.app.checks.jail import CheckOutcome
from bot.app.effects.journal import Journal
from bot.app.effects.writer import GitHubEffects
from bot.app.github.client import InstallationClient
from bot.app.jobs.store import Store
from tests.support.db import db_url_fixture, pg_database_url_fixture, store_fixture  # noqa: F401
from tests.support.fake_github import FakeGitHub, checked_fake_github, installation_client

pytestmark = pytest.mark.anyio
REPO = "octo/verified"
INSTALLATION = 91
SHA = "d" * 40
PASSED = CheckOutcome("tests", "passed", 0, 2.0, "ok", False)
FAILED = CheckOutcome("tests", "failed", 1, 2.0, "AssertionError: 1 != 2", False)


class Crashed(Exception):
    pass


class CrashOnCompletion(Journal):
    """Dies right after GitHub completed the check run, before the journal says so."""

    async def record(self, key: str, kind: str, result: dict[str, Any]) -> None:
        if key.endswith(":completed"):
            raise Crashed(key)
        await super().record(key, kind, result)


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    with checked_fake_github() as fake:
        fake.add_repo(REPO, installation_id=INSTALLATION)
        fake.add_issue(REPO, number=3, title="x", user="maintainer")
        yield fake


@pytest.fixture
async def gh(fake: FakeGitHub) -> AsyncIterator[InstallationClient]:
    async with installation_client(fake, INSTALLATION) as client:
        yield client


def push(report: CheckReport | None, push_id: str = "feed0001") -> HeldPush:
    return HeldPush(
        id=push_id,
        run_id="run",
        repo=REPO,
        number=3,
        base_sha=None,
        head_sha="0" * 40,
        commit_sha=SHA,
        branch="beam/issue-3/author-12345678",
        requester="maintainer",
        action=PushAction(action_id="a", args={"ref": "x"}, session_id="s", interaction_id="i"),
        context=PushContext(
            installation_id=INSTALLATION,
            clone_url="https://example.com/o/r.git",
            html_url=f"https://github.com/{REPO}",
            default_branch="main",
            on_pull_request=False,
        ),
        created_at=0.0,
        expires_at=1e12,
        decided_by="boss",
        result={"checks": report.to_json()} if report is not None else {},
    )


async def test_the_check_run_is_completed_once_on_the_pushed_sha(
    fake: FakeGitHub, gh: InstallationClient, store: Store
) -> None:
    held = push(CheckReport(SHA, (PASSED,)))
    url = await publish_check_run(GitHubEffects(gh, Journal(store), in_flight=0), held)
    [run] = fake.check_runs.values()
    assert url and run.id and url.endswith(f"/runs/{run.id}")
    assert (run.name, run.head_sha, run.status, run.conclusion) == (
        "beam / checks",
        SHA,
        "completed",
        "success",
    )
    assert run.history == ["queued", "completed"]
    assert run.output is not None and "approved by @boss" in run.output["summary"]
    # A retry: nothing new.
    assert await publish_check_run(GitHubEffects(gh, Journal(store), in_flight=0), held) == url
    assert len(fake.calls_to("checks/create")) == 1 and len(fake.calls_to("checks/update")) == 1


async def test_a_completion_that_landed_before_the_crash_is_found(
    fake: FakeGitHub, gh: InstallationClient, store: Store
) -> None:
    held = push(CheckReport(SHA, (FAILED,)), "feed0002")
    with pytest.raises(Crashed):
        await publish_check_run(GitHubEffects(gh, CrashOnCompletion(store), in_flight=0), held)
    await publish_check_run(GitHubEffects(gh, Journal(store), in_flight=0), held)
    [run] = fake.check_runs.values()
    assert run.conclusion == "failure" and run.history == ["queued", "completed"]
    assert len(fake.calls_to("checks/update")) == 1  # not completed twice (GitHub would refuse)


async def test_no_checks_no_check_run(fake: FakeGitHub, gh: InstallationClient, store: Store) -> None:
    assert await publish_check_run(GitHubEffects(gh, Journal(store), in_flight=0), push(None)) is None
    assert not fake.check_runs


async def test_a_refused_approval_is_said_once(
    fake: FakeGitHub, gh: InstallationClient, store: Store
) -> None:
    report = CheckReport(SHA, (FAILED,), required=True)
    held = push(report, "feed0003")
    assert blocking_report(held) == report
    assert blocking_report(push(CheckReport(SHA, (FAILED,)))) is None  # not required: offered
    assert blocking_report(push(CheckReport(SHA, (PASSED,), required=True))) is None
    for _ in range(3):  # every poll that sees the 👍
        await refuse_approval(GitHubEffects(gh, Journal(store), in_flight=0), held, "boss", report)
    said = [c for c in fake.comments_on(REPO, 3) if "cannot be approved" in c.body]
    assert len(said) == 1 and said[0].body.startswith("@boss, held push `feed0003` cannot be approved")
