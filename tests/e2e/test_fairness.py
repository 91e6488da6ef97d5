"""Fairness across installations on PostgreSQL with two `beam-bot worker` processes: installation A
queued many commands before installation B queued one, and B's is served before most of A's.

The position is measured, not the time: each `/beam help` is answered with one comment on the fake
GitHub, whose ids grow in the order the answers were posted.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from bot.app.jobs.store import Store
from bot.app.web.intake import installation_of, job_key_for
from tests.support.bot_process import bot_stack, wait_for
from tests.support.webhooks import issue_comment_payload

pytestmark = pytest.mark.postgres
A_REPO, B_REPO = "alpha/app", "beta/app"
A_COMMANDS = 24
BOT = "beam-bot[bot]"


async def queue_commands(url: str, commands: list[tuple[str, int, int]]) -> None:
    """Store the deliveries as intake stores them, all sent at once: they share one group commit, so
    the whole backlog (A's commands, then B's) is there before either worker can claim any of it."""
    store = await Store.open(url)

    async def send(n: int, repo: str, number: int, installation: int) -> None:
        payload = issue_comment_payload(
            "/beam help",
            repo=repo,
            number=number,
            commenter="maintainer",
            comment_id=10_000 + n,
            installation_id=installation,
            on_pull_request=False,
        )
        body = json.dumps(payload).encode()
        key, owner = job_key_for(payload), installation_of(payload)
        assert await store.accept_delivery(
            f"d-{n}", "issue_comment", "created", body, key, installation_id=owner
        )

    try:
        async with anyio.create_task_group() as tg:
            for n, (repo, number, installation) in enumerate(commands):
                tg.start_soon(send, n, repo, number, installation)
    finally:
        await store.close()


def test_one_installation_cannot_starve_another(tmp_path: Path, empty_pg_url: str) -> None:
    pg_database_url = empty_pg_url
    env = {
        "BEAM_DATABASE_URL": pg_database_url,
        "BEAM_CONCURRENCY": "1",
        "BEAM_BOT_LOGIN": BOT,
        "BEAM_MAX_CONCURRENCY_PER_INSTALLATION": "1",
        "BEAM_QUEUE_POLL_INTERVAL": "0.2",
    }
    with bot_stack(tmp_path, **env) as bot:
        bot.fake.add_repo(A_REPO, installation_id=1)
        bot.fake.add_repo(B_REPO, installation_id=2)
        for number in range(1, A_COMMANDS + 1):
            bot.fake.add_issue(A_REPO, number=number)
        bot.fake.add_issue(B_REPO, number=1)
        # Each answer takes longer than a poll: while one process holds an installation's one slot,
        # the other polls and finds the other installation's job, so both processes serve (without
        # it, one process could complete-and-claim all 25 jobs before the other's first poll).
        bot.fake.inject("POST", r"/issues/\d+/comments$", status=None, times=None, delay=0.25)
        commands = [(A_REPO, n, 1) for n in range(1, A_COMMANDS + 1)] + [(B_REPO, 1, 2)]

        workers = []
        try:
            for index in range(2):
                log = (tmp_path / f"worker-{index}.log").open("wb")
                workers.append(
                    subprocess.Popen(
                        [sys.executable, "-m", "bot.cli", "worker"],
                        env=bot.env(),
                        stdout=log,
                        stderr=subprocess.STDOUT,
                    )
                )
                log.close()

            # Both are polling before the backlog lands: one process that started sooner used to
            # answer everything before the other had imported its modules.
            def running() -> bool:
                logs = [(tmp_path / f"worker-{i}.log").read_text() for i in range(2)]
                return all("worker running with concurrency" in log for log in logs)

            wait_for(running, timeout=60, what="both worker processes running")
            anyio.run(queue_commands, pg_database_url, commands)

            def answers() -> list[tuple[int, str]] | None:
                found = sorted((c.id, c.repo) for c in bot.fake.comments.values() if c.user == BOT)
                return found if len(found) == len(commands) else None

            answered = wait_for(answers, timeout=90, what="every command answered")
        finally:
            for worker in workers:
                worker.terminate()
                worker.wait(15)
    order = [repo for _, repo in answered]
    position = order.index(B_REPO)  # 0-based: how many of A's answers came first
    print(f"installation B's command was answered after {position} of A's {A_COMMANDS}")
    assert position < A_COMMANDS // 2, order
    logs = [(tmp_path / f"worker-{i}.log").read_text() for i in range(2)]
    assert all("started" in log for log in logs), logs  # both processes served jobs
