"""The findings ledger (`review_findings`): every inline finding the bot posted, and its state.

A finding is `open` when posted. It leaves `open` once, by compare-and-set: `dismissed` (a 👎, a
"won't fix" reply or a resolved thread from someone allowed to trigger reviews) or `fixed` (a later
push changed its anchored lines and the re-review did not report it again). A dismissed finding is
never posted again on its pull request (reviews/matching.py says when a new finding is the same).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy import RowMapping, select, update

from bot.app.jobs.schema import review_findings
from bot.app.jobs.store import Store

FindingState = Literal["open", "dismissed", "fixed"]
FINDING_STATES: tuple[FindingState, ...] = ("open", "fixed", "dismissed")


@dataclass(frozen=True, slots=True)
class Posted:
    """A finding as posted: what the ledger records of it."""

    comment_id: int
    path: str
    line: int
    line_text: str
    claim: str
    severity: str
    head_sha: str


@dataclass(frozen=True, slots=True)
class Finding:
    id: int
    repo: str
    number: int
    comment_id: int
    path: str
    line: int
    line_text: str
    claim: str
    severity: str
    head_sha: str
    state: FindingState
    reason: str | None
    by: str | None
    reactions_etag: str | None

    @classmethod
    def of(cls, row: RowMapping) -> Finding:
        return cls(**{name: row[name] for name in cls.__dataclass_fields__})


class FindingsLedger:
    def __init__(self, store: Store) -> None:
        self.store = store

    def _pull(self, repo: str, number: int) -> Any:
        return (review_findings.c.repo == repo) & (review_findings.c.number == number)

    async def record(self, repo: str, number: int, posted: list[Posted]) -> None:
        """Record posted findings as `open`; one already recorded (a retry) is kept as it is."""
        now = self.store.clock()
        async with self.store.write() as conn:
            for item in posted:
                row = {
                    "repo": repo,
                    "number": number,
                    "comment_id": item.comment_id,
                    "path": item.path,
                    "line": item.line,
                    "line_text": item.line_text,
                    "claim": item.claim,
                    "severity": item.severity,
                    "head_sha": item.head_sha,
                    "state": "open",
                    "created_at": now,
                    "updated_at": now,
                }
                await conn.execute(self.store.insert_ignore(review_findings).values(row))

    async def of_pull(self, repo: str, number: int, state: FindingState | None = None) -> list[Finding]:
        query = select(review_findings).where(self._pull(repo, number))
        if state is not None:
            query = query.where(review_findings.c.state == state)
        async with self.store.read() as conn:
            rows = (await conn.execute(query.order_by(review_findings.c.id))).all()
        return [Finding.of(row._mapping) for row in rows]

    async def by_comment(self, repo: str, number: int, comment_id: int) -> Finding | None:
        query = select(review_findings).where(
            self._pull(repo, number), review_findings.c.comment_id == comment_id
        )
        async with self.store.read() as conn:
            row = (await conn.execute(query)).first()
        return Finding.of(row._mapping) if row is not None else None

    async def _leave_open(self, finding_id: int, state: FindingState, reason: str, by: str | None) -> bool:
        stmt = (
            update(review_findings)
            .where(review_findings.c.id == finding_id, review_findings.c.state == "open")
            .values(state=state, reason=reason, by=by, updated_at=self.store.clock())
        )
        async with self.store.write() as conn:
            return (await conn.execute(stmt)).rowcount == 1

    async def dismiss(self, finding_id: int, reason: str, by: str) -> bool:
        """open -> dismissed; False when it was not open (already dismissed, or fixed)."""
        return await self._leave_open(finding_id, "dismissed", reason, by)

    async def fix(self, finding_id: int, commit: str) -> bool:
        """open -> fixed by `commit`; False when it was not open."""
        return await self._leave_open(finding_id, "fixed", commit, None)

    async def set_etag(self, finding_id: int, etag: str | None) -> None:
        async with self.store.write() as conn:
            stmt = update(review_findings).where(review_findings.c.id == finding_id)
            await conn.execute(stmt.values(reactions_etag=etag))

    async def counts(self, repo: str, number: int) -> dict[FindingState, int]:
        """How many findings of the pull request are in each state (all three keys present)."""
        found = Counter(f.state for f in await self.of_pull(repo, number))
        return {state: found.get(state, 0) for state in FINDING_STATES}
