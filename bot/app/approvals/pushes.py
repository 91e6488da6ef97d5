"""The held-push state machine: the typed row, its queries, and the verbs that move it.

States: pending -> approved -> pushing -> pushed, or pending -> rejected | expired | superseded, and
approved | pushing -> failed (which `/beam approve` may move back to approved). Every verb is one
compare-and-set naming the states it may start from, so two answers, two workers or a retry can
never take the same step twice; nothing else in the app writes a push's state.

The stored action (what the framework resumes) and the push context (where it goes, how the pull
request is opened) are pydantic models; in the database they share the `action` JSON column as one
flat object, the shape rows written by earlier versions already have.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from dataclasses import dataclass, field, fields
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict
from sqlalchemy import insert, select, update

from bot.app.jobs.schema import held_commits
from bot.app.jobs.store import Store, pending_pushes
from bot.beam.errors import BeamError

OPEN_STATES = ("pending", "approved", "pushing")
TERMINAL_STATES = ("pushed", "rejected", "expired", "superseded", "failed")


def new_push_id() -> str:
    return secrets.token_hex(4)


class _Stored(BaseModel):
    # Each model reads its own keys of the shared `action` object and ignores the other's.
    model_config = ConfigDict(frozen=True, extra="ignore")


class PushAction(_Stored):
    """The interrupted run's `git_push`, as the framework resumes it: only this can ever run."""

    action_id: str
    tool: Literal["git_push"] = "git_push"
    args: dict[str, str]
    agent_name: str = "author"
    session_id: str
    interaction_id: str


class PushContext(_Stored):
    """Where the push goes and what follows it, fixed when the push is held."""

    installation_id: int
    clone_url: str
    html_url: str
    default_branch: str
    on_pull_request: bool
    head_ref: str | None = None
    base_ref: str | None = None  # the pull request's base branch (None: the default branch)
    head_repo: str | None = None
    from_fork: bool = False
    instructions: str = ""
    command: str = "author"
    # A follow-up on the bot's own branch: the tip the run started from. The push goes through only
    # while the branch is still there (fast-forward only), and opens no second pull request.
    expected_tip: str | None = None


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
    action: PushAction
    context: PushContext
    created_at: float
    expires_at: float
    state: str = "pending"
    diffstat: dict[str, Any] = field(default_factory=dict)
    approval_comment_id: int | None = None
    # The approval comment as we wrote it: once edited, its reactions count for nothing.
    approval_body_sha256: str | None = None
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

    @property
    def approvers(self) -> list[str]:
        return self.decided_by.split(",") if self.decided_by else []

    def to_row(self) -> dict[str, Any]:
        row = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in _IN_ACTION}
        row["action"] = {
            **self.action.model_dump(mode="json"),
            **self.context.model_dump(mode="json"),
            "approval_body_sha256": self.approval_body_sha256,
        }
        return row

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> HeldPush:
        stored = row.get("action") or {}
        values = {f.name: row[f.name] for f in fields(cls) if f.name in row and f.name not in _IN_ACTION}
        values["diffstat"] = row.get("diffstat") or {}
        values["result"] = row.get("result") or {}
        return cls(
            **values,
            action=PushAction.model_validate(stored),
            context=PushContext.model_validate(stored),
            approval_body_sha256=stored.get("approval_body_sha256"),
        )


_IN_ACTION = frozenset({"action", "context", "approval_body_sha256"})


@dataclass(frozen=True)
class HeldCommit:
    """A held push's commit as a git bundle of what it adds over `prerequisites` (commits GitHub has),
    stored with the push row so that a worker on any host can push it (issue 23). `base_sha` is the
    commit the run started from; `sha256` is the bundle's digest, checked whenever it is read."""

    commit_sha: str
    base_sha: str
    prerequisites: tuple[str, ...]
    pack: bytes
    sha256: str

    @classmethod
    def of(cls, commit_sha: str, base_sha: str, prerequisites: list[str], pack: bytes) -> HeldCommit:
        digest = hashlib.sha256(pack).hexdigest()
        return cls(commit_sha, base_sha, tuple(prerequisites), pack, digest)

    @property
    def size(self) -> int:
        return len(self.pack)

    def to_row(self, push_id: str) -> dict[str, Any]:
        return {
            "push_id": push_id,
            "commit_sha": self.commit_sha,
            "base_sha": self.base_sha,
            "prerequisites": list(self.prerequisites),
            "size": self.size,
            "sha256": self.sha256,
            "pack": self.pack,
            "created_at": time.time(),
        }


