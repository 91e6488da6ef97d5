"""The gate of a `/beam` command, through the real webhook handler, store and fake GitHub, on an
injected clock: daily limits and the monthly budget refuse with one reply and run nothing (no run, no
job, no model call) and reset at the next UTC day or month; a duplicate gets a link; `/beam cancel`
stops a queued run, whose tracking comment says who cancelled it."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from itertools import count
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select, update

from bot.app.approvals.flow import Approvals
from bot.app.git.checkout import Checkouts
from bot.app.github.api import GitHubApi
from bot.app.github.client import GitHubApp
from bot.app.github.identity import BotIdentity
from bot.app.jobs.queue import Job, JobQueue
from bot.app.jobs.schema import jobs, runs
from bot.app.jobs.store import Store
from bot.app.limits.ledger import Ledger
from bot.app.limits.policy import Limits, Policy
from bot.app.repo_config import config_version
from bot.app.runs.run import RunDeps
from bot.app.webhooks.handlers import Webhooks
from bot.beam.completion import ScriptedClient
from tests.support.db import FakeClock, opened
from tests.support.fake_github import FakeGitHub, checked_fake_github
from tests.support.webhooks import issue_comment_payload

pytestmark = pytest.mark.anyio
REPO = "octo/limits"
BOT = "beam-bot[bot]"
INSTALLATION = 5
DAY = 86400.0
MARKER = re.compile(r"\n?<!-- beam-effect:[^>]*-->")


@dataclass
class Rig:
    fake: FakeGitHub
    store: Store
    webhooks: Webhooks
    llm: ScriptedClient
    clock: FakeClock
    ids: Iterator[int] = field(default_factory=lambda: count(1))
    last: tuple[Job, dict[str, Any]] | None = None

    async def comment(self, body: str, user: str = "maintainer") -> None:
        """A comment arrives and its delivery job is handled, as a worker would."""
        comment = self.fake.add_comment(REPO, 7, body, user=user)
        payload = issue_comment_payload(
            body, repo=REPO, number=7, commenter=user, comment_id=comment.id, installation_id=INSTALLATION
        )
        raw = json.dumps(payload).encode()
        delivery = f"d-{next(self.ids)}"
        key = f"{REPO}#7"
        assert await self.store.accept_delivery(
            delivery, "issue_comment", "created", raw, key, installation_id=INSTALLATION
        )
        async with self.store.write() as conn:
            found = select(jobs.c.id).where(jobs.c.delivery_id == delivery, jobs.c.kind == "delivery")
            job_id = int((await conn.execute(found)).scalar_one())
            await conn.execute(update(jobs).where(jobs.c.id == job_id).values(state="done"))
        job = Job(job_id, "delivery", key, delivery, None, 1, 5, "w", 0.0, "issue_comment", "created", raw)
        self.last = (job, payload)
        await self.webhooks.handle(job, "issue_comment", payload)

    async def retry_last(self) -> None:
        """The last delivery's job once more, as after a kill before its end was recorded."""
        assert self.last is not None
        job, payload = self.last
        await self.webhooks.handle(
            dataclasses.replace(job, attempts=job.attempts + 1), "issue_comment", payload
        )

    def replies(self) -> list[str]:
        """The bot's comments, without the hidden marker of the effects journal."""
        return [MARKER.sub("", c.body) for c in self.fake.comments_on(REPO, 7) if c.user == BOT]

    async def run_rows(self) -> list[dict[str, Any]]:
        async with self.store.read() as conn:
            return [dict(r._mapping) for r in await conn.execute(select(runs).order_by(runs.c.created_at))]

    async def run_jobs(self) -> list[dict[str, Any]]:
        async with self.store.read() as conn:
            found = await conn.execute(select(jobs).where(jobs.c.kind == "run").order_by(jobs.c.id))
            return [dict(r._mapping) for r in found]


@pytest.fixture
def limits() -> Limits:
    return Limits(runs_per_user_per_day=2, runs_per_repo_per_day=50, tokens_per_installation_per_month=10_000)


@pytest.fixture
async def rig(db_url: str, fake_clock: FakeClock, tmp_path: Path, limits: Limits) -> AsyncIterator[Rig]:
    with checked_fake_github() as fake:
        fake.add_repo(REPO, installation_id=INSTALLATION)
        fake.add_collaborator(REPO, "maintainer", "write")
        fake.add_collaborator(REPO, "other", "write")
        fake.add_collaborator(REPO, "reader", "read")
        fake.add_pull(REPO, number=7, head_sha="a" * 40)
        async with (
            opened(db_url, fake_clock) as store,
            httpx.AsyncClient(transport=fake.transport(), base_url="http://github.test") as http,
        ):
            github = GitHubApp(
                GitHubApi(http, base_url="http://github.test"), fake.app_id, fake.key.private_pem
            )

            async def token(installation_id: int) -> str:
                return (await github.installation_token(installation_id)).get_secret_value()

            llm = ScriptedClient([])  # any model call would fail the run: none may happen here
            deps = RunDeps(
                store,
                Checkouts(tmp_path / "work"),
                llm,
                token,
                BotIdentity(github, BOT),
                policy=Policy(limits=limits),
            )
            webhooks = Webhooks(github, deps, Approvals(github, deps, JobQueue(store)))
            yield Rig(fake, store, webhooks, llm, fake_clock)


