"""Answers in the bot's review threads are runs like a command's, through the real webhook handler,
store, queue and fake GitHub, with the scripted model: a reply is admitted by the gate (daily limits,
refusals said in the thread, no model call), runs as the pull request's run job, records its tokens
for `beam-bot usage`, shows them in its footer, stops at the token cap before asking the model, and
`/beam cancel` stops it while the model is writing."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from itertools import count
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from sqlalchemy import select, update

from bot.app.approvals.flow import Approvals
from bot.app.context.budget import estimate_tokens
from bot.app.git.checkout import Checkouts
from bot.app.github.api import GitHubApi
from bot.app.github.client import GitHubApp
from bot.app.github.identity import BotIdentity
from bot.app.jobs.queue import Job, JobQueue
from bot.app.jobs.schema import jobs, runs
from bot.app.jobs.signals import Reschedule
from bot.app.jobs.store import Store
from bot.app.limits.policy import Limits, Policy, Prices
from bot.app.limits.report import format_usage, usage_by
from bot.app.reviews import threads
from bot.app.reviews.threads import ThreadReplies
from bot.app.runs.run import RunDeps
from bot.app.runs.sweep import finish_abandoned_runs
from bot.app.webhooks.handlers import Webhooks
from bot.beam.completion import Completion, ScriptedClient
from bot.beam.tools import ToolSpec
from bot.beam.types import TokenUsage
from tests.support.db import FakeClock, opened
from tests.support.fake_github import FakeGitHub, checked_fake_github
from tests.support.fake_github_state import Comment
from tests.support.webhooks import issue_comment_payload, review_comment_payload

pytestmark = pytest.mark.anyio
REPO = "octo/threads"
BOT = "beam-bot[bot]"
INSTALLATION = 5
NUMBER = 7
HEAD = "a" * 40
MARKER = re.compile(r"\n?<!-- beam-(?:effect|thread-reply):[^>]*-->")
WAIT = 10.0  # seconds any one step of these tests may take at most


class HeldModel(ScriptedClient):
    """The scripted model, held inside its call until `release` is set: a run that is still writing."""

    def __init__(self, steps: list[Completion]) -> None:
        super().__init__(steps)
        self.asked = anyio.Event()
        self.release = anyio.Event()
        self.prompt: list[dict[str, Any]] = []  # what the held call was sent

    async def complete(self, messages: list[dict[str, Any]], tools: list[ToolSpec]) -> Completion:
        self.prompt = list(messages)
        self.asked.set()
        await self.release.wait()
        return await super().complete(messages, tools)


@dataclass
class Rig:
    fake: FakeGitHub
    store: Store
    webhooks: Webhooks
    llm: ScriptedClient
    finding: Comment
    clock: FakeClock
    ids: Iterator[int] = field(default_factory=lambda: count(1))

    async def deliver(self, event: str, payload: dict[str, Any]) -> None:
        """A delivery arrives and its job is handled, as a worker would."""
        raw = json.dumps(payload).encode()
        delivery = f"d-{next(self.ids)}"
        key = f"{REPO}#{NUMBER}"
        assert await self.store.accept_delivery(
            delivery, event, "created", raw, key, installation_id=INSTALLATION
        )
        async with self.store.write() as conn:
            found = select(jobs.c.id).where(jobs.c.delivery_id == delivery, jobs.c.kind == "delivery")
            job_id = int((await conn.execute(found)).scalar_one())
            await conn.execute(update(jobs).where(jobs.c.id == job_id).values(state="done"))
        job = Job(job_id, "delivery", key, delivery, None, 1, 5, "w", 0.0, event, "created", raw)
        await self.webhooks.handle(job, event, payload)

    async def ask(self, body: str, user: str = "maintainer", *, again: Comment | None = None) -> Comment:
        """A reply in the bot's thread (or the delivery of `again` once more, under a new id)."""
        reply = again or self.fake.add_review_comment(REPO, NUMBER, body, user=user, path="calc.py", line=2)
        reply.in_reply_to = self.finding.id
        payload = review_comment_payload(
            reply.body,
            repo=REPO,
            number=NUMBER,
            commenter=reply.user,
            comment_id=reply.id,
            installation_id=INSTALLATION,
            path="calc.py",
            line=2,
        )
        payload["comment"]["in_reply_to_id"] = self.finding.id
        payload["pull_request"]["head"]["sha"] = HEAD
        payload["repository"]["default_branch"] = "main"  # as the issue comments' example says
        await self.deliver("pull_request_review_comment", payload)
        return reply

    async def say(self, body: str, user: str = "maintainer") -> None:
        """A comment on the pull request's conversation (a `/beam` command)."""
        comment = self.fake.add_comment(REPO, NUMBER, body, user=user)
        payload = issue_comment_payload(
            body,
            repo=REPO,
            number=NUMBER,
            commenter=user,
            comment_id=comment.id,
            installation_id=INSTALLATION,
        )
        await self.deliver("issue_comment", payload)

    async def run_next(self) -> None:
        """The next run job, as a worker claims and runs it."""
        job = await JobQueue(self.store).claim("w", 30.0)
        assert job is not None and job.kind == "run"
        await self.webhooks.on_run(job)

    def in_thread(self) -> list[str]:
        """The bot's replies in the thread, without its hidden markers."""
        found = [c for c in self.fake.comments.values() if c.in_reply_to == self.finding.id and c.user == BOT]
        return [MARKER.sub("", c.body).strip() for c in sorted(found, key=lambda c: c.id)]

    def said(self) -> list[str]:
        return [MARKER.sub("", c.body) for c in self.fake.comments_on(REPO, NUMBER) if c.user == BOT]

    async def run_rows(self) -> list[dict[str, Any]]:
        async with self.store.read() as conn:
            return [dict(r._mapping) for r in await conn.execute(select(runs).order_by(runs.c.created_at))]

    async def run_jobs(self) -> int:
        async with self.store.read() as conn:
            return len((await conn.execute(select(jobs.c.id).where(jobs.c.kind == "run"))).all())


