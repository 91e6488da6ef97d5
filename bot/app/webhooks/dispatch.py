"""From a claimed job to its handler: deliveries by (event, action), other kinds by name.

Built once by assembly.py with every handler it will ever call; nothing is added afterwards. Before
each job it sweeps run trees left by jobs that died for good (at most once an hour).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping
from types import MappingProxyType

from bot.app.git.checkout import Checkouts
from bot.app.jobs.queue import Job
from bot.app.jobs.signals import PermanentError
from bot.app.jobs.workers import Handler
from bot.app.webhooks.handlers import Webhooks

log = logging.getLogger("beam.jobs")

DELIVERY = "delivery"
SWEEP_EVERY = 3600.0  # seconds between sweeps of run trees left by jobs that died for good


class Sweeper:
    """Removes run trees older than `max_age`: a retried run cleans its own, this the rest."""

    def __init__(self, checkouts: Checkouts, max_age: float) -> None:
        self.checkouts = checkouts
        self.max_age = max_age
        self.last = float("-inf")

    async def __call__(self) -> None:
        now = time.monotonic()
        if now - self.last < SWEEP_EVERY:
            return
        self.last = now
        removed = await self.checkouts.cleanup_stale(self.max_age)
        if removed:
            log.info("removed %d stale run trees", len(removed))


class JobDispatcher:
    def __init__(self, webhooks: Webhooks, kinds: Mapping[str, Handler], sweep: Sweeper) -> None:
        if DELIVERY in kinds:
            raise ValueError(f"job kind {DELIVERY!r} is the webhooks' own")
        self.webhooks = webhooks
        self.kinds: Mapping[str, Handler] = MappingProxyType(dict(kinds))
        self.sweep = sweep

    async def handle_job(self, job: Job) -> None:
        await self.sweep()
        if job.kind == DELIVERY:
            if job.delivery_payload is None or job.event is None:
                raise PermanentError(f"job {job.id} has no delivery")
            try:
                data = json.loads(job.delivery_payload)
            except ValueError as error:
                raise PermanentError(f"delivery {job.delivery_id} is not JSON") from error
            if not isinstance(data, dict):
                raise PermanentError(f"delivery {job.delivery_id} is not a JSON object")
            await self.webhooks.handle(job, job.event, data)
            return
        handler = self.kinds.get(job.kind)
        if handler is None:
            raise PermanentError(f"unknown job kind {job.kind!r}")
        await handler(job)
