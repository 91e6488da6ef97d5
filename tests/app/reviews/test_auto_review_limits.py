"""Automatic reviews count against the same limits as commands (issues 10 and 11), through the real
trigger, review job, ledger and store, the fake GitHub, real git over HTTP and a scripted model, on an
injected clock: a review over the daily repository or per-user limit runs nothing and says so in the
one summary comment; a repository's per-run token cap stops the review; a retried job and a
redelivered push count once."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from bot.app.git.checkout import Checkouts
from bot.app.github.api import GitHubApi, RetryPolicy
from bot.app.github.client import GitHubApp
from bot.app.github.identity import BotIdentity
from bot.app.github.payloads import PullRequestEvent
from bot.app.jobs.queue import JobQueue
from bot.app.jobs.schema import runs, usage_counters
from bot.app.jobs.signals import Reschedule
from bot.app.jobs.store import Store
from bot.app.limits.ledger import Admitted, Ledger, OverLimit, RunRequest
from bot.app.limits.policy import Limits, Policy
from bot.app.reviews.auto_review_job import KIND, ReviewJob
from bot.app.reviews.state import ReviewStates
from bot.app.reviews.trigger import ReviewTrigger
from bot.app.runs.run import RunDeps
from bot.beam.completion import Completion, PendingToolCall, ScriptedClient
from bot.beam.results import TokenUsage
from tests.support.db import FakeClock, opened
from tests.support.fake_github import FakeGitHub, checked_fake_github
from tests.support.fake_github_state import CheckRun, PullFile
from tests.support.git_http import GitHttpServer
from tests.support.webhooks import load_payload

pytestmark = pytest.mark.anyio
REPO = "octo/budget"
BOT = "beam-bot[bot]"
INSTALLATION = 3
CONFIG = "version: 1\nauto_review:\n  enabled: true\n  debounce: 0s\n"
RESETS = "It resets at 2027-01-16 00:00 UTC."  # FakeClock starts at 2027-01-15 08:00 UTC


class Model(ScriptedClient):
    """The scripted model, given its answers as the test goes."""

    def add(self, *steps: Completion) -> None:
        self._steps.extend(steps)


def patch_of(lines: list[str]) -> str:
    return f"@@ -1 +1,{len(lines)} @@\n a\n" + "".join(f"+{line}\n" for line in lines[1:])


@dataclass
class Rig:
    fake: FakeGitHub
    git: GitHttpServer
    store: Store
    clock: FakeClock
    llm: Model
    queue: JobQueue
    trigger: ReviewTrigger
    job: ReviewJob
    lines: list[str]
    heads: dict[str, int]  # commit -> how many lines a.txt has there

    def compare(self, repo: str, base: str, head: str) -> Any:
        """What GitHub answers for `base...head` on this linear history (fake.compare_resolver)."""
        if base not in self.heads or head not in self.heads:
            return None
        old, new = self.heads[base], self.heads[head]
        hunk = f"@@ -1,{old} +1,{new} @@\n" + "".join(f" {line}\n" for line in self.lines[:old])
        hunk += "".join(f"+{line}\n" for line in self.lines[old:new])
        return "ahead", 1, 0, [PullFile("a.txt", additions=new - old, patch=hunk)]

    @property
    def head(self) -> str:
        return self.fake.pull(REPO, 7).head_sha

    def push(self, line: str) -> str:
        """A commit on the pull request's branch, as GitHub then shows the pull request."""
        self.lines.append(line)
        head = self.git.commit(REPO, {"a.txt": "\n".join(self.lines) + "\n"}, branch="feature")
        self.git.create_pull_ref(REPO, 7, head)
        self.heads[head] = len(self.lines)
        pull = self.fake.pull(REPO, 7)
        pull.head_sha = head
        pull.commits.append(head)
        pull.files = [PullFile("a.txt", additions=len(self.lines) - 1, patch=patch_of(self.lines))]
        return head

    async def send(self, action: str, *, sender: str = "contributor") -> None:
        """A `pull_request` delivery of the pull request as it is now."""
        pull = self.fake.pull(REPO, 7)
        payload = load_payload("pull_request.synchronize.json")
        payload.update(action=action, number=7, installation={"id": INSTALLATION})
        repo = payload["repository"]
        repo.update(name="budget", full_name=REPO, html_url=f"https://github.com/{REPO}")
        repo.update(default_branch="main", clone_url=self.git.repo_url(REPO))
        repo["owner"].update(login="octo")
        body = payload["pull_request"]
        body.update(number=7, state="open", draft=False, labels=[])
        body["html_url"] = f"https://github.com/{REPO}/pull/7"
        body["user"].update(login=pull.user, type="User")
        body["head"].update(ref="feature", sha=pull.head_sha)
        body["base"].update(ref="main", sha=pull.base_sha)
        payload["sender"].update(login=sender, type="User")
        await self.trigger.on_pull_event(PullRequestEvent.model_validate(payload))

    async def work(self) -> int:
        """Run every due automatic-review job, as a worker would; how many ran. (A command's `run`
        job is only taken off the queue: what it would do is not the subject here.)"""
        ran = 0
        while (job := await self.queue.claim("worker", 60.0)) is not None:
            if job.kind == KIND:
                await self.job(job)
                ran += 1
            assert await self.queue.complete(job)
        return ran

    def script_review(self, body: str = "Looks fine.") -> None:
        comment = {"path": "a.txt", "line": 2, "body": "Why b?"}
        call = PendingToolCall("c1", "review_change", {"body": body, "comments": [comment]})
        usage = TokenUsage(prompt_tokens=300, completion_tokens=40, total_tokens=340)
        self.llm.add(Completion.of_tool_calls([call], usage=usage), Completion.of_text("Done."))

    def summary(self) -> str:
        found = [c.body for c in self.fake.comments_on(REPO, 7) if c.user == BOT]
        assert len(found) == 1, found  # one summary comment, edited, never posted twice
        return found[0]

    def checks(self) -> list[CheckRun]:
        return sorted(self.fake.check_runs.values(), key=lambda c: c.id)

    async def counter(self, scope: str) -> int:
        async with self.store.read() as conn:
            found = select(usage_counters.c.amount).where(usage_counters.c.scope == scope)
            return int(sum(r.amount for r in await conn.execute(found)))

    async def review_runs(self) -> list[dict[str, Any]]:
        async with self.store.read() as conn:
            found = select(runs).where(runs.c.skill == "auto_review").order_by(runs.c.created_at)
            return [dict(r._mapping) for r in await conn.execute(found)]


