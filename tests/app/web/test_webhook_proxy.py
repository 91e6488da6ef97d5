"""The webhook proxy channel: deliveries read from a local smee-format SSE server reach the same intake."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import anyio
import httpx
import pytest
from starlette.applications import Starlette

from bot.app.settings import Settings
from bot.app.web.proxy import WebhookProxy, delivery_from_message, proxy_running
from tests.support.fake_github import shared_app_key
from tests.support.smee_server import SmeeChannels, serve_smee
from tests.support.web_app import job_rows, registered_settings, running_app
from tests.support.webhooks import delivery, load_payload, sign

SECRET = "proxy-test-webhook-secret"


def github_body(text: str = "/beam help") -> bytes:
    """A payload as GitHub sends it: compact JSON, non-ASCII as UTF-8."""
    payload = load_payload("issue_comment.created.issue.json")
    payload["comment"]["body"] = text
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()


def post_to_channel(url: str, body: bytes, delivery_id: str, secret: str = SECRET) -> None:
    """What GitHub does: POST the signed delivery to the hook URL, here the channel."""
    headers = delivery("issue_comment", body, secret, delivery_id=delivery_id).headers
    response = httpx.post(url, content=body, headers=headers, timeout=10)
    assert response.status_code == 200


async def wait_for(check: Callable[[], Awaitable[bool]], what: str, seconds: float = 15) -> None:
    with anyio.fail_after(seconds):
        while not await check():
            await anyio.sleep(0.02)
    assert await check(), what


@pytest.fixture
def smee() -> Iterator[tuple[str, SmeeChannels]]:
    with serve_smee() as pair:
        yield pair


def app_settings(tmp_path: Path, proxy_url: str) -> Settings:
    return registered_settings(tmp_path, SECRET, app_id=99, webhook_proxy_url=proxy_url)


async def delivery_ids(app: Starlette) -> list[str]:
    return [row["delivery_id"] for row in await job_rows(app)]


def test_a_smee_message_gives_back_githubs_bytes_and_headers() -> None:
    body = github_body('héllo ✓ <b>&</b> "quoted" \\ tab\t and\nnewline \u2028')
    message = json.loads(body)
    smee_data = json.dumps(
        {
            "host": "smee.io",
            "x-github-event": "issue_comment",
            "x-github-delivery": "d-1",
            "x-hub-signature-256": sign(body, SECRET),
            "content-type": "application/json",
            "content-length": "999",
            "body": message,
            "query": {},
            "timestamp": 1,
        },
        separators=(",", ":"),
        ensure_ascii=False,
    )
    got = delivery_from_message(smee_data)
    assert got is not None
    headers, raw = got
    assert raw == body
    assert dict(headers) == {
        "x-github-event": "issue_comment",
        "x-github-delivery": "d-1",
        "x-hub-signature-256": sign(body, SECRET),
        "content-type": "application/json",
        "content-length": str(len(body)),
    }
    assert delivery_from_message("{}") is None
    assert delivery_from_message("not json") is None


@pytest.mark.anyio
async def test_deliveries_through_the_channel_pass_the_same_intake(
    tmp_path: Path, smee: tuple[str, SmeeChannels]
) -> None:
    base, channels = smee
    url = f"{base}/chan-1"
    settings = app_settings(tmp_path, url)
    async with running_app(settings) as (app, _):
        proxy = app.state.webhook_proxy
        assert isinstance(proxy, WebhookProxy)

        async def connected() -> bool:
            return proxy.connected

        await wait_for(connected, "the proxy connects")
        await anyio.to_thread.run_sync(post_to_channel, url, github_body("/beam help é ✓"), "via-proxy-1")
        await anyio.to_thread.run_sync(post_to_channel, url, github_body(), "forged", "not-the-secret")
        await anyio.to_thread.run_sync(post_to_channel, url, github_body(), "via-proxy-2")
        await anyio.to_thread.run_sync(post_to_channel, f"{base}/other", github_body(), "other-channel")

        async def three_seen() -> bool:
            return sum(proxy.delivered.values()) >= 3

        await wait_for(three_seen, "three deliveries read")
        assert await delivery_ids(app) == ["via-proxy-1", "via-proxy-2"]
        # The forged one met the signature check of POST /webhooks.
        assert proxy.delivered == {202: 2, 401: 1}
    assert channels.connections[0]["channel"] == "chan-1"


@pytest.mark.anyio
async def test_reconnects_without_loss_or_duplicates(tmp_path: Path) -> None:
    # A channel that replays its whole backlog on every connection: the store's dedupe by delivery
    # id keeps each delivery once.
    with serve_smee(SmeeChannels(replay="all")) as (base, channels):
        url = f"{base}/chan-2"
        settings = app_settings(tmp_path, url)
        async with running_app(settings) as (app, _):
            proxy = app.state.webhook_proxy
            assert isinstance(proxy, WebhookProxy)

            def connections(n: int) -> Callable[[], Awaitable[bool]]:
                async def check() -> bool:
                    return proxy.connected and proxy.connections >= n

                return check

            await wait_for(connections(1), "first connection")
            for n in range(3):
                await anyio.to_thread.run_sync(post_to_channel, url, github_body(), f"before-{n}")

            async def three() -> bool:
                return len(await delivery_ids(app)) == 3

            await wait_for(three, "three stored")
            httpx.post(f"{base}/_control/drop", timeout=10)
            await wait_for(connections(2), "reconnected")
            await anyio.to_thread.run_sync(post_to_channel, url, github_body(), "after-0")

            async def four_read() -> bool:
                return sum(proxy.delivered.values()) >= 7  # 3, then 3 replayed + 1

            await wait_for(four_read, "replay and new delivery read")
            assert await delivery_ids(app) == ["before-0", "before-1", "before-2", "after-0"]
        # The reconnect said where it stopped, so a channel with a backlog can replay just the rest.
        assert channels.connections[0]["last_event_id"] is None
        assert channels.connections[1]["last_event_id"] == "2"


@pytest.mark.anyio
async def test_backs_off_while_the_channel_refuses_then_reads_it() -> None:
    got: list[tuple[dict[str, str], bytes]] = []

    async def deliver(headers: list[tuple[str, str]], body: bytes) -> int:
        got.append((dict(headers), body))
        return 202

    with serve_smee(SmeeChannels(refuse=[503, 502, 404], replay="after")) as (base, channels):
        url = f"{base}/chan-3"
        async with proxy_running(url, deliver, min_backoff=0.01, max_backoff=0.05) as proxy:
            assert proxy is not None
            with anyio.fail_after(15):
                while not proxy.connected:
                    await anyio.sleep(0.01)
            body = github_body()
            await anyio.to_thread.run_sync(post_to_channel, url, body, "late")
            with anyio.fail_after(15):
                while not got:
                    await anyio.sleep(0.01)
    assert channels.attempts == 4
    assert got[0][0]["x-github-delivery"] == "late"
    assert got[0][1] == body


@pytest.mark.anyio
async def test_no_proxy_without_the_setting(tmp_path: Path) -> None:
    settings = Settings(
        _env_file=None,
        work_dir=tmp_path / "work",
        app_id=99,
        private_key=shared_app_key().private_pem,
        webhook_secret=SECRET,
    )
    async with running_app(settings) as (app, _):
        assert app.state.webhook_proxy is None
