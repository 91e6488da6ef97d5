"""Group commit for the webhook path: deliveries arriving while a write is in flight share the next one.

Under load one commit serves many deliveries; a lone delivery still costs one short transaction and
waits for nothing (there is no timer: the batch is whatever arrived during the write before it).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

import anyio


@dataclass(slots=True, eq=False)
class IntakeRequest:
    delivery_id: str
    event: str
    action: str | None
    payload: str
    job_key: str | None
    job_kind: str
    with_job: bool = True  # False: stored for dedupe and audit only (it cannot lead to work)
    done: anyio.Event = field(default_factory=anyio.Event)
    lead: bool = False
    accepted: bool = False
    error: Exception | None = None


class IntakeBatcher:
    """Group commit without a background task: the first caller writes; callers that arrive meanwhile
    wait, and the oldest of them is promoted to write the next batch (so no caller waits for more
    than the batch in flight plus its own)."""

    def __init__(self, write: Callable[[Sequence[IntakeRequest]], Awaitable[set[str]]], max_batch: int = 200):
        self._write = write
        self._max_batch = max_batch
        self._pending: list[IntakeRequest] = []
        self._busy = False

    async def submit(self, request: IntakeRequest) -> bool:
        # Shielded: a cancelled HTTP request must neither half-write nor strand the callers behind it.
        # The wait is bounded by one short transaction.
        with anyio.CancelScope(shield=True):
            self._pending.append(request)
            if self._busy:
                await request.done.wait()  # woken when written, or when promoted to write
            else:
                self._busy = request.lead = True
            if request.lead:
                await self._lead()
        if request.error is not None:
            raise request.error
        return request.accepted

    async def _lead(self) -> None:
        batch = self._pending[: self._max_batch]
        del self._pending[: self._max_batch]
        first: dict[str, IntakeRequest] = {}
        for r in batch:
            first.setdefault(r.delivery_id, r)
        try:
            inserted = await self._write_each(list(first.values()))
            for r in batch:
                primary = first[r.delivery_id]
                r.error = primary.error  # a concurrent redelivery shares the first copy's fate
                r.accepted = r is primary and r.error is None and r.delivery_id in inserted
        except Exception as exc:
            for r in batch:
                r.error = exc
        finally:
            for r in batch:
                r.lead = False
                r.done.set()
            if self._pending:
                self._pending[0].lead = True
                self._pending[0].done.set()
            else:
                self._busy = False

    async def _write_each(self, unique: list[IntakeRequest]) -> set[str]:
        try:
            return await self._write(unique)
        except Exception:
            if len(unique) == 1:
                raise
        # One bad request must not fail the deliveries batched with it: write them one by one.
        inserted: set[str] = set()
        for r in unique:
            try:
                inserted |= await self._write([r])
            except Exception as exc:
                r.error = exc
        return inserted