@pytest.fixture
def limits() -> Limits:
    return Limits(runs_per_user_per_day=2, runs_per_repo_per_day=50)


@pytest.fixture
def run_timeout() -> float:
    return 600.0  # RunDeps' own


@pytest.fixture
async def llm(request: pytest.FixtureRequest) -> ScriptedClient:
    """The scripted model with one answer; `held` (indirect), the same held inside its call."""
    if getattr(request, "param", None) == "held":
        return HeldModel([Completion.of_text("never posted")])
    usage = TokenUsage(prompt_tokens=1200, completion_tokens=80, total_tokens=1280)
    return ScriptedClient([Completion.of_text("f2 should add, as f1 does.", usage=usage, model="fake-model")])


@pytest.fixture
async def rig(
    db_url: str,
    fake_clock: FakeClock,
    tmp_path: Path,
    limits: Limits,
    llm: ScriptedClient,
    run_timeout: float,
) -> AsyncIterator[Rig]:
    with checked_fake_github() as fake:
        fake.add_repo(REPO, installation_id=INSTALLATION)
        fake.add_collaborator(REPO, "maintainer", "write")
        fake.add_collaborator(REPO, "other", "write")
        fake.add_collaborator(REPO, "reader", "read")
        fake.add_pull(REPO, number=NUMBER, head_sha=HEAD)
        fake.set_file(REPO, HEAD, "calc.py", "def f1(x):\n    return x - 2\n")
        finding = fake.add_review_comment(REPO, NUMBER, "f1 subtracts.", user=BOT, path="calc.py", line=2)
        async with (
            opened(db_url, fake_clock) as store,
            httpx.AsyncClient(transport=fake.transport(), base_url="http://github.test") as http,
        ):
            github = GitHubApp(
                GitHubApi(http, base_url="http://github.test"), fake.app_id, fake.key.private_pem
            )

            async def token(installation_id: int) -> str:
                return (await github.installation_token(installation_id)).get_secret_value()

            policy = Policy(limits=limits, prices=Prices(3.0, 15.0))
            deps = RunDeps(
                store,
                Checkouts(tmp_path / "work"),
                llm,
                token,
                BotIdentity(github, BOT),
                policy=policy,
                run_timeout=run_timeout,
            )
            approvals = Approvals(github, deps, JobQueue(store))
            webhooks = Webhooks(github, deps, approvals, threads=ThreadReplies(deps))
            yield Rig(fake, store, webhooks, llm, finding, fake_clock)


