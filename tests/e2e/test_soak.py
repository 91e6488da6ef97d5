"""Issue 8: a bounded soak. A few hundred deliveries while bot processes are killed with SIGKILL at
random points of the load and started again; then zero duplicates, zero orphans, zero non-final
comments, every job done.

SQLite: `beam-bot serve` alone is killed. PostgreSQL: serve and two `beam-bot worker` processes.
"""

from __future__ import annotations

import queue
import random
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.e2e.crash_support import seed_pulls
from tests.support.bot_process import SECRET, BotProcess, bot_stack, comment_payload, wait_for
from tests.support.db import pg_database_url_fixture  # noqa: F401 - the fixture, by its name
from tests.support.fleet import Fleet, fleet_on
from tests.support.soak_checks import assert_soak_ended_clean
from tests.support.webhooks import delivery, issue_comment_payload

pytestmark = [pytest.mark.soak, pytest.mark.timeout(170)]
REPO = "octo/soak"
BOT = "beam-bot[bot]"
PULLS = range(1, 9)
HELPS = 200
SUMMARIES = 40
KILLS = 8


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def fleet(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Fleet]:
    with bot_stack(tmp_path, BEAM_CONCURRENCY="2", BEAM_SWEEP_INTERVAL="1") as bot:
        bot.llm.fallback_text = "A short summary."
        seed_pulls(bot, REPO, PULLS)
        with fleet_on(request, bot) as fleet:
            yield fleet


def send_until_accepted(bot: BotProcess, body: str, number: int) -> str:
    """Send one command's delivery as GitHub would: again until the bot acknowledges it."""
    comment = bot.fake.add_comment(REPO, number, body, user="maintainer")
    payload = issue_comment_payload(
        body, repo=REPO, number=number, commenter="maintainer", comment_id=comment.id
    )
    payload["repository"]["default_branch"] = "main"
    sent = delivery("issue_comment", comment_payload(bot, payload, REPO), SECRET)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if bot.send(sent).status_code == 202:
                return sent.headers["X-GitHub-Delivery"]
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    raise AssertionError("a delivery was never accepted")


def chaos(fleet: Fleet, requests: queue.Queue[bool], kills: list[str]) -> None:
    """SIGKILL a random live bot process on each request and start it again at once.

    Kills are driven by the load's progress, not by the clock: on a fast machine a timed monkey
    finished its sleep after the last delivery and killed too little to prove anything.
    """
    rng = random.Random(8)
    while requests.get(timeout=150):
        procs = [("serve", fleet.bot.proc), *((f"worker{i}", p) for i, p in enumerate(fleet.procs))]
        live = [(name, proc) for name, proc in procs if proc is not None and proc.poll() is None]
        name, proc = rng.choice(live)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        kills.append(name)
        fleet.start(None)


def test_soak_with_random_kills(fleet: Fleet) -> None:
    bot = fleet.bot
    fleet.start(None)
    requests: queue.Queue[bool] = queue.Queue()
    kills: list[str] = []
    monkey = threading.Thread(target=chaos, args=(fleet, requests, kills), daemon=True)
    monkey.start()
    commands = [("/beam help", PULLS[i % len(PULLS)]) for i in range(HELPS)]
    commands += [("/beam summarize", PULLS[i % len(PULLS)]) for i in range(SUMMARIES)]
    random.Random(1).shuffle(commands)
    kill_at = set(random.Random(2).sample(range(10, len(commands)), KILLS))
    try:
        for index, (body, number) in enumerate(commands):
            if index in kill_at:
                requests.put(True)
            send_until_accepted(bot, body, number)
    finally:
        requests.put(False)
        monkey.join(60)
    fleet.start(None)
    assert not monkey.is_alive() and len(kills) == KILLS, f"the soak did not kill as asked: {kills}"
    wait_for(fleet.jobs_done, timeout=90, what=f"every job done after {len(kills)} kills")

    assert_soak_ended_clean(bot.fake, BOT, HELPS, SUMMARIES)
    bot.fake.assert_no_violations()
