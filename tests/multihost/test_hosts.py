"""Issue 23: beam-bot over several hosts that share nothing but PostgreSQL and the network.

Hosts a, b and c are network namespaces (tests/support/netns.py) with work directories of their own;
`serve` runs on a and `beam-bot worker` on b and c. They reach the fake GitHub, the git server and
PostgreSQL only over their veth. A `/beam review` is done by a worker on another host than the one that
took the webhook, and a soak kills a random host's process with SIGKILL under load.
"""

from __future__ import annotations

import queue
import random
import threading

import pytest

from tests.e2e.crash_support import NUMBER, REPO, seed_pulls, seed_review_pull
from tests.e2e.test_crash_effects import script_review
from tests.multihost.hosts_support import BOT, occupy, send_command, wait_on
from tests.support.multihost import Cluster, HostProcess
from tests.support.soak_checks import assert_soak_ended_clean

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(170)]


def test_a_review_taken_on_host_a_is_done_by_a_worker_on_another_host(hosts: Cluster) -> None:
    serve = hosts.process("a", "serve")
    seed_review_pull(serve)
    serve.start()
    occupy(serve, 15)
    before = {row["id"] for row in hosts.job_rows()}
    workers = [hosts.start(name, "worker") for name in ("b", "c")]
    script_review(serve)
    command = send_command(serve, REPO, NUMBER, "/beam review")

    reviews = wait_on(hosts, lambda: serve.fake.reviews_on(REPO, NUMBER), 60, "the review")
    wait_on(hosts, lambda: _final(hosts, REPO, NUMBER), 30, "the final tracking comment")
    assert len(reviews) == 1 and reviews[0].body.startswith("The fix is missing a test."), [
        r.body for r in reviews
    ]
    assert "Posted a review" in (_final(hosts, REPO, NUMBER) or "")
    eyes = [r for r in serve.fake.reactions_on(command) if r.user == BOT and r.content == "eyes"]
    assert len(eyes) == 1

    # The command's jobs (its delivery, its run) were done on b or c, each by one process only.
    new = {str(row["id"]): row["kind"] for row in hosts.job_rows() if row["id"] not in before}
    assert {"delivery", "run"} <= set(new.values()), new
    on_a = set(serve.jobs_run())
    by_worker = [set(w.jobs_run()) & set(new) for w in workers]
    assert not on_a & set(new), f"serve on a ran {on_a & set(new)} of the review's jobs"
    assert by_worker[0] | by_worker[1] >= {i for i, kind in new.items() if kind in ("delivery", "run")}
    assert not by_worker[0] & by_worker[1]
    hosts.fake.assert_no_violations()


def _final(hosts: Cluster, repo: str, number: int) -> str | None:
    for comment in hosts.fake.comments_on(repo, number):
        body = comment.body
        if (
            comment.user == BOT
            and "beam-run:" in body
            and "Working on" not in body
            and "retrying" not in body
        ):
            return str(body)
    return None


# -- kill -9 of a random host under load ------------------------------------------------------------

SOAK_REPO = "octo/soak"
PULLS = range(1, 7)
HELPS = 60
SUMMARIES = 12
KILLS = 4


def chaos(procs: list[HostProcess], requests: queue.Queue[bool], kills: list[str]) -> None:
    """On each request, SIGKILL the process of a random host and start it again on that host."""
    rng = random.Random(23)
    while requests.get(timeout=150):
        victim = rng.choice([p for p in procs if p.alive()])
        victim.kill()
        assert victim.host is not None
        kills.append(victim.host.name)
        victim.start()


def test_kill_9_of_a_random_host_under_load_ends_with_no_duplicate_and_no_lost_job(hosts: Cluster) -> None:
    hosts.env.update(BEAM_CONCURRENCY="2", BEAM_LEASE_SECONDS="3")
    serve = hosts.process("a", "serve")
    serve.llm.fallback_text = "A short summary."
    seed_pulls(serve, SOAK_REPO, PULLS)
    serve.start()
    procs = [serve, *(hosts.start(name, "worker") for name in ("b", "c"))]
    requests: queue.Queue[bool] = queue.Queue()
    kills: list[str] = []
    monkey = threading.Thread(target=chaos, args=(procs, requests, kills), daemon=True)
    monkey.start()
    commands = [("/beam help", PULLS[i % len(PULLS)]) for i in range(HELPS)]
    commands += [("/beam summarize", PULLS[i % len(PULLS)]) for i in range(SUMMARIES)]
    random.Random(1).shuffle(commands)
    kill_at = set(random.Random(2).sample(range(5, len(commands)), KILLS))
    try:
        for index, (body, number) in enumerate(commands):
            if index in kill_at:
                requests.put(True)
            send_command(serve, SOAK_REPO, number, body, patient=True)
    finally:
        requests.put(False)
        monkey.join(60)
    assert not monkey.is_alive() and len(kills) == KILLS, f"the soak did not kill as asked: {kills}"
    for proc in procs:
        if not proc.alive():
            proc.start()
    wait_on(hosts, hosts.jobs_done, 90, f"every job done after kills on {kills}")

    assert_soak_ended_clean(hosts.fake, BOT, HELPS, SUMMARIES)
    # Work was done on every host, not by one process that happened to survive.
    assert all(proc.jobs_run() for proc in procs), {p.host.name: len(p.jobs_run()) for p in procs if p.host}
    hosts.fake.assert_no_violations()