async def test_a_thread_answer_is_a_run_with_its_usage_in_the_footer_and_the_report(rig: Rig) -> None:
    question = await rig.ask("@beam-bot is this really wrong?")
    # Admitted like a command: a queued run and its job, the 👀, and no model call yet.
    assert [r.content for r in rig.fake.reactions_on(question.id) if r.user == BOT] == ["eyes"]
    (row,) = await rig.run_rows()
    assert (row["skill"], row["status"], row["requester"]) == ("thread", "queued", "maintainer")
    assert rig.llm.requests == []

    await rig.run_next()
    (answer,) = rig.in_thread()
    text, footer = answer.split("\n\n<sub>")
    assert text == "f2 should add, as f1 does."
    assert footer.startswith("model `fake-model` · 1,200 input / 80 output tokens · 1 model call · ")
    assert footer.endswith(" · ≈ $0.0048</sub>")
    (messages, tools) = rig.llm.requests[0]
    assert tools == [] and "@maintainer: @beam-bot is this really wrong?" in messages[1]["content"]
    assert "2:     return x - 2" in messages[1]["content"]  # the code around the line, at the head
    assert rig.said() == []  # no tracking comment: the answer is the reply

    (row,) = await rig.run_rows()
    assert (row["status"], row["input_tokens"], row["output_tokens"]) == ("succeeded", 1200, 80)
    assert row["model_used"] == "fake-model" and row["job_id"] is not None
    report = format_usage(await usage_by(rig.store, ("repo", "requester"), Prices(3.0, 15.0)), "today")
    line = next(line for line in report.splitlines() if line.startswith(REPO))
    assert line.split() == [REPO, "maintainer", "1", "1,200", "80", "$0.0048"]

    # The same reply delivered again (under a new delivery id) is answered already: no run.
    await rig.ask("", again=question)
    assert len(await rig.run_rows()) == 1 and await rig.run_jobs() == 1
    assert len(rig.llm.requests) == 1 and len(rig.in_thread()) == 1


async def test_a_reply_past_the_daily_limit_gets_the_limits_answer_in_the_thread_and_no_model_call(
    rig: Rig,
) -> None:
    await rig.say("/beam ask one")  # commands and thread answers count on the same counters
    await rig.ask("@beam-bot why?")
    assert await rig.run_jobs() == 2
    await rig.ask("@beam-bot and this?")
    # FakeClock starts at 2027-01-15 08:00 UTC.
    assert rig.in_thread() == [
        "Sorry @maintainer, this would go over your limit of 2 runs per day on this repository "
        "(`runs_per_user_per_day`). It resets at 2027-01-16 00:00 UTC."
    ]
    assert await rig.run_jobs() == 2 and len(await rig.run_rows()) == 2
    assert rig.llm.requests == []
    await rig.ask("@beam-bot why?", user="reader")  # the permission comes first, in the thread too
    assert "need write permission" in rig.in_thread()[-1] and await rig.run_jobs() == 2


