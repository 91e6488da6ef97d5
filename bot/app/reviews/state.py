"""The automatic-review state of one pull request (`auto_reviews` table): a typed row and its verbs.

Each push raises `generation` and moves `due_at` (the debounce); a review job remembers the
generation it started under and stops at its next step once the row moved on (a newer push, or the
pull request was closed). `reviewed_head` is the last head whose range was dealt with (reviewed, found
empty, or skipped for good), so no head is reviewed twice. The queued check run of the newest head is
handed over by compare-and-set: exactly one of the job and a newer push completes it.

The summary stays short: a skip for the same reason as its last line replaces that line (`merged`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from sqlalchemy import RowMapping, select, update

from bot.app.jobs.schema import auto_reviews
from bot.app.jobs.store import Store

EntryKind = Literal[
    "reviewed",
    "no_findings",
    "unchanged",
    "skipped",
    "too_large",
    "over_limit",  # refused by a daily limit or the monthly budget (issue 11): nothing ran
    "capped",  # stopped by a per-run token or time cap before it posted a review
    "superseded",
    "cancelled",
    "failed",
    "invalid_config",
    "not_reviewed",
]
MAX_ENTRIES = 50
# Lines that say why a head got no review: one for the same reason in a row, not one per push.
COLLAPSING = frozenset({"skipped", "too_large", "invalid_config", "over_limit"})


@dataclass(frozen=True, slots=True)
class Entry:
    """One line of the summary comment: a commit range and what became of it."""

    kind: EntryKind
    head: str
    since: str | None = None  # the previously reviewed head (incremental) or the base (full review)
    full: bool = True
    url: str | None = None
    findings: int = 0
    note: str = ""
    skipped_files: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Entry:
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        return cls(**known)


def merged(entries: list[dict[str, Any]], entry: Entry) -> list[dict[str, Any]]:
    """The summary's lines with `entry` added. The same line again adds nothing; a skip for the same
    reason as the last line (too large, however large; the same label, the same invalid file or the
    same limit until it resets) replaces it, so it names the newest head and pushes to a pull request
    that stays skipped leave one line, not one per push."""
    if entries:
        last = Entry.from_json(entries[-1])
        if last == entry:
            return entries
        same_reason = entry.kind == "too_large" or last.note == entry.note
        if entry.kind in COLLAPSING and last.kind == entry.kind and same_reason:
            return [*entries[:-1], entry.to_json()]
    return [*entries, entry.to_json()][-MAX_ENTRIES:]


@dataclass(frozen=True, slots=True)
class ReviewState:
    repo: str
    number: int
    generation: int
    target_head: str | None
    due_at: float
    closed: bool
    reviewed_head: str | None
    diff_digest: str | None
    summary_comment_id: int | None
    check_run_id: int | None
    check_head: str | None
    entries: tuple[Entry, ...]

    @classmethod
    def of(cls, row: RowMapping) -> ReviewState:
        return cls(
            repo=row["repo"],
            number=row["number"],
            generation=row["generation"],
            target_head=row["target_head"],
            due_at=row["due_at"],
            closed=bool(row["closed"]),
            reviewed_head=row["reviewed_head"],
            diff_digest=row["diff_digest"],
            summary_comment_id=row["summary_comment_id"],
            check_run_id=row["check_run_id"],
            check_head=row["check_head"],
            entries=tuple(Entry.from_json(e) for e in row["entries"] or []),
        )


@dataclass(frozen=True, slots=True)
class Queued:
    """What a push did to the row: its generation, and the older queued check run it took over."""

    generation: int
    stale_check: int | None


class ReviewStates:
    def __init__(self, store: Store) -> None:
        self.store = store

    def _where(self, repo: str, number: int) -> Any:
        return (auto_reviews.c.repo == repo) & (auto_reviews.c.number == number)

    async def get(self, repo: str, number: int) -> ReviewState | None:
        async with self.store.read() as conn:
            row = (await conn.execute(select(auto_reviews).where(self._where(repo, number)))).first()
        return ReviewState.of(row._mapping) if row is not None else None

    async def _ensure(self, repo: str, number: int) -> None:
        now = self.store.clock()
        async with self.store.write() as conn:
            row = {"repo": repo, "number": number, "entries": [], "updated_at": now}
            await conn.execute(self.store.insert_ignore(auto_reviews).values(row))

    async def push(self, repo: str, number: int, head: str, due_at: float) -> Queued:
        """A new head to review by `due_at`: a newer generation; the older queued check run is handed
        to the caller to complete as superseded."""
        await self._ensure(repo, number)
        async with self.store.write() as conn:
            row = (await conn.execute(select(auto_reviews).where(self._where(repo, number)))).one()
            stale = row.check_run_id if row.check_head != head else None
            values: dict[str, Any] = {
                "generation": row.generation + 1,
                "target_head": head,
                "due_at": due_at,
                "closed": False,
                "updated_at": self.store.clock(),
            }
            if stale is not None:
                values.update(check_run_id=None, check_head=None)
            await conn.execute(update(auto_reviews).where(self._where(repo, number)).values(**values))
        return Queued(row.generation + 1, stale)

    async def close(self, repo: str, number: int) -> int | None:
        """The pull request was closed: every queued or running review is cancelled; returns the
        queued check run the caller completes."""
        await self._ensure(repo, number)
        async with self.store.write() as conn:
            row = (await conn.execute(select(auto_reviews).where(self._where(repo, number)))).one()
            await conn.execute(
                update(auto_reviews)
                .where(self._where(repo, number))
                .values(
                    generation=row.generation + 1,
                    closed=True,
                    check_run_id=None,
                    check_head=None,
                    updated_at=self.store.clock(),
                )
            )
        return int(row.check_run_id) if row.check_run_id is not None else None

    async def set_check(self, repo: str, number: int, generation: int, head: str, check_id: int) -> bool:
        """Attach the queued check run of `head`, unless a newer push came meanwhile."""
        stmt = (
            update(auto_reviews)
            .where(self._where(repo, number), auto_reviews.c.generation == generation)
            .values(check_run_id=check_id, check_head=head, updated_at=self.store.clock())
        )
        async with self.store.write() as conn:
            return (await conn.execute(stmt)).rowcount == 1

    async def take_check(self, repo: str, number: int, head: str) -> int | None:
        """The review job takes the queued check run of `head` (compare-and-set; None if there is none)."""
        async with self.store.write() as conn:
            row = (await conn.execute(select(auto_reviews).where(self._where(repo, number)))).first()
            if row is None or row.check_run_id is None or row.check_head != head:
                return None
            stmt = update(auto_reviews).where(
                self._where(repo, number), auto_reviews.c.check_run_id == row.check_run_id
            )
            changed = (await conn.execute(stmt.values(check_run_id=None, check_head=None))).rowcount
        return int(row.check_run_id) if changed == 1 else None

    async def record(
        self,
        repo: str,
        number: int,
        entry: Entry,
        *,
        reviewed_head: str | None = None,
        diff_digest: str | None = None,
    ) -> tuple[ReviewState, bool]:
        """Add a line to the summary (`merged`), and (when given) mark `reviewed_head` as dealt with.
        Returns the state and whether the summary's lines changed (if not, its comment needs no edit)."""
        async with self.store.write() as conn:
            row = (await conn.execute(select(auto_reviews).where(self._where(repo, number)))).one()
            before = list(row.entries or [])
            entries = merged(before, entry)
            values: dict[str, Any] = {"entries": entries, "updated_at": self.store.clock()}
            if reviewed_head is not None:
                values.update(reviewed_head=reviewed_head, diff_digest=diff_digest)
            await conn.execute(update(auto_reviews).where(self._where(repo, number)).values(**values))
            fresh = (await conn.execute(select(auto_reviews).where(self._where(repo, number)))).one()
        return ReviewState.of(fresh._mapping), entries != before

    async def set_summary_comment(self, repo: str, number: int, comment_id: int) -> None:
        async with self.store.write() as conn:
            stmt = update(auto_reviews).where(self._where(repo, number))
            await conn.execute(stmt.values(summary_comment_id=comment_id))