def command(requester: str, n: int) -> RunRequest:
    """A `/beam ask` command as the gate admits it (webhooks/gate.py)."""
    return RunRequest(
        run_id=f"command-{n}",
        repo=REPO,
        number=7,
        skill="ask",
        requester=requester,
        installation_id=INSTALLATION,
        command_key=f"ask\nquestion {n}",
        command_url=f"https://github.com/{REPO}/pull/7#issuecomment-{n}",
        delivery_id=None,
        issue_url=f"https://github.com/{REPO}/issues/7",
    )


@asynccontextmanager
async def rigged(
    db_url: str, clock: FakeClock, tmp_path: Path, limits: Limits, config: str = CONFIG
) -> AsyncIterator[Rig]:
    with checked_fake_github() as fake, GitHttpServer(tmp_path / "git", token=None) as git:
        main = git.seed(REPO, {"a.txt": "a\n"})
        head = git.commit(REPO, {"a.txt": "a\nb\n"}, branch="feature")
        git.create_pull_ref(REPO, 7, head)
        fake.add_repo(REPO, installation_id=INSTALLATION)
        fake.set_file(REPO, "main", ".github/beam.yml", config)
        files = [PullFile("a.txt", additions=1, patch=patch_of(["a", "b"]))]
        fake.add_pull(REPO, number=7, user="contributor", head_sha=head, base_sha=main, files=files)
        async with (
            opened(db_url, clock) as store,
            httpx.AsyncClient(transport=fake.transport(), base_url="http://github.test") as http,
        ):
            api = GitHubApi(http, base_url="http://github.test", retry=RetryPolicy(max_attempts=1))
            github = GitHubApp(api, fake.app_id, fake.key.private_pem)

            async def token(installation_id: int) -> str:
                return (await github.installation_token(installation_id)).get_secret_value()

            llm = Model([])
            deps = RunDeps(
                store,
                Checkouts(tmp_path / "work", tmp_path / "runs"),
                llm,
                token,
                BotIdentity(github, BOT),
                policy=Policy(limits=limits),
            )
            states, queue = ReviewStates(store), JobQueue(store)
            trigger = ReviewTrigger(github, queue, states, enabled_by_default=False)
            job = ReviewJob(github, deps, states, enabled_by_default=False)
            rig = Rig(fake, git, store, clock, llm, queue, trigger, job, ["a", "b"], {main: 1, head: 2})
            fake.compare_resolver = rig.compare
            yield rig