async def test_the_daily_user_limit_refuses_without_running_and_resets_the_next_day(rig: Rig) -> None:
    await rig.comment("/beam ask one")
    await rig.comment("/beam ask two")
    assert rig.replies() == []  # admitted runs reply through their own job
    await rig.comment("/beam ask three")
    # FakeClock starts at 2027-01-15 08:00 UTC.
    assert rig.replies() == [
        "Sorry @maintainer, this would go over your limit of 2 runs per day on this repository "
        "(`runs_per_user_per_day`). It resets at 2027-01-16 00:00 UTC."
    ]
    assert len(await rig.run_rows()) == len(await rig.run_jobs()) == 2
    assert rig.llm.requests == []
    await rig.comment("/beam ask from someone else", user="other")  # the limit is per person
    assert len(await rig.run_jobs()) == 3

    rig.clock.advance(16 * 3600)  # midnight UTC: a new day
    await rig.comment("/beam ask four")
    assert len(await rig.run_jobs()) == 4 and len(rig.replies()) == 1
    assert rig.llm.requests == []


@pytest.mark.parametrize(
    ("limits", "beam_yml", "refused_at"),
    [
        (Limits(runs_per_repo_per_day=50), "limits:\n  runs_per_repo_per_day: 2\n", 3),  # lowered
        (Limits(runs_per_repo_per_day=2), "limits:\n  runs_per_repo_per_day: 100\n", 3),  # not raised
    ],
)
async def test_the_repository_limit_may_be_lowered_but_not_raised(
    rig: Rig, beam_yml: str, refused_at: int
) -> None:
    rig.fake.set_file(REPO, "main", ".github/beam.yml", beam_yml)
    for n in range(refused_at):
        await rig.comment(f"/beam ask question {n}", user=("maintainer", "other")[n % 2])
    assert len(await rig.run_jobs()) == refused_at - 1
    (reply,) = rig.replies()
    assert "this repository's limit of 2 runs per day (`runs_per_repo_per_day`)" in reply
    assert "resets at 2027-01-16 00:00 UTC" in reply


async def test_the_monthly_budget_refuses_and_resets_next_month(rig: Rig) -> None:
    ledger = Ledger(rig.store)
    await ledger.record_usage("earlier-run", INSTALLATION, 6_000, 4_000)  # the budget is 10,000
    assert await ledger.month_tokens(INSTALLATION) == 10_000
    await rig.comment("/beam review")
    assert rig.replies() == [
        "Sorry @maintainer, this would go over this installation's monthly token budget (10,000 tokens) "
        "(`tokens_per_installation_per_month`). It resets at 2027-02-01 00:00 UTC."
    ]
    assert await rig.run_jobs() == [] and rig.llm.requests == []
    rig.clock.advance(17 * DAY)  # 2027-02-01
    await rig.comment("/beam review")
    assert len(await rig.run_jobs()) == 1 and len(rig.replies()) == 1


async def test_a_duplicate_command_gets_a_link_and_other_instructions_are_a_new_run(rig: Rig) -> None:
    await rig.comment("/beam review")
    first = (await rig.run_rows())[0]
    await rig.comment("/beam review")
    assert rig.replies() == [
        f"`/beam review` is [already queued]({first['command_url']}) on this pull request; "
        "I will not start it twice."
    ]
    async with rig.store.write() as conn:  # it starts: its tracking comment is the link now
        await conn.execute(
            update(runs).where(runs.c.id == first["id"]).values(status="running", tracking_comment_id=4242)
        )
    await rig.comment("/beam   review")
    assert rig.replies()[-1] == (
        f"`/beam review` is [already running](https://github.com/{REPO}/issues/7#issuecomment-4242) "
        "on this pull request; I will not start it twice."
    )
    await rig.comment("/beam author fix the typo")
    await rig.comment("/beam author fix the link", user="other")
    await rig.comment("/beam author fix  the typo")
    assert len(await rig.run_jobs()) == 3
    assert "`/beam author` is [already queued]" in rig.replies()[-1]
    assert rig.llm.requests == []


