"""The effects journal and writer (issue 8) on real SQLite/PostgreSQL and the fake GitHub: a write is
made once; a write an earlier attempt began is found on GitHub and adopted instead of made again."""

from __future__ import annotations

import itertools
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from sqlalchemy import inspect, text

from bot.app.effects.crash import CrashPoints
from bot.app.effects.journal import Journal
from bot.app.effects.writer import GitHubEffects, marker, proof_of, with_marker
from bot.app.github.client import InlineComment, InstallationClient
from bot.app.github.timeouts import CLOCK_MARGIN, in_flight_seconds
from bot.app.jobs.identity import claim_identity
from bot.app.jobs.queue import JobQueue
from bot.app.jobs.schema import effects, schema_version
from bot.app.jobs.signals import Reschedule
from bot.app.jobs.store import Store
from tests.support.db import FakeClock, db_url_fixture, pg_database_url_fixture, store_fixture  # noqa: F401
from tests.support.fake_github import FakeGitHub, checked_fake_github, installation_client
from tests.support.fake_github_state import PullFile

REPO = "octo/fx"
OWNER, NAME = REPO.split("/")
INSTALLATION = 77
PATCH = "@@ -1 +1,2 @@\n a\n+b\n"
_keys = itertools.count()

pytestmark = pytest.mark.anyio


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    with checked_fake_github() as fake:
        fake.add_repo(REPO, installation_id=INSTALLATION)
        fake.add_pull(
            REPO, number=3, head_sha="a" * 40, head_ref="topic", files=[PullFile("f.txt", patch=PATCH)]
        )
        fake.ref_resolver = lambda repo, ref: "b" * 40
        yield fake


@pytest.fixture
async def gh(fake: FakeGitHub) -> AsyncIterator[InstallationClient]:
    async with installation_client(fake, INSTALLATION) as client:
        yield client


def key(step: str) -> str:
    return f"run-{next(_keys)}-{id(step)}:{step}"


def posts(fake: FakeGitHub, operation: str) -> int:
    return len(fake.calls_to(operation))


async def test_a_done_write_is_never_made_again(
    fake: FakeGitHub, gh: InstallationClient, store: Store
) -> None:
    effects = GitHubEffects(gh, Journal(store), in_flight=0)
    k = key("tracking")
    first = await effects.comment(k, OWNER, NAME, 3, "hello")
    again = await effects.comment(k, OWNER, NAME, 3, "hello")
    assert again == first and posts(fake, "issues/create-comment") == 1
    assert fake.comments[first.id].body.endswith(marker(k))
    assert posts(fake, "issues/list-comments") == 0  # nothing to find out: the journal knew


async def test_a_begun_comment_is_found_by_its_marker_and_adopted(
    fake: FakeGitHub, gh: InstallationClient, store: Store
) -> None:
    journal = Journal(store)
    k = key("tracking")
    # An earlier attempt died after GitHub made the comment: its intent holds the body's digest.
    await journal.intend(k, "comment", proof_of(f"⏳ Working\n{marker(k)}"))
    earlier = fake.add_comment(REPO, 3, f"⏳ Working\n{marker(k)}", user="beam-bot[bot]")
    found = await GitHubEffects(gh, journal, in_flight=0).comment(k, OWNER, NAME, 3, "✅ Done")
    assert found.id == earlier.id and posts(fake, "issues/create-comment") == 0
    assert "since" in fake.calls_to("issues/list-comments")[0].query  # only the recent comments are read
    assert fake.comments[earlier.id].body == f"✅ Done\n{marker(k)}"  # made to say what this attempt says
    assert (await journal.lookup(k)) is not None and (await journal.lookup(k)).state == "done"  # type: ignore[union-attr]


async def test_a_begun_write_is_not_looked_for_while_it_could_still_land(
    fake: FakeGitHub, gh: InstallationClient, clocked_store: Store, fake_clock: FakeClock
) -> None:
    """Issue 23: a POST GitHub completes a few seconds after the attempt died is not there yet when
    a quick retry looks. The retry asks GitHub nothing until the request can no longer be alive; it
    reschedules the job to that moment, then finds the comment and adopts it."""
    fake_clock.now = time.time()  # the fake GitHub dates comments by the real clock
    journal = Journal(clocked_store)
    effects = GitHubEffects(gh, journal, in_flight=12.0)
    k = key("tracking")
    await journal.intend(k, "comment", proof_of(f"⏳ Working\n{marker(k)}"))
    begun = fake_clock.now
    fake_clock.advance(4.0)
    with pytest.raises(Reschedule) as again:
        await effects.comment(k, OWNER, NAME, 3, "⏳ Working")
    assert again.value.at == pytest.approx(begun + 12.0)
    assert posts(fake, "issues/list-comments") == 0 and posts(fake, "issues/create-comment") == 0
    earlier = fake.add_comment(REPO, 3, f"⏳ Working\n{marker(k)}", user="beam-bot[bot]")  # it landed
    fake_clock.advance(8.5)
    found = await effects.comment(k, OWNER, NAME, 3, "⏳ Working")
    assert found.id == earlier.id and posts(fake, "issues/create-comment") == 0