async def test_over_the_repository_limit_commands_used_no_review_runs_and_the_summary_says_so(
    db_url: str, fake_clock: FakeClock, tmp_path: Path
) -> None:
    limits = Limits(runs_per_repo_per_day=2)
    async with rigged(db_url, fake_clock, tmp_path, limits) as rig:
        ledger = Ledger(rig.store)
        assert isinstance(await ledger.admit(command("maintainer", 1), limits), Admitted)
        rig.script_review()
        await rig.send("opened")
        assert await rig.work() == 1
        assert "[1 finding](" in rig.summary() and len(rig.fake.reviews_on(REPO, 7)) == 1
        assert await rig.counter(f"repo:{REPO}") == 2  # the command and the review, on one counter

        first = rig.head
        asked = len(rig.llm.requests)
        second = rig.push("c")
        await rig.send("synchronize")
        assert await rig.work() == 1
        line = (
            f"- `{first[:7]}..{second[:7]}`: skipped; this would go over this repository's limit of 2 "
            f"runs per day (`runs_per_repo_per_day`). {RESETS}"
        )
        assert line in rig.summary()
        assert len(rig.llm.requests) == asked and len(rig.fake.reviews_on(REPO, 7)) == 1
        check = rig.checks()[-1]
        assert (check.head_sha, check.status, check.conclusion) == (second, "completed", "neutral")
        assert check.output is not None and check.output["title"] == "Skipped: over a limit"
        assert "runs_per_repo_per_day" in check.output["summary"]
        assert await rig.counter(f"repo:{REPO}") == 2  # a refusal counts nothing
        state = await rig.job.states.get(REPO, 7)
        assert state is not None and state.reviewed_head == first  # the next review covers `second`
        # The reviews' count holds commands back too: the same ledger, the same day.
        refused = await ledger.admit(command("maintainer", 2), limits)
        assert isinstance(refused, OverLimit) and refused.limit == "runs_per_repo_per_day"


async def test_over_the_authors_daily_limit_nothing_runs_until_the_next_day(
    db_url: str, fake_clock: FakeClock, tmp_path: Path
) -> None:
    limits = Limits(runs_per_user_per_day=1)
    async with rigged(db_url, fake_clock, tmp_path, limits) as rig:
        # The author used their one run today on a command; their pull request's review is refused.
        assert isinstance(await Ledger(rig.store).admit(command("contributor", 1), limits), Admitted)
        await rig.send("opened")
        assert await rig.work() == 1
        head = rig.head
        line = (
            f"- `{rig.fake.pull(REPO, 7).base_sha[:7]}..{head[:7]}`: skipped; this would go over "
            "@contributor's limit of 1 runs per day on this repository (`runs_per_user_per_day`). "
            f"{RESETS}"
        )
        assert line in rig.summary()
        assert rig.llm.requests == [] and rig.fake.reviews_on(REPO, 7) == []
        assert await rig.review_runs() == []
        # A maintainer's push to it still counts for the author (and leaves the maintainer's own runs).
        newest = rig.push("c")
        await rig.send("synchronize", sender="maintainer")
        assert await rig.work() == 1
        # Refused by the same limit again: the one line moves on to the newest head, no second line.
        assert rig.summary().count("@contributor's limit of 1 runs per day") == 1
        assert newest[:7] in rig.summary()
        assert await rig.counter(f"user:{REPO}:maintainer") == 0
        assert rig.llm.requests == []

        rig.clock.advance(16 * 3600)  # midnight UTC: a new day
        rig.script_review()
        await rig.send("reopened")
        assert await rig.work() == 1
        summary = rig.summary()
        assert "[1 finding](" in summary and len(rig.fake.reviews_on(REPO, 7)) == 1
        (run,) = await rig.review_runs()
        assert (run["requester"], run["status"], run["installation_id"]) == ("contributor", "succeeded", 3)
        assert (run["input_tokens"], run["output_tokens"]) == (300, 40)
        assert await rig.counter(f"user:{REPO}:contributor") == 2  # yesterday's command, today's review


