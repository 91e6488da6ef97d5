"""Held pushes in the store: a typed row and the queries on it; every state change is compare-and-set.

States: pending -> approved -> pushing -> pushed, or pending -> rejected | expired | superseded, and
pushing -> failed (which `/beam approve` may move back to approved). A transition names the states
it may start from, so two answers, two workers or a retry can never take the same step twice.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import insert, select, update

from bot.app.jobs.store import Store, pending_pushes

OPEN_STATES = ("pending", "approved", "pushing")
TERMINAL_STATES = ("pushed", "rejected", "expired", "superseded", "failed")


def new_push_id() -> str:
    return secrets.token_hex(4)


@dataclass(frozen=True)
class HeldPush:
    id: str
    run_id: str | None
    repo: str
    number: int | None
    base_sha: str | None
    head_sha: str | None
    commit_sha: str
    branch: str
    requester: str
    action: dict[str, Any]
    created_at: float
    expires_at: float
    state: str = "pending"
    diffstat: dict[str, Any] = field(default_factory=dict)
    approval_comment_id: int | None = None
    etag: str | None = None
    decided_by: str | None = None
    decided_at: float | None = None
    pushed_at: float | None = None
    result: dict[str, Any] = field(default_factory=dict)
    error: str | None = None

    @property
    def owner(self) -> str:
        return self.repo.split("/", 1)[0]

    @property
    def name(self) -> str:
        return self.repo.split("/", 1)[1]

    @property
    def pending_ref(self) -> str:
        return f"refs/beam/pending/{self.id}"

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> HeldPush:
        values = {k: row[k] for k in cls.__dataclass_fields__ if k in row}
        values["diffstat"] = row.get("diffstat") or {}
        values["result"] = row.get("result") or {}
        values["action"] = row.get("action") or {}
        return cls(**values)


class Pushes:
    def __init__(self, store: Store) -> None:
        self.store = store

    async def create(self, push: HeldPush) -> None:
        row = {name: getattr(push, name) for name in HeldPush.__dataclass_fields__}
        async with self.store.write() as conn:
            await conn.execute(insert(pending_pushes).values(row))

    async def get(self, push_id: str) -> HeldPush | None:
        async with self.store.read() as conn:
            row = (await conn.execute(select(pending_pushes).where(pending_pushes.c.id == push_id))).first()
        return HeldPush.from_row(dict(row._mapping)) if row is not None else None

    async def for_run(self, run_id: str) -> HeldPush | None:
        """The held push a run made (a run makes at most one)."""
        query = (
            select(pending_pushes)
            .where(pending_pushes.c.run_id == run_id)
            .order_by(pending_pushes.c.created_at.desc())
        )
        async with self.store.read() as conn:
            row = (await conn.execute(query.limit(1))).first()
        return HeldPush.from_row(dict(row._mapping)) if row is not None else None

    async def pending_for(self, repo: str, number: int | None) -> list[HeldPush]:
        query = select(pending_pushes).where(
            pending_pushes.c.repo == repo,
            pending_pushes.c.number == number,
            pending_pushes.c.state == "pending",
        )
        async with self.store.read() as conn:
            return [HeldPush.from_row(dict(r._mapping)) for r in await conn.execute(query)]

    async def transition(
        self, push_id: str, from_states: tuple[str, ...], to_state: str, **values: Any
    ) -> bool:
        return await self.store.transition(pending_pushes, push_id, list(from_states), to_state, **values)

    async def update(self, push_id: str, **values: Any) -> None:
        async with self.store.write() as conn:
            await conn.execute(update(pending_pushes).where(pending_pushes.c.id == push_id).values(values))
