"""Issue 32: deliveries GitHub could not hand over are asked again, once, by one process."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import anyio
import httpx
import pytest

from bot.app.github.api import GitHubApi
from bot.app.github.client import GitHubApp
from bot.app.github.models import HookDelivery
from bot.app.jobs.queue import Job
from bot.app.jobs.redeliveries import MAX_ASKS, Redeliveries
from bot.app.jobs.store import Store
from bot.app.runs import render
from bot.app.settings import Settings
from bot.app.web.metrics import Metrics
from bot.app.web.redelivery import RedeliverySweep, missed_deliveries
from tests.app.web.test_intake import parse_metrics
from tests.support.fake_github import BASE_URL, FakeGitHub, checked_fake_github
from tests.support.fake_github_hooks import Attempt
from tests.support.web_app import registered_settings, running_app, runtime_of
from tests.support.webhooks import delivery, issue_comment_payload

pytestmark = pytest.mark.anyio
SECRET = "redelivery-secret"


def refused_url() -> str:
    """A loopback address where nothing listens: every delivery fails to connect."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}/webhooks"


def command(n: int) -> object:
    payload = issue_comment_payload(f"/beam help {n}", repo="octo/demo", number=7, commenter="maintainer")
    return delivery("issue_comment", payload, SECRET)


def item(id: int, guid: str, code: int, at: float = 1_800_000_000.0) -> HookDelivery:
    return HookDelivery(
        id=id,
        guid=guid,
        delivered_at=datetime.fromtimestamp(at, UTC),
        status_code=code,
        event="issue_comment",
    )


@pytest.fixture
def fake() -> AsyncIterator[FakeGitHub]:
    with checked_fake_github() as fake:
        fake.hooks.url = refused_url()
        yield fake


async def sweeper(fake: FakeGitHub, store: Store, http: httpx.AsyncClient, **kw: object) -> RedeliverySweep:
    app = GitHubApp(GitHubApi(http, base_url=BASE_URL), fake.app_id, fake.key.private_pem)
    return RedeliverySweep(app, store, kw.pop("metrics", Metrics()), interval=300, **kw)  # type: ignore[arg-type]


def test_an_event_is_missed_when_none_of_its_attempts_got_a_2xx() -> None:
    listed = [
        item(5, "a", 503, at=1_800_000_050),  # newest failed attempt of a: the one to redeliver
        item(4, "b", 202),
        item(3, "b", 0),  # b succeeded on a later attempt
        item(2, "a", 0, at=1_800_000_000),
        item(1, "c", 0),
    ]
    missed = {m.guid: m for m in missed_deliveries(listed)}
    assert sorted(missed) == ["a", "c"]
    assert missed["a"].delivery_id == 5 and missed["a"].delivered_at == 1_800_000_000


async def test_a_sweep_asks_once_for_each_missed_unknown_delivery(fake: FakeGitHub, store: Store) -> None:
    sent = [command(n) for n in range(4)]
    for one in sent:
        fake.hooks.deliver(one)  # the bot is down: each fails to connect
    assert all(a.status_code == 0 and a.status == "failed to connect" for a in fake.hooks.attempts)
    # One of them reached the bot by another way (the bot knows its GUID), one succeeded later.
    await store.accept_delivery(sent[0].delivery_id, "issue_comment", "created", b"", None, with_job=False)
    fake.hooks.attempts.append(Attempt(99, sent[1], fake.clock(), True, 202, "OK"))
    metrics = Metrics()
    fake.hooks.send_redeliveries = False  # GitHub has not got round to them yet
    async with httpx.AsyncClient(transport=fake.transport(), base_url=BASE_URL) as http:
        sweep = await sweeper(fake, store, http, metrics=metrics)
        assert await sweep.sweep() == 2
        assert await sweep.sweep() == 0  # remembered: never asked twice
    asked = {a.delivery.delivery_id for a in fake.hooks.attempts if a.id in fake.hooks.redelivery_requests}
    assert asked == {sent[2].delivery_id, sent[3].delivery_id}
    assert len(fake.calls_to("apps/redeliver-webhook-delivery")) == 2
    listing = fake.calls_to("apps/list-webhook-deliveries")
    assert listing and all(c.query.get("per_page") == "100" and c.auth == "jwt" for c in listing)
    assert parse_metrics(metrics.render(mode="normal"))["beam_deliveries_recovered_total"] == 2