async def test_the_repositorys_token_cap_stops_the_review_and_the_summary_says_so(
    db_url: str, fake_clock: FakeClock, tmp_path: Path
) -> None:
    config = CONFIG + "limits:\n  max_tokens_per_run: 1000\n"  # lowers the server's 400,000
    async with rigged(db_url, fake_clock, tmp_path, Limits(max_tokens_per_run=400_000), config) as rig:
        read = PendingToolCall("c1", "read_file", {"path": "a.txt"})
        usage = TokenUsage(prompt_tokens=900, completion_tokens=200, total_tokens=1100)
        rig.llm.add(Completion.of_tool_calls([read], usage=usage), Completion.of_text("never"))
        await rig.send("opened")
        assert await rig.work() == 1
        line = (
            "(full review): stopped at the token limit of a run (1,000 tokens) (`max_tokens_per_run`) "
            "before it posted a review; the next push reviews these commits again"
        )
        assert line in rig.summary()
        assert len(rig.llm.requests) == 1 and rig.fake.reviews_on(REPO, 7) == []
        check = rig.checks()[-1]
        assert (check.status, check.conclusion) == ("completed", "neutral")
        assert check.output is not None and check.output["title"] == "Stopped at a limit"
        assert "`max_tokens_per_run`" in check.output["summary"]
        (run,) = await rig.review_runs()
        assert (run["input_tokens"], run["output_tokens"]) == (900, 200)
        assert await Ledger(rig.store).month_tokens(INSTALLATION) == 1100
        state = await rig.job.states.get(REPO, 7)
        assert state is not None and state.reviewed_head is None


async def test_a_retried_job_and_a_redelivered_push_count_once(
    db_url: str, fake_clock: FakeClock, tmp_path: Path
) -> None:
    limits = Limits(runs_per_repo_per_day=10, runs_per_user_per_day=10)
    async with rigged(db_url, fake_clock, tmp_path, limits) as rig:
        rig.script_review()
        await rig.send("opened")
        await rig.send("opened")  # redelivered under a new delivery id: the head is already queued
        job = await rig.queue.claim("worker", 60.0)
        assert job is not None and await rig.queue.claim("worker", 60.0) is None
        # GitHub fails after the review was admitted: the job waits for GitHub, as the same run.
        failing = rig.fake.inject("GET", r"/pulls/7/comments", status=502, times=None)
        with pytest.raises(Reschedule):
            await rig.job(job)
        assert await rig.counter(f"repo:{REPO}") == 1
        failing.times = 0
        await rig.job(job)
        assert await rig.queue.complete(job)
        assert "[1 finding](" in rig.summary() and len(rig.fake.reviews_on(REPO, 7)) == 1
        await rig.send("synchronize")  # the reviewed head again: nothing queued, nothing counted
        assert await rig.work() == 0
        assert await rig.counter(f"repo:{REPO}") == 1
        assert await rig.counter(f"user:{REPO}:contributor") == 1
        (run,) = await rig.review_runs()
        assert run["status"] == "succeeded" and run["job_id"] is None