async def test_a_retry_after_github_failed_the_reply_writes_it_without_asking_the_model_again(
    rig: Rig,
) -> None:
    await rig.ask("@beam-bot is this really wrong?")
    job = await JobQueue(rig.store).claim("w", 30.0)
    assert job is not None and job.kind == "run"
    rig.fake.inject("POST", r"/comments/\d+/replies$", status=502)
    with pytest.raises(Reschedule):  # GitHub down: the run job waits for it (runs/outage.py)
        await rig.webhooks.on_run(job)
    assert rig.in_thread() == [] and len(rig.llm.requests) == 1
    rig.clock.advance(60)  # past the time a write begun by the first attempt could still land
    await rig.webhooks.on_run(dataclasses.replace(job, attempts=2))
    (answer,) = rig.in_thread()
    assert answer.startswith("f2 should add, as f1 does.") and len(rig.llm.requests) == 1
    (row,) = await rig.run_rows()
    assert (row["status"], row["input_tokens"], row["output_tokens"]) == ("succeeded", 1200, 80)


@pytest.mark.parametrize(
    ("limits", "beam_yml"),
    [
        (Limits(max_tokens_per_run=40), ""),
        (Limits(max_tokens_per_run=400_000), "limits:\n  max_tokens_per_run: 40\n"),  # lowered by the repo
    ],
)
async def test_the_token_cap_stops_an_answer_whose_prompt_would_reach_it_before_the_model_is_asked(
    rig: Rig, beam_yml: str
) -> None:
    if beam_yml:
        rig.fake.set_file(REPO, "main", ".github/beam.yml", beam_yml)
    await rig.ask("@beam-bot " + "why is this wrong, " * 20)
    await rig.run_next()
    (answer,) = rig.in_thread()
    assert answer.startswith(
        "No answer: this run stopped at the token limit of a run (40 tokens) (`max_tokens_per_run`) "
        "before the model answered.\n\n<sub>model `unknown` · 0 input / 0 output tokens · 0 model calls"
    )
    assert rig.llm.requests == []
    (row,) = await rig.run_rows()
    assert row["status"] == "succeeded" and not row["input_tokens"]


