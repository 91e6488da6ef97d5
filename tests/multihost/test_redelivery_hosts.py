"""Issue 32 over two hosts that share only PostgreSQL: commands missed while both `serve`s were down
are asked again by one sweep at a time and answered exactly once each."""

from __future__ import annotations

import functools

import pytest

from tests.e2e.crash_support import NUMBER, REPO, seed_review_pull
from tests.e2e.redelivery_support import INTERVAL, post_command, recovered_once
from tests.multihost.hosts_support import wait_on
from tests.support.multihost import Cluster

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(170)]


def test_two_hosts_recover_missed_commands_once(hosts: Cluster) -> None:
    hosts.env["BEAM_REDELIVERY_INTERVAL"] = str(INTERVAL)
    a, b = hosts.process("a", "serve"), hosts.process("b", "serve")
    seed_review_pull(a)
    hosts.fake.hooks.url = f"{b.url}/webhooks"  # GitHub's hook reaches b; a shares the database only
    sent = [post_command(a, REPO, NUMBER, "/beam help") for _ in range(5)]  # both hosts are down
    assert all(attempt.status == "failed to connect" for attempt in hosts.fake.hooks.attempts)
    b.start()  # the host GitHub's hook reaches first, so no redelivery finds it down
    a.start()
    wait = functools.partial(_wait, hosts)
    recovered_once(hosts.fake, REPO, NUMBER, sent, wait)
    asking = [p for p in (a, b) if "asked GitHub to redeliver 5" in p.log()]
    assert len(asking) == 1, hosts.log()  # one sweep asked for all five; the other host's found none


def _wait(hosts: Cluster, check: object, *, timeout: float, what: str) -> object:
    return wait_on(hosts, check, timeout, what)  # type: ignore[arg-type]
