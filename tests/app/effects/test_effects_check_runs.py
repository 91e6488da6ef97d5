"""Check runs through the effects journal (issue 8) on real SQLite/PostgreSQL and the fake GitHub: a
check run GitHub made before the attempt could record it is found by its `external_id` and adopted."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from bot.app.effects.journal import Journal
from bot.app.effects.writer import GitHubEffects
from bot.app.github.client import InstallationClient
from bot.app.jobs.store import Store
from tests.support.db import db_url_fixture, pg_database_url_fixture, store_fixture  # noqa: F401
from tests.support.fake_github import FakeGitHub, checked_fake_github, installation_client

REPO = "octo/checks"
OWNER, NAME = REPO.split("/")
INSTALLATION = 78
HEAD = "c" * 40
CHECK = "beam / review"
_keys = itertools.count()

pytestmark = pytest.mark.anyio


class Crashed(Exception):
    """Stands for the process dying between GitHub's answer and the journal's `done`."""


class CrashOnRecord(Journal):
    async def record(self, key: str, kind: str, result: dict[str, Any]) -> None:
        raise Crashed(key)


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    with checked_fake_github() as fake:
        fake.add_repo(REPO, installation_id=INSTALLATION)
        yield fake


@pytest.fixture
async def gh(fake: FakeGitHub) -> AsyncIterator[InstallationClient]:
    async with installation_client(fake, INSTALLATION) as client:
        yield client


def key(step: str) -> str:
    return f"{REPO}#5/review:{next(_keys)}:{HEAD}:{step}"


def runs_on_head(fake: FakeGitHub) -> list[int]:
    return [run.id for run in fake.check_runs.values() if run.head_sha == HEAD and run.name == CHECK]


async def test_a_check_run_made_but_not_recorded_is_adopted_on_retry(
    fake: FakeGitHub, gh: InstallationClient, store: Store
) -> None:
    k = key("check")
    with pytest.raises(Crashed):  # GitHub made it; the attempt died before recording it
        await GitHubEffects(gh, CrashOnRecord(store), in_flight=0).check_run(k, OWNER, NAME, HEAD, CHECK)
    assert len(runs_on_head(fake)) == 1
    assert fake.check_runs[runs_on_head(fake)[0]].external_id == k
    journal = Journal(store)
    entry = await journal.lookup(k)
    assert entry is not None and entry.state == "intent"

    found = await GitHubEffects(gh, journal, in_flight=0).check_run(k, OWNER, NAME, HEAD, CHECK)
    assert runs_on_head(fake) == [found.id]  # adopted: exactly one check run on the head
    assert len(fake.calls_to("checks/create")) == 1
    assert len(fake.calls_to("checks/list-for-ref")) == 1
    entry = await journal.lookup(k)
    assert entry is not None and entry.state == "done" and entry.result["id"] == found.id

    again = await GitHubEffects(gh, journal, in_flight=0).check_run(k, OWNER, NAME, HEAD, CHECK)
    assert again == found and len(fake.calls_to("checks/list-for-ref")) == 1  # the journal knew


async def test_a_begun_check_run_github_never_made_is_made_once(
    fake: FakeGitHub, gh: InstallationClient, store: Store
) -> None:
    journal = Journal(store)
    k = key("check")
    other = await gh.create_check_run(OWNER, NAME, CHECK, HEAD, external_id=key("check"))
    await journal.intend(k, "check_run")  # died before the call: GitHub has only another key's run
    made = await GitHubEffects(gh, journal, in_flight=0).check_run(k, OWNER, NAME, HEAD, CHECK)
    assert made.id != other.id and sorted(runs_on_head(fake)) == sorted([other.id, made.id])
    assert fake.check_runs[made.id].external_id == k and fake.check_runs[made.id].status == "queued"