def test_the_window_is_the_shorter_of_our_timeout_and_githubs_limit_plus_a_margin() -> None:
    assert in_flight_seconds(30.0) == 10.0 + CLOCK_MARGIN
    assert in_flight_seconds(4.0) == 4.0 + CLOCK_MARGIN


async def test_a_begun_write_that_never_reached_github_is_made(
    fake: FakeGitHub, gh: InstallationClient, store: Store
) -> None:
    journal = Journal(store)
    k = key("reply")
    await journal.intend(k, "reply", proof_of(with_marker("help text", k)))
    made = await GitHubEffects(gh, journal, in_flight=0).comment(k, OWNER, NAME, 3, "help text", kind="reply")
    assert posts(fake, "issues/list-comments") == 1 and posts(fake, "issues/create-comment") == 1
    assert fake.comments[made.id].body.startswith("help text")


async def test_reviews_replies_and_pull_requests_are_adopted(
    fake: FakeGitHub, gh: InstallationClient, store: Store
) -> None:
    journal = Journal(store)
    first = GitHubEffects(gh, journal, in_flight=0)
    review_key, reply_key, pull_key = key("review"), key("reply"), key("pull")
    review = await first.review(
        review_key,
        OWNER,
        NAME,
        3,
        commit_id="a" * 40,
        body="ok",
        comments=[InlineComment(path="f.txt", line=2, body="b")],
    )
    parent = fake.add_review_comment(REPO, 3, "why?", path="f.txt", line=2)
    reply = await first.reply(reply_key, OWNER, NAME, 3, parent.id, "because")
    pull = await first.pull(
        pull_key, OWNER, NAME, title="beam: x", head="beam/pr-3/x", base="topic", body="b"
    )
    # Forget the answers, as if each attempt died right after GitHub acted (its intent and the digest
    # of what it sent kept): a retry must find them.
    sent = {review_key: "ok", reply_key: "because", pull_key: "b"}
    for k, body in sent.items():
        proofs = {"proofs": [proof_of(with_marker(body, k))]}
        async with store.write() as conn:
            await conn.execute(
                effects.update().where(effects.c.key == k).values(state="intent", result=proofs)
            )
    retry = GitHubEffects(gh, journal, in_flight=0)
    assert (await retry.review(review_key, OWNER, NAME, 3, commit_id="a" * 40, body="ok")).id == review.id
    assert (await retry.reply(reply_key, OWNER, NAME, 3, parent.id, "because")).id == reply.id
    again = await retry.pull(
        pull_key, OWNER, NAME, title="beam: x", head="beam/pr-3/x", base="topic", body="b"
    )
    assert again.html_url == pull.html_url
    assert posts(fake, "pulls/create-review") == 1
    assert posts(fake, "pulls/create-reply-for-review-comment") == 1
    assert posts(fake, "pulls/create") == 1


async def test_a_push_is_found_by_the_branch_tip(gh: InstallationClient, store: Store) -> None:
    journal = Journal(store)
    k = key("push")
    pushed: list[str] = []
    tip: list[str | None] = [None]

    async def remote_tip() -> str | None:
        return tip[0]

    async def push() -> None:
        pushed.append("c1")
        tip[0] = "c1"

    await journal.intend(k, "push")
    tip[0] = "c1"  # the earlier attempt's push landed before it died
    await GitHubEffects(gh, journal, in_flight=0).push(k, "c1", remote_tip, push)
    assert pushed == []
    other = key("push")
    await GitHubEffects(gh, journal, in_flight=0).push(
        other, "c2", remote_tip, push
    )  # a new one is made once
    await GitHubEffects(gh, journal, in_flight=0).push(other, "c2", remote_tip, push)
    assert pushed == ["c1"]


async def test_the_crash_hook_does_nothing_unless_asked() -> None:
    assert CrashPoints.from_env({}).points == frozenset()
    points = CrashPoints.from_env({"BEAM_TEST_CRASH_AT": "review:after, comment:before"})
    assert points.points == {"review:after", "comment:before"}
    points.hit("review", "before")  # not a chosen point: the process lives on