@pytest.mark.parametrize("llm", ["held"], indirect=True)
async def test_cancel_stops_a_thread_answer_while_the_model_is_writing(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    held = rig.llm
    assert isinstance(held, HeldModel)
    monkeypatch.setattr(threads, "WATCH_SECONDS", 0.05)
    await rig.ask("@beam-bot is this really wrong?")
    (row,) = await rig.run_rows()
    async with anyio.create_task_group() as group:
        group.start_soon(rig.run_next)
        with anyio.fail_after(WAIT):
            await held.asked.wait()
        assert (await rig.run_rows())[0]["status"] == "running"
        await rig.say("/beam cancel")
        assert rig.said() == [
            f"@maintainer asked to cancel an answer in a review thread (run `{row['id'][:8]}`); "
            "it stops at its next step."
        ]
        with anyio.fail_after(WAIT):  # the run stops by itself: the model is never released
            while not rig.in_thread():
                await anyio.sleep(0.05)
    (answer,) = rig.in_thread()
    assert answer.startswith(f"🛑 This answer (run `{row['id'][:8]}`) was cancelled by @maintainer.")
    assert "never posted" not in answer
    (row,) = await rig.run_rows()
    assert row["status"] == "cancelled" and row["cancelled_by"] == "maintainer"
    assert len(held.requests) == 0  # held inside its call: nothing came back from it
    # Yet the server read the prompt: the cut call is counted with its prompt's tokens as estimated
    # before the call (no usage comes back from a call cut short), on the row, the footer and the report.
    prompt = sum(estimate_tokens(m["content"]) for m in held.prompt)
    assert prompt > 100
    assert (row["input_tokens"], row["output_tokens"]) == (prompt, 0)
    assert row["usage"]["prompt_tokens"] == prompt
    assert f"· {prompt:,} input / 0 output tokens · 1 model call · " in answer
    report = format_usage(await usage_by(rig.store, ("repo", "requester"), Prices(3.0, 15.0)), "today")
    line = next(line for line in report.splitlines() if line.startswith(REPO))
    assert line.split()[:5] == [REPO, "maintainer", "1", f"{prompt:,}", "0"]


@pytest.mark.parametrize(("llm", "run_timeout"), [("held", 0.5)], indirect=["llm"])
async def test_an_answer_past_the_run_timeout_fails_in_its_thread_and_counts_the_prompt_it_sent(
    rig: Rig,
) -> None:
    held = rig.llm
    assert isinstance(held, HeldModel)
    await rig.ask("@beam-bot is this really wrong?")
    with anyio.fail_after(WAIT):  # the model is never released: the run's own timeout ends it
        await rig.run_next()
    (answer,) = rig.in_thread()
    assert answer.startswith("Sorry, I could not answer this time; mention me again to retry.")
    prompt = sum(estimate_tokens(m["content"]) for m in held.prompt)
    assert prompt > 100 and f"· {prompt:,} input / 0 output tokens · 1 model call · " in answer
    (row,) = await rig.run_rows()
    assert (row["status"], row["input_tokens"], row["output_tokens"]) == ("failed", prompt, 0)
    assert row["error_message"] == "the answer took longer than 0.5 s"


async def test_cancel_stops_a_queued_thread_answer_before_the_model_is_asked(rig: Rig) -> None:
    await rig.ask("@beam-bot is this really wrong?")
    await rig.say("/beam cancel")
    await rig.run_next()
    (answer,) = rig.in_thread()
    assert "was cancelled by @maintainer." in answer and rig.llm.requests == []
    assert (await rig.run_rows())[0]["status"] == "cancelled"


async def give_up(rig: Rig, job: Job, state: str) -> int:
    """The run job ends `state` without writing its answer (a worker lost, the last attempt failed),
    and the sweep makes its end known, as the worker pool calls it."""
    async with rig.store.write() as conn:
        await conn.execute(update(jobs).where(jobs.c.id == job.id).values(state=state))
    return await finish_abandoned_runs(rig.webhooks.deps, rig.webhooks.github, job.id)


async def test_a_thread_answer_whose_job_died_says_so_in_its_thread_not_on_the_pull_request(rig: Rig) -> None:
    question = await rig.ask("@beam-bot is this really wrong?")
    job = await JobQueue(rig.store).claim("w", 30.0)
    assert job is not None and job.kind == "run"
    assert await give_up(rig, job, "dead") == 1
    (row,) = await rig.run_rows()
    assert rig.in_thread() == [
        f"❌ This answer (run `{row['id'][:8]}`) failed (BEM-339): the job was given up: the process "
        "running it was lost on its last attempt. Mention me again to retry."
    ]
    assert rig.said() == []  # nothing on the pull request's conversation: the question was in the thread
    assert (row["status"], row["error_code"]) == ("failed", "BEM-339")
    # It is the answer to that reply: delivered again, the reply is not asked again.
    await rig.ask("", again=question)
    assert len(await rig.run_rows()) == 1 and rig.llm.requests == []
    assert await finish_abandoned_runs(rig.webhooks.deps, rig.webhooks.github) == 0
    assert len(rig.in_thread()) == 1


async def test_a_thread_answer_recorded_but_not_written_is_written_in_its_thread_by_the_sweep(
    rig: Rig,
) -> None:
    await rig.ask("@beam-bot is this really wrong?")
    job = await JobQueue(rig.store).claim("w", 30.0)
    assert job is not None
    rig.fake.inject("POST", r"/comments/\d+/replies$", status=502)
    with pytest.raises(Reschedule):  # the answer is recorded; GitHub refused its reply
        await rig.webhooks.on_run(job)
    rig.clock.advance(60)  # past the time the refused write could still land
    assert rig.in_thread() == [] and await give_up(rig, job, "failed") == 1
    (answer,) = rig.in_thread()
    assert answer.startswith("f2 should add, as f1 does.\n\n<sub>model `fake-model` · 1,200 input")
    assert rig.said() == [] and len(rig.llm.requests) == 1
    (row,) = await rig.run_rows()
    assert (row["status"], row["input_tokens"], row["output_tokens"]) == ("succeeded", 1200, 80)
