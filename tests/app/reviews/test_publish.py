"""The summary comment and the check run of automatic reviews go through the journal of GitHub writes
(effects/writer.py), as the review does (issue 41): the summary is created once under its journal key,
and a summary someone deleted is posted again under a key of its own, never answered from the
journal with the deleted one."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bot.app.effects.journal import Journal
from bot.app.effects.writer import GitHubEffects
from bot.app.jobs.store import Store
from bot.app.reviews import render
from bot.app.reviews.publish import finish_check, publish_summary, summary_key
from bot.app.reviews.state import Entry, ReviewStates
from tests.support.fake_github import FakeGitHub, checked_fake_github, installation_client

pytestmark = pytest.mark.anyio

BOT = "beam-bot[bot]"
REPO = "octo/demo"
INSTALLATION = 77
HEAD = "a" * 40


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    with checked_fake_github() as fake:
        fake.add_repo(REPO, installation_id=INSTALLATION)
        fake.add_pull(REPO, number=3, head_sha=HEAD, head_ref="topic")
        yield fake


def summaries(fake: FakeGitHub) -> list[int]:
    return [c.id for c in fake.comments_on(REPO, 3) if c.body.startswith(render.SUMMARY_MARKER)]


async def test_the_summary_is_journaled_and_a_deleted_one_is_posted_again(
    fake: FakeGitHub, store: Store
) -> None:
    states = ReviewStates(store)
    journal = Journal(store)
    await states.push(REPO, 3, HEAD, due_at=0.0)
    state, _ = await states.record(REPO, 3, Entry("skipped", HEAD, note="draft"))
    async with installation_client(fake, INSTALLATION) as gh:
        effects = GitHubEffects(gh, journal, in_flight=0.0)
        await publish_summary(effects, states, state, BOT)
        [first] = summaries(fake)
        made = await effects.done(summary_key(REPO, 3))
        assert made is not None and made.id == first  # the write is in the journal, done

        del fake.comments[first]  # a maintainer deleted it
        state, _ = await states.record(REPO, 3, Entry("no_findings", HEAD))
        await publish_summary(effects, states, state, BOT)

    [second] = summaries(fake)
    assert second != first
    now = await states.get(REPO, 3)
    assert now is not None and now.summary_comment_id == second
    assert "no new findings in `aaaaaaa`" in fake.comments[second].body  # what the summary says now


async def test_a_check_run_is_completed_through_the_journals_writer(fake: FakeGitHub, store: Store) -> None:
    async with installation_client(fake, INSTALLATION) as gh:
        effects = GitHubEffects(gh, Journal(store))
        check = await effects.check_run("check-key", "octo", "demo", HEAD, render.CHECK_NAME)
        await finish_check(effects, REPO, check.id, Entry("no_findings", HEAD))
    [run] = fake.check_runs.values()
    assert (run.status, run.conclusion, run.external_id) == ("completed", "neutral", "check-key")
