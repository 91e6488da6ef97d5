"""The effects journal: one row per GitHub write, `intent` before the call and `done` after it.

A write whose row is `done` is never made again: its stored result (the object's id and URL) is
returned. A row left at `intent` means an earlier attempt died somewhere between deciding to write and
recording the answer; the caller then reads GitHub (hidden markers, branch tips, open pull requests)
to find out whether the write happened, because GitHub itself has no idempotency keys. For a write
with a body, the intent also holds the digest of each body an attempt is about to send (`proofs`):
what is found on GitHub is adopted only when its body is one of them (effects/writer.py, issue 40).

A step that is not a GitHub write may keep its answer here too when a retry must not take it again:
a review trigger's hand-over records the generation its delivery started (reviews/trigger.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy import func, select, update

from bot.app.jobs.schema import effects, run_checkpoints
from bot.app.jobs.store import Store

EffectState = Literal["intent", "done"]


@dataclass(frozen=True, slots=True)
class Entry:
    key: str
    kind: str
    state: EffectState
    result: dict[str, Any]
    created_at: float


class Journal:
    """The `effects` table (`lookup`, `intend`, `record`) and the runs' conversation checkpoints."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def lookup(self, key: str) -> Entry | None:
        async with self.store.read() as conn:
            row = (await conn.execute(select(effects).where(effects.c.key == key))).first()
        if row is None:
            return None
        return Entry(row.key, row.kind, row.state, dict(row.result or {}), float(row.created_at))

    async def newest_open_intent(self, prefix: str) -> float | None:
        """When the newest write under `prefix` (a run's keys) was begun and not seen to end, if any:
        a retry waits until it can no longer land before it does anything (effects/writer.py)."""
        query = select(func.max(effects.c.created_at)).where(
            effects.c.key.startswith(prefix, autoescape=True), effects.c.state == "intent"
        )
        async with self.store.read() as conn:
            newest = (await conn.execute(query)).scalar()
        return None if newest is None else float(newest)

    async def intend(self, key: str, kind: str, proof: str | None = None) -> None:
        """Record that the write `key` is about to be made (its date kept as is when already recorded),
        and `proof`, the digest of the body about to be sent, beside those of earlier attempts: each
        attempt's body may differ, and any of them may be the one that landed."""
        now = self.store.clock()
        row = {
            "key": key,
            "kind": kind,
            "state": "intent",
            "result": {"proofs": [proof]} if proof else None,
            "created_at": now,
            "updated_at": now,
        }
        async with self.store.write() as conn:
            await conn.execute(self.store.insert_ignore(effects).values(row))
            if proof is None:
                return
            query = select(effects.c.result).where(effects.c.key == key, effects.c.state == "intent")
            held = (await conn.execute(query)).first()
            if held is None:
                return
            proofs = list(dict(held.result or {}).get("proofs") or [])
            if proof not in proofs:
                await conn.execute(
                    update(effects)
                    .where(effects.c.key == key, effects.c.state == "intent")
                    .values(result={"proofs": [*proofs, proof]}, updated_at=now)
                )

    @staticmethod
    def proofs(entry: Entry | None) -> frozenset[str]:
        """The digests of the bodies attempts were about to send under an intent (none once done)."""
        if entry is None or entry.state != "intent":
            return frozenset()
        return frozenset(str(p) for p in entry.result.get("proofs") or [])

    async def record(self, key: str, kind: str, result: dict[str, Any]) -> None:
        """Record what GitHub answered: the write `key` is done for good."""
        now = self.store.clock()
        async with self.store.write() as conn:
            changed = await conn.execute(
                update(effects)
                .where(effects.c.key == key)
                .values(state="done", result=result, updated_at=now)
            )
            if changed.rowcount == 0:
                row = {"key": key, "kind": kind, "state": "done", "result": result}
                await conn.execute(
                    self.store.insert_ignore(effects).values(created_at=now, updated_at=now, **row)
                )

    async def note(self, key: str, kind: str, result: dict[str, Any]) -> None:
        """Record a step's answer dated now, over any earlier row of `key`: unlike `record`, which
        keeps the first date, the row's `created_at` then says which attempt (or which job, when a
        key names a job id that SQLite may give again once the old row was pruned) wrote it."""
        now = self.store.clock()
        row = {"key": key, "kind": kind, "state": "done", "result": result}
        async with self.store.write() as conn:
            await conn.execute(
                self.store.insert_ignore(effects).values(created_at=now, updated_at=now, **row)
            )
            await conn.execute(
                update(effects).where(effects.c.key == key).values(created_at=now, updated_at=now, **row)
            )

    async def keep_first(self, key: str, kind: str, result: dict[str, Any]) -> dict[str, Any]:
        """Record a decision unless one is recorded under `key`; the decision that stands is returned.

        A job that decided something, said it (or began to) and died is retried into a world that may
        have moved on: the retry must keep the first decision, or GitHub ends up with two answers.
        """
        now = self.store.clock()
        row = {"key": key, "kind": kind, "state": "done", "result": result}
        async with self.store.write() as conn:
            await conn.execute(
                self.store.insert_ignore(effects).values(created_at=now, updated_at=now, **row)
            )
            kept = (await conn.execute(select(effects.c.result).where(effects.c.key == key))).scalar_one()
        return dict(kept or {})

    # -- conversation checkpoints -----------------------------------------------------------------

    async def load_conversation(self, run_id: str) -> tuple[int, list[dict[str, Any]]] | None:
        query = select(run_checkpoints).where(run_checkpoints.c.run_id == run_id)
        async with self.store.read() as conn:
            row = (await conn.execute(query)).first()
        return None if row is None else (int(row.rounds), list(row.messages))

    async def save_conversation(self, run_id: str, rounds: int, messages: list[dict[str, Any]]) -> None:
        now = self.store.clock()
        async with self.store.write() as conn:
            changed = await conn.execute(
                update(run_checkpoints)
                .where(run_checkpoints.c.run_id == run_id)
                .values(rounds=rounds, messages=messages, updated_at=now)
            )
            if changed.rowcount == 0:
                row = {"run_id": run_id, "rounds": rounds, "messages": messages, "updated_at": now}
                await conn.execute(self.store.insert_ignore(run_checkpoints).values(row))
