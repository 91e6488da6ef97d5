"""The App's webhook in the fake GitHub: deliveries made, recorded as GitHub records them, and redelivered.

`fake.hooks.deliver(delivery)` POSTs a signed delivery to `fake.hooks.url` (the bot's
`/webhooks`) and records the attempt with what answered: the status code, or 0 and "failed to
connect" / "timed out" when nothing did. `GET /app/hook/deliveries` lists the attempts newest
first, in cursor pages (a `Link` header with `cursor=`), and `POST /app/hook/deliveries/{id}/attempts`
answers 202 and then sends the same body with the same headers (the same X-GitHub-Delivery GUID)
again, in a thread of its own, recording that attempt as a redelivery. Issue 32.
"""

from __future__ import annotations

import http
import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import httpx

from tests.support.fake_github_handlers import Answer, Ctx, FakeHandlers, Reply, operation
from tests.support.fake_github_state import iso
from tests.support.webhooks import Delivery

HOOK_TIMEOUT = 10.0  # GitHub gives a webhook ten seconds to answer


@dataclass
class Attempt:
    id: int
    delivery: Delivery
    delivered_at: float
    redelivery: bool
    status_code: int = 0
    status: str = "pending"
    duration: float = 0.0

    def item(self) -> dict[str, Any]:
        """The attempt as `GET /app/hook/deliveries` lists it (schema `hook-delivery-item`)."""
        payload = self.delivery.json()
        installation = payload.get("installation") if isinstance(payload, dict) else None
        repository = payload.get("repository") if isinstance(payload, dict) else None
        return {
            "id": self.id,
            "guid": self.delivery.delivery_id,
            "delivered_at": iso(self.delivered_at),
            "redelivery": self.redelivery,
            "duration": self.duration,
            "status": self.status,
            "status_code": self.status_code,
            "event": self.delivery.event,
            "action": payload.get("action") if isinstance(payload, dict) else None,
            "installation_id": installation.get("id") if isinstance(installation, dict) else None,
            "repository_id": repository.get("id") if isinstance(repository, dict) else None,
            "throttled_at": None,
        }


@dataclass
class HookDeliveries:
    """Every attempt of the App's webhook, and where it is sent."""

    clock: Callable[[], float] = time.time
    url: str | None = None
    attempts: list[Attempt] = field(default_factory=list)
    redelivery_requests: list[int] = field(default_factory=list)
    send_redeliveries: bool = True  # False: redeliveries are asked for and never sent (queued)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1_000_001))
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _threads: list[threading.Thread] = field(default_factory=list)

    def deliver(self, delivery: Delivery, *, redelivery: bool = False) -> Attempt:
        """POSTs `delivery` to `url` now, as GitHub would, and records the attempt."""
        with self._lock:
            attempt = Attempt(next(self._ids), delivery, self.clock(), redelivery)
        started = time.monotonic()
        try:
            if self.url is None:
                raise httpx.ConnectError("no hook URL")
            # Plain HTTP on loopback or the test bridge: no CA bundle to load, no proxy from the environment.
            response = httpx.post(
                self.url,
                content=delivery.body,
                headers=delivery.headers,
                timeout=HOOK_TIMEOUT,
                verify=False,  # noqa: S501 - never HTTPS
                trust_env=False,
            )
        except httpx.TimeoutException:
            attempt.status_code, attempt.status = 0, "timed out"
        except httpx.TransportError:
            attempt.status_code, attempt.status = 0, "failed to connect"
        else:
            attempt.status_code = response.status_code
            phrase = http.HTTPStatus(response.status_code).phrase
            attempt.status = "OK" if 200 <= response.status_code < 300 else f"Invalid HTTP Response: {phrase}"
        attempt.duration = round(time.monotonic() - started, 3)
        with self._lock:  # listed once it is over, as GitHub lists it
            self.attempts.append(attempt)
        return attempt

    def redeliver(self, delivery_id: int) -> None:
        found = next((a for a in self.attempts if a.id == delivery_id), None)
        if found is None:
            raise Answer(404, "Not Found")
        self.redelivery_requests.append(delivery_id)
        if not self.send_redeliveries:
            return
        thread = threading.Thread(target=self.deliver, args=(found.delivery,), kwargs={"redelivery": True})
        thread.daemon = True
        self._threads.append(thread)
        thread.start()

    def of(self, guid: str) -> list[Attempt]:
        return [a for a in self.attempts if a.delivery.delivery_id == guid]

    def join(self, timeout: float = HOOK_TIMEOUT + 2) -> None:
        """Waits for the redeliveries sent so far (bounded by GitHub's own timeout)."""
        for thread in list(self._threads):
            thread.join(timeout)


def _with_cursor(url: str, cursor: str) -> str:
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query) if k != "cursor"] + [("cursor", cursor)]
    return urlunsplit(parts._replace(query=urlencode(query)))


@operation("apps/list-webhook-deliveries")
def list_deliveries(fake: FakeHandlers, ctx: Ctx) -> Reply:
    hooks: HookDeliveries = fake.hooks  # type: ignore[attr-defined]
    per_page = min(int(ctx.query.get("per_page", 30)), 100)
    newest_first = sorted(hooks.attempts, key=lambda a: a.id, reverse=True)
    status = ctx.query.get("status")
    if status is not None:
        newest_first = [a for a in newest_first if (200 <= a.status_code < 300) == (status == "success")]
    cursor = ctx.query.get("cursor")
    if cursor is not None:
        if not cursor.startswith("v1_") or not cursor[3:].isdigit():
            raise Answer(400, "Bad Request")
        newest_first = [a for a in newest_first if a.id < int(cursor[3:])]
    page = newest_first[:per_page]
    headers = {}
    if len(newest_first) > per_page:
        headers["Link"] = f'<{_with_cursor(ctx.url, f"v1_{page[-1].id}")}>; rel="next"'
    return Reply(200, [a.item() for a in page], headers)


@operation("apps/redeliver-webhook-delivery")
def redeliver(fake: FakeHandlers, ctx: Ctx) -> Reply:
    hooks: HookDeliveries = fake.hooks  # type: ignore[attr-defined]
    hooks.redeliver(ctx.params["delivery_id"])
    return Reply(202, {})
