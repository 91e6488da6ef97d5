"""Deliveries GitHub could not hand over, asked again (issue 32): GitHub never redelivers on its own.

A delivery fails while the bot is down (a deploy longer than GitHub's timeout, a crash, a host
outage) or when intake refuses it (503: a full byte budget, a database that does not answer).
GitHub keeps every attempt for three days and redelivers one when asked:
https://docs.github.com/webhooks/using-webhooks/handling-failed-webhook-deliveries

At start-up and every `interval` seconds, the process holding the `redelivery` lease (jobs/leases.py;
one on all hosts) lists the App's deliveries (`GET /app/hook/deliveries`, the App's JWT, newest
first, cursor pages) back to `lookback` seconds, and asks GitHub to redeliver (`POST
/app/hook/deliveries/{id}/attempts`) every event none of whose attempts was answered 2xx and whose
GUID the bot has no record of. Each request is recorded first (jobs/redeliveries.py), so no sweep
asks twice for the same attempt. A redelivery carries the same X-GitHub-Delivery GUID, so it goes
through intake and its dedupe like the first attempt: a command answered once is never answered
twice. Its handler says the command was recovered (webhooks/handlers.py).

A process's first sweep looks back the whole `lookback`; its later ones only to a margin before the
previous one, since an attempt is listed once, at the time it was made.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable
from datetime import UTC, datetime

import anyio

from bot.app.github.api import GitHubError
from bot.app.github.auth import GitHubApp
from bot.app.github.models import HookDelivery
from bot.app.jobs.leases import Leases
from bot.app.jobs.redeliveries import Missed, Redeliveries
from bot.app.jobs.store import Store
from bot.app.web.metrics import Metrics

log = logging.getLogger("beam.redelivery")

LEASE = "redelivery"
MAX_LOOKBACK = 3 * 86400.0  # what GitHub keeps
OVERLAP = 120.0  # a later sweep looks this far before the previous one (attempts still in flight)


def missed_deliveries(listed: Iterable[HookDelivery]) -> list[Missed]:
    """One `Missed` per event (GUID) none of whose listed attempts was answered 2xx: its newest
    failed attempt (the one to redeliver), dated by its oldest (when the event happened)."""
    succeeded: set[str] = set()
    newest: dict[str, HookDelivery] = {}
    first: dict[str, float] = {}
    for attempt in listed:
        if attempt.succeeded:
            succeeded.add(attempt.guid)
            continue
        at = attempt.delivered_at.timestamp()
        first[attempt.guid] = min(first.get(attempt.guid, at), at)
        if attempt.guid not in newest or attempt.delivered_at > newest[attempt.guid].delivered_at:
            newest[attempt.guid] = attempt
    return [
        Missed(attempt.id, guid, attempt.event, first[guid])
        for guid, attempt in newest.items()
        if guid not in succeeded
    ]


class RedeliverySweep:
    """The sweep of one process; `run()` until cancelled, or `sweep()` once (tests)."""

    def __init__(
        self,
        app: GitHubApp,
        store: Store,
        metrics: Metrics,
        *,
        interval: float,
        lookback: float = MAX_LOOKBACK,
        owner: str | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.app = app
        self.store = store
        self.metrics = metrics
        self.interval = interval
        self.lookback = min(lookback, MAX_LOOKBACK)
        self.owner = owner or f"redelivery-{uuid.uuid4().hex[:12]}"
        self.clock = clock or store.clock
        self.leases = Leases(store)
        self.records = Redeliveries(store)
        self._last: float | None = None  # when this process's previous sweep began

    @property
    def lease_seconds(self) -> float:
        # Renewed by every sweep; a holder that died hands over after two intervals.
        return max(2 * self.interval, 10.0)

    async def run(self) -> None:
        """Sweeps now and every `interval` seconds; gives the lease up when cancelled."""
        try:
            while True:
                try:
                    await self.sweep()
                except GitHubError as error:  # GitHub down or refusing: said in one line, tried later
                    log.warning(
                        "the redelivery sweep could not ask GitHub (%s); again in %g s", error, self.interval
                    )
                except Exception:
                    log.exception("the redelivery sweep failed; it runs again in %g s", self.interval)
                await anyio.sleep(self.interval)
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                try:
                    await self.leases.release(LEASE, self.owner)
                except Exception:
                    log.warning("could not give up the redelivery lease; it expires by itself")

    async def sweep(self) -> int | None:
        """One sweep: the number of deliveries asked again, or None when another process holds it."""
        if not await self.leases.acquire(LEASE, self.owner, self.lease_seconds):
            return None
        began = self.clock()
        since = began - self.lookback
        if self._last is not None:
            since = max(since, self._last - OVERLAP)
        listed = await self.app.hook_deliveries(since)
        missed = missed_deliveries(listed)
        fresh = await self.records.unknown(missed)
        outage_since = min((m.delivered_at for m in missed), default=began)
        asked = 0
        # Recorded first, all in one transaction: what another sweep recorded meanwhile is its own.
        for delivery in await self.records.ask(sorted(fresh, key=lambda m: m.delivered_at), outage_since):
            try:
                await self.app.redeliver(delivery.delivery_id)
            except GitHubError as error:
                log.warning("could not ask GitHub to redeliver %s: %s", delivery.guid, error)
                continue
            asked += 1
        self.metrics.recovered(asked)
        if asked or missed:
            log.info(
                "redelivery sweep: %d deliveries since %s failed and are unknown here (%d attempts "
                "listed); asked GitHub to redeliver %d",
                len(fresh),
                _iso(since),
                len(listed),
                asked,
            )
        else:
            log.debug("redelivery sweep: nothing missed among %d attempts", len(listed))
        await self.records.forget_before(began - self.lookback)
        self._last = began
        return asked


def _iso(moment: float) -> str:
    return datetime.fromtimestamp(moment, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
