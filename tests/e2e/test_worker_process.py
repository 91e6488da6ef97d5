"""`beam-bot worker` beside `beam-bot serve` on one PostgreSQL database: jobs are shared, run once each."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.crash_support import seed_pulls
from tests.support.bot_process import SECRET, BotProcess, bot_stack, comment_payload, wait_for
from tests.support.webhooks import delivery, issue_comment_payload

pytestmark = pytest.mark.postgres
REPO = "octo/many"
PULLS = range(1, 7)


@pytest.fixture
def bot(tmp_path: Path, empty_pg_url: str) -> Iterator[BotProcess]:
    with bot_stack(tmp_path, BEAM_DATABASE_URL=empty_pg_url, BEAM_CONCURRENCY="1") as bot:
        seed_pulls(bot, REPO, PULLS)
        bot.start()
        yield bot


def test_a_separate_worker_process_shares_the_queue(bot: BotProcess) -> None:
    worker_log = bot.work_dir.parent / "worker.log"
    with worker_log.open("wb") as log:
        worker = subprocess.Popen(
            [sys.executable, "-m", "bot.cli", "worker"], env=bot.env(), stdout=log, stderr=subprocess.STDOUT
        )
    try:
        for number in PULLS:
            bot.llm.enqueue(
                {
                    "choices": [
                        {
                            "index": 0,
                            "finish_reason": "stop",
                            "message": {"role": "assistant", "content": f"Summary {number}."},
                        }
                    ],
                    "id": "x",
                    "object": "chat.completion",
                    "created": 1,
                    "model": "fake-model",
                },
                delay=0.4,
            )
        for number in PULLS:
            comment = bot.fake.add_comment(REPO, number, "/beam summarize", user="maintainer")
            payload = issue_comment_payload(
                "/beam summarize", repo=REPO, number=number, commenter="maintainer", comment_id=comment.id
            )
            payload["repository"]["default_branch"] = "main"
            assert (
                bot.send(delivery("issue_comment", comment_payload(bot, payload, REPO), SECRET)).status_code
                == 202
            )

        def answered() -> bool:
            for number in PULLS:
                finals = [
                    c
                    for c in bot.fake.comments_on(REPO, number)
                    if c.user == "beam-bot[bot]" and "Summary" in c.body
                ]
                if len(finals) != 1:
                    return False
            return True

        wait_for(answered, timeout=60, what="every pull request answered")
    finally:
        worker.terminate()
        worker.wait(15)
    # Each command is a delivery job, and its admitted run a `run` job of its own.
    served = set(re.findall(r"job (\d+) \((?:delivery|run),", bot.log()))
    worked = set(re.findall(r"job (\d+) \((?:delivery|run),", worker_log.read_text()))
    assert served and worked, (bot.log()[-2000:], worker_log.read_text()[-2000:])
    assert served | worked == {str(n) for n in range(1, 2 * len(PULLS) + 1)}
    assert not served & worked  # no job ran in both processes
    assert len(bot.llm.requests) == len(PULLS)