async def test_a_restarted_process_gets_its_identity_back_and_reclaims_its_jobs(
    store: Store, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    first = claim_identity(work)
    second = claim_identity(work)  # another live process on the same work dir: another slot
    assert first.id != second.id and (first.slot, second.slot) == (0, 1)
    queue = JobQueue(store)
    job_id = await queue.enqueue("delivery", "o/r#1")
    job = await queue.claim(f"{first.id}/0", lease_seconds=600)
    assert job is not None and job.id == job_id
    first.release()  # the process died (the kernel drops its lock)
    again = claim_identity(work)
    assert again.id == first.id
    assert await queue.claim(f"{again.id}/0", lease_seconds=600) is None  # the lease still runs...
    assert await queue.reclaim(f"{again.id}/") == 1  # ...but its own jobs come back at once
    retaken = await queue.claim(f"{again.id}/1", lease_seconds=600)
    assert retaken is not None and retaken.id == job_id and retaken.attempts == 2
    for identity in (second, again):
        identity.release()


async def test_a_version_1_database_gets_the_journal_tables(db_url: str) -> None:
    store = await Store.open(db_url)
    try:
        async with store.write() as conn:
            await conn.execute(text("DROP TABLE effects"))
            await conn.execute(text("DROP TABLE run_checkpoints"))
            await conn.execute(schema_version.update().values(version=1))
    finally:
        await store.close()
    store = await Store.open(db_url)
    try:
        async with store.read() as conn:
            tables = set(await conn.run_sync(lambda c: inspect(c).get_table_names()))
        assert {"effects", "run_checkpoints"} <= tables
        journal = Journal(store)
        await journal.save_conversation("r-1", 2, [{"role": "user", "content": "hi\u0000"}])
        assert await journal.load_conversation("r-1") == (2, [{"role": "user", "content": "hi\u0000"}])
    finally:
        await store.close()


# -- issue 40: the journal adopts only what it wrote -------------------------------------------------


async def test_a_look_alike_with_the_marker_is_not_adopted_and_the_real_comment_is_written(
    fake: FakeGitHub, gh: InstallationClient, store: Store
) -> None:
    """A comment under the bot's login that carries this key's marker (the model quoted it, or a
    text path forgot to escape it) is not the write the dead attempt began: a retry leaves it alone
    and writes its own."""
    journal = Journal(store)
    k = key("tracking")
    await journal.intend(k, "comment", proof_of(f"⏳ Working\n{marker(k)}"))  # died before the POST
    forged = f"Per the PR body, this footer:\n{marker(k)}"
    look_alike = fake.add_comment(REPO, 3, forged, user="beam-bot[bot]")
    made = await GitHubEffects(gh, journal, in_flight=0).comment(k, OWNER, NAME, 3, "✅ Done")
    assert made.id != look_alike.id and posts(fake, "issues/create-comment") == 1
    assert fake.comments[made.id].body == f"✅ Done\n{marker(k)}"
    assert fake.comments[look_alike.id].body == forged  # neither adopted nor edited
    entry = await journal.lookup(k)
    assert entry is not None and entry.state == "done" and entry.result["id"] == made.id


async def test_a_look_alike_review_or_reply_is_not_adopted(
    fake: FakeGitHub, gh: InstallationClient, store: Store
) -> None:
    journal = Journal(store)
    review_key, reply_key = key("review"), key("reply")
    await journal.intend(review_key, "review", proof_of(with_marker("ok", review_key)))
    await journal.intend(reply_key, "reply", proof_of(with_marker("because", reply_key)))
    parent = fake.add_review_comment(REPO, 3, "why?", path="f.txt", line=2)
    fake.add_review_comment(
        REPO, 3, f"copied\n{marker(reply_key)}", path="f.txt", line=2, user="beam-bot[bot]"
    )
    retry = GitHubEffects(gh, journal, in_flight=0)
    assert await retry.find_review(review_key, OWNER, NAME, 3) is None
    await retry.review(review_key, OWNER, NAME, 3, commit_id="a" * 40, body="ok")
    await retry.reply(reply_key, OWNER, NAME, 3, parent.id, "because")
    assert posts(fake, "pulls/create-review") == 1
    assert posts(fake, "pulls/create-reply-for-review-comment") == 1


async def test_every_attempts_body_is_proof_and_an_old_intent_proves_nothing(
    fake: FakeGitHub, gh: InstallationClient, store: Store
) -> None:
    """Attempts may send different bodies (the answer so far): the comment the first one sent is
    still found after a second began with another body. An intent recorded before proofs were
    kept has none, and adopts nothing."""
    journal = Journal(store)
    k, old = key("tracking"), key("tracking")
    first, second = f"⏳ Working\n{marker(k)}", f"⏳ Working, step 2\n{marker(k)}"
    await journal.intend(k, "comment", proof_of(first))
    await journal.intend(k, "comment", proof_of(second))
    entry = await journal.lookup(k)
    assert entry is not None and Journal.proofs(entry) == {proof_of(first), proof_of(second)}
    landed = fake.add_comment(REPO, 3, first.replace("\n", "  \r\n"), user="beam-bot[bot]")  # as normalised
    assert (
        await GitHubEffects(gh, journal, in_flight=0).comment(k, OWNER, NAME, 3, "✅ Done")
    ).id == landed.id
    await journal.intend(old, "comment")
    stale = fake.add_comment(REPO, 3, f"⏳ Working\n{marker(old)}", user="beam-bot[bot]")
    assert (await GitHubEffects(gh, journal, in_flight=0).comment(old, OWNER, NAME, 3, "x")).id != stale.id