async def test_a_refusal_stands_when_its_job_is_retried_after_the_world_moved_on(rig: Rig) -> None:
    """The kill soak's lost count: a duplicate's delivery killed after its reply, retried once its twin
    had finished, admitted the command as well, so it had a refusal and a run."""
    await rig.comment("/beam review")
    first = (await rig.run_rows())[0]
    await rig.comment("/beam review")
    refusal = rig.replies()
    assert len(refusal) == 1 and "I will not start it twice" in refusal[0]
    async with rig.store.write() as conn:
        await conn.execute(update(runs).where(runs.c.id == first["id"]).values(status="succeeded"))
    await rig.retry_last()
    assert rig.replies() == refusal  # the same answer, adopted, not a second one
    assert len(await rig.run_rows()) == len(await rig.run_jobs()) == 1

    await rig.comment("/beam ask two")
    await rig.comment("/beam ask three")  # over the daily limit of 2
    over = rig.replies()[-1]
    assert "this would go over your limit" in over
    rig.clock.advance(DAY)  # the retry comes after the limit reset
    await rig.retry_last()
    assert rig.replies()[-1] == over and len(rig.replies()) == 2
    assert len(await rig.run_rows()) == 2


async def test_cancel_stops_a_queued_run_and_says_who_cancelled_it(rig: Rig) -> None:
    await rig.comment("/beam review")
    (run,) = await rig.run_rows()
    await rig.comment("/beam cancel", user="reader")
    assert "need write permission" in rig.replies()[-1]
    await rig.comment(f"/beam cancel {'0' * 8}")
    assert rig.replies()[-1] == "No queued or running run `00000000` on this pull request to cancel."
    await rig.comment(f"/beam cancel {run['id'][:8]}")
    assert rig.replies()[-1] == (
        f"@maintainer asked to cancel `/beam review` (run `{run['id'][:8]}`); it stops at its next step."
    )
    (run,) = await rig.run_rows()
    assert run["cancelled_by"] == "maintainer"

    job = await JobQueue(rig.store).claim("w", 30.0)  # its run job starts, sees the cancel, stops
    assert job is not None and job.kind == "run"
    await rig.webhooks.on_run(job)
    tracking = rig.replies()[-1]
    assert tracking.startswith(f"🛑 `/beam review` (run `{run['id'][:8]}`) was cancelled by @maintainer.")
    assert f"beam-run:{run['id']}" in tracking
    assert (await rig.run_rows())[0]["status"] == "cancelled"
    assert rig.llm.requests == []
    await rig.comment("/beam cancel")
    assert rig.replies()[-1] == "No queued or running run on this pull request to cancel."


async def test_the_eyes_come_at_admission_and_the_run_job_does_not_react_again(rig: Rig) -> None:
    """Issue 9: the 👀 follows the claim of the command's delivery after one round trip (config and
    permission at once), not after the run job's own start; a refused command gets none."""
    await rig.comment("/beam review")
    (command,) = [c for c in rig.fake.comments_on(REPO, 7) if c.user == "maintainer"]
    assert [r.content for r in rig.fake.reactions_on(command.id) if r.user == BOT] == ["eyes"]
    reactions_before = len(rig.fake.calls)

    job = await JobQueue(rig.store).claim("w", 30.0)
    assert job is not None and job.kind == "run"
    await rig.webhooks.on_run(job)  # no model script: the run fails, which is fine here
    assert [r.content for r in rig.fake.reactions_on(command.id) if r.user == BOT] == ["eyes"]
    assert not [c for c in rig.fake.calls[reactions_before:] if c.path.endswith("/reactions")]

    await rig.comment("/beam ask one", user="reader")  # not allowed: a reply, no 👀
    refused = rig.fake.comments_on(REPO, 7)[-2]
    assert refused.user == "reader" and rig.fake.reactions_on(refused.id) == []


async def test_the_run_job_takes_the_config_its_command_was_admitted_with_and_nothing_older(
    rig: Rig,
) -> None:
    """Issue 9: the run job does not ask GitHub again for the config its command was admitted with a
    moment before (one round trip sooner to its tracking comment), but only on its first attempt,
    for that very version, confirmed less than 5 seconds ago; otherwise it asks."""
    first = "trigger_permission: write\n"
    rig.fake.set_file(REPO, "main", ".github/beam.yml", first)
    now = [1000.0]
    rig.webhooks.github.files.clock = lambda: now[0]
    await rig.comment("/beam review")
    (row,) = await rig.run_jobs()
    assert row["payload"]["config_version"] == config_version(first)
    job = await JobQueue(rig.store).claim("w", 30.0)
    assert job is not None and job.kind == "run"

    def reads() -> int:
        return len(rig.fake.calls_to("repos/get-content"))

    async def reads_of_run(attempt: Job) -> int:
        before = reads()
        await rig.webhooks.on_run(attempt)  # no model script: the run fails, which is fine here
        return reads() - before

    now[0] += 4.9
    assert await reads_of_run(job) == 0
    assert await reads_of_run(dataclasses.replace(job, attempts=2)) == 1  # a retry asks
    now[0] += 5.0
    assert await reads_of_run(job) == 1  # confirmed 5 s ago: too old, asked (and confirmed again)
    rig.fake.set_file(REPO, "main", ".github/beam.yml", "trigger_permission: admin\n")
    assert await reads_of_run(dataclasses.replace(job, attempts=2)) == 1  # the edit, read by a retry
    assert await reads_of_run(job) == 1  # recent, but not the version it was admitted with: asked