async def test_the_listing_is_read_page_by_page_back_to_the_lookback(fake: FakeGitHub, store: Store) -> None:
    for n in range(105):
        fake.hooks.deliver(command(n))
    fake.hooks.send_redeliveries = False
    old = fake.hooks.attempts[0]
    old.delivered_at -= 4 * 86400  # older than GitHub keeps, older than the lookback
    async with httpx.AsyncClient(transport=fake.transport(), base_url=BASE_URL) as http:
        assert await (await sweeper(fake, store, http)).sweep() == 104
    pages = fake.calls_to("apps/list-webhook-deliveries")
    assert len(pages) == 2 and pages[1].query.get("cursor", "").startswith("v1_")
    assert old.id not in fake.hooks.redelivery_requests


async def test_one_process_sweeps_at_a_time(fake: FakeGitHub, store: Store) -> None:
    fake.hooks.deliver(command(1))
    fake.hooks.send_redeliveries = False
    async with httpx.AsyncClient(transport=fake.transport(), base_url=BASE_URL) as http:
        first = await sweeper(fake, store, http, owner="host-a")
        second = await sweeper(fake, store, http, owner="host-b")
        assert await first.sweep() == 1
        assert await second.sweep() is None  # host-a holds the lease
        assert await first.sweep() == 0  # renewed by its holder
        await first.leases.release("redelivery", "host-a")
        assert await second.sweep() == 0  # handed over; and nothing is asked twice
    assert len(fake.hooks.redelivery_requests) == 1


async def test_a_delivery_whose_redeliveries_fail_is_asked_a_bounded_number_of_times(
    fake: FakeGitHub, store: Store
) -> None:
    fake.hooks.deliver(command(1))
    async with httpx.AsyncClient(transport=fake.transport(), base_url=BASE_URL) as http:
        sweep = await sweeper(fake, store, http)
        for _ in range(MAX_ASKS + 2):
            await sweep.sweep()
            fake.hooks.join()  # each redelivery fails too: a new failed attempt
    assert len(fake.hooks.redelivery_requests) == MAX_ASKS


async def test_a_recovered_delivery_says_when_it_was_posted_and_since_when(store: Store) -> None:
    records = Redeliveries(store)
    missed = missed_deliveries([item(7, "guid-7", 0, at=1_800_000_600)])[0]
    assert await records.ask([missed], outage_since=1_800_000_000) == [missed]
    assert await records.ask([missed], outage_since=1_800_000_000) == []  # asked already
    found = await records.recovered("guid-7")
    assert found is not None and await records.recovered("other") is None
    line = render.recovered(found.delivered_at, found.outage_since)
    assert "unavailable when this command was posted (2027-01-15 08:10 UTC" in line
    assert "since 2027-01-15 08:00 UTC" in line


def test_the_fake_lists_deliveries_as_github_describes_them(fake: FakeGitHub) -> None:
    fake.hooks.deliver(command(1))
    operation = next(op for op in fake.spec.operations if op.operation_id == "apps/list-webhook-deliveries")
    assert fake.spec.check_response(operation, 200, [a.item() for a in fake.hooks.attempts]) == []


async def test_the_app_sweeps_at_start_unless_the_interval_is_zero(tmp_path: Path) -> None:
    async def idle(job: Job) -> None:
        return None

    for interval, sweeps in ((300.0, 1), (0.0, 0)):
        fake = FakeGitHub()
        settings = registered_settings(
            tmp_path / str(interval), SECRET, github_api_url=BASE_URL, redelivery_interval=interval
        )
        async with running_app(settings, handler=idle, github_transport=fake.transport()) as (app, _):
            with anyio.fail_after(10):
                while sweeps and not fake.calls_to("apps/list-webhook-deliveries"):
                    await anyio.sleep(0.02)
            assert (runtime_of(app).redelivery is not None) == bool(sweeps)
        assert len(fake.calls_to("apps/list-webhook-deliveries")) == sweeps
        fake.assert_no_violations()


def test_the_lookback_is_at_most_what_github_keeps() -> None:
    assert Settings(_env_file=None).redelivery_lookback == 3 * 86400  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="redelivery_lookback"):
        Settings(_env_file=None, redelivery_lookback=4 * 86400)  # type: ignore[call-arg]


def test_the_fake_answers_a_redelivery_as_github_describes_it(fake: FakeGitHub) -> None:
    operation = next(
        op for op in fake.spec.operations if op.operation_id == "apps/redeliver-webhook-delivery"
    )
    assert fake.spec.check_response(operation, 202, {}) == []