class Pushes:
    """Held pushes in the store. Each verb returns True only for the caller whose step it was."""

    def __init__(self, store: Store) -> None:
        self.store = store

    # -- reading ------------------------------------------------------------------------------------

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

    async def pushed_to(self, repo: str, branch: str) -> bool:
        """Whether the bot has pushed `branch` of `repo` (then it is the bot's own branch)."""
        query = select(pending_pushes.c.id).where(
            pending_pushes.c.repo == repo,
            pending_pushes.c.branch == branch,
            pending_pushes.c.state == "pushed",
        )
        async with self.store.read() as conn:
            return (await conn.execute(query.limit(1))).first() is not None

    async def held_commit(self, push_id: str) -> HeldCommit | None:
        """The push's stored commit; BEM-371 when its bytes no longer match their digest or size."""
        query = select(held_commits).where(held_commits.c.push_id == push_id)
        async with self.store.read() as conn:
            row = (await conn.execute(query)).first()
        if row is None:
            return None
        values = row._mapping
        pack = bytes(values["pack"])
        if hashlib.sha256(pack).hexdigest() != values["sha256"] or len(pack) != values["size"]:
            raise BeamError("BEM-371", {"detail": f"held push {push_id}"})
        prerequisites = tuple(str(sha) for sha in values["prerequisites"] or ())
        return HeldCommit(values["commit_sha"], values["base_sha"], prerequisites, pack, values["sha256"])

    # -- writing what is not state ------------------------------------------------------------------

    async def create(self, push: HeldPush, held: HeldCommit | None = None) -> None:
        """Record a new push and, in the same transaction, its commit (a push is never stored without
        the commit it would push, when the caller has one)."""
        async with self.store.write() as conn:
            await conn.execute(insert(pending_pushes).values(push.to_row()))
            if held is not None:
                await conn.execute(insert(held_commits).values(held.to_row(push.id)))

    async def update(self, push_id: str, **values: Any) -> None:
        """Bookkeeping beside the state (the poller's ETag, answers by command, the opened pull)."""
        if "state" in values:
            raise ValueError("a push's state changes only through its verbs")
        async with self.store.write() as conn:
            await conn.execute(update(pending_pushes).where(pending_pushes.c.id == push_id).values(values))

    # -- the verbs ----------------------------------------------------------------------------------

    async def approve(self, push_id: str, by: str, at: float, *, again: bool = False) -> bool:
        """pending -> approved; with `again`, a failed push approved once more (`/beam approve`)."""
        source = "failed" if again else "pending"
        return await self._move(push_id, source, "approved", decided_by=by, decided_at=at)

    async def reject(self, push_id: str, by: str, at: float) -> bool:
        return await self._move(push_id, "pending", "rejected", decided_by=by, decided_at=at)

    async def expire(self, push_id: str, at: float) -> bool:
        return await self._move(push_id, "pending", "expired", decided_at=at)

    async def supersede(self, push_id: str, at: float) -> bool:
        return await self._move(push_id, "pending", "superseded", decided_at=at)

    async def claim(self, push_id: str, *, resuming: bool = False) -> bool:
        """approved -> pushing: the one resume that may push. `resuming` is only for the push's own
        watch job (one at a time per push) finishing an attempt that died mid-push: pushing -> pushing,
        which pushes the same pinned commit again, a no-op if it landed."""
        return await self._move(push_id, "pushing" if resuming else "approved", "pushing")

    async def mark_pushed(self, push_id: str, at: float) -> bool:
        return await self._move(push_id, "pushing", "pushed", pushed_at=at)

    async def fail(self, push_id: str, error: str) -> bool:
        return await self._move(push_id, ("pushing", "approved"), "failed", error=error[:2000])

    async def _move(self, push_id: str, source: str | tuple[str, ...], target: str, **values: Any) -> bool:
        sources = [source] if isinstance(source, str) else list(source)
        return await self.store.transition(pending_pushes, push_id, sources, target, **values)
