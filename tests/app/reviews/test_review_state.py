"""The per-pull-request state of automatic reviews on a real database (SQLite, and PostgreSQL when
configured): generations, the hand-over of the queued check run, and the summary's entries."""

from __future__ import annotations

import pytest

from bot.app.jobs.queue import JobQueue
from bot.app.jobs.store import Store
from bot.app.reviews.auto_review_job import KIND, job_key
from bot.app.reviews.state import MAX_ENTRIES, Entry, ReviewStates

pytestmark = pytest.mark.anyio
REPO = "o/r"


async def test_each_push_is_a_new_generation_and_hands_over_the_older_check_run(store: Store) -> None:
    states = ReviewStates(store)
    assert await states.get(REPO, 1) is None
    first = await states.push(REPO, 1, "a" * 40, due_at=10.0)
    assert first.generation == 1 and first.stale_check is None
    assert await states.set_check(REPO, 1, first.generation, "a" * 40, 501)
    second = await states.push(REPO, 1, "b" * 40, due_at=20.0)
    assert second.generation == 2 and second.stale_check == 501  # the older queued run, to supersede
    assert not await states.set_check(REPO, 1, first.generation, "a" * 40, 502)  # a late attach loses
    assert await states.set_check(REPO, 1, second.generation, "b" * 40, 503)
    state = await states.get(REPO, 1)
    assert state is not None
    assert (state.target_head, state.due_at, state.check_run_id, state.closed) == ("b" * 40, 20.0, 503, False)
    # The job takes the check run once; a second take (a retried job) gets nothing.
    assert await states.take_check(REPO, 1, "a" * 40) is None
    assert await states.take_check(REPO, 1, "b" * 40) == 503
    assert await states.take_check(REPO, 1, "b" * 40) is None


async def test_close_cancels_and_a_reopen_push_revives(store: Store) -> None:
    states = ReviewStates(store)
    queued = await states.push(REPO, 2, "a" * 40, due_at=0.0)
    await states.set_check(REPO, 2, queued.generation, "a" * 40, 77)
    assert await states.close(REPO, 2) == 77
    state = await states.get(REPO, 2)
    assert state is not None and state.closed and state.generation == 2 and state.check_run_id is None
    await states.push(REPO, 2, "a" * 40, due_at=0.0)
    state = await states.get(REPO, 2)
    assert state is not None and not state.closed and state.generation == 3


async def test_recorded_entries_and_the_reviewed_head(store: Store) -> None:
    states = ReviewStates(store)
    await states.push(REPO, 3, "a" * 40, due_at=0.0)
    state, changed = await states.record(REPO, 3, Entry("skipped", "a" * 40, note="draft"))
    assert state.reviewed_head is None and changed
    state, _ = await states.record(
        REPO,
        3,
        Entry("reviewed", "a" * 40, url="https://x", findings=1),
        reviewed_head="a" * 40,
        diff_digest="d1",
    )
    assert (state.reviewed_head, state.diff_digest) == ("a" * 40, "d1")
    assert [e.kind for e in state.entries] == ["skipped", "reviewed"] and state.entries[1].url == "https://x"
    for n in range(MAX_ENTRIES + 5):
        state, _ = await states.record(REPO, 3, Entry("no_findings", f"{n:040d}"))
    assert len(state.entries) == MAX_ENTRIES and state.entries[-1].head == f"{MAX_ENTRIES + 4:040d}"
    await states.set_summary_comment(REPO, 3, 9001)
    fresh = await states.get(REPO, 3)
    assert fresh is not None and fresh.summary_comment_id == 9001


async def test_review_jobs_share_one_queued_row_per_pull_request(store: Store) -> None:
    queue = JobQueue(store)
    key = job_key(REPO, 4)
    first = await queue.schedule(KIND, key, {"repo": REPO, "number": 4}, at=100.0)
    again = await queue.schedule(KIND, key, {"repo": REPO, "number": 4}, at=50.0)
    assert first == again
    row = await queue.get(first)
    assert row is not None and row["run_after"] == 50.0 and row["key"] == "o/r#4/review"


async def test_a_skip_for_the_same_reason_replaces_the_last_line(store: Store) -> None:
    states = ReviewStates(store)
    await states.push(REPO, 5, "a" * 40, due_at=0.0)
    big = Entry("too_large", "a" * 40, since="0" * 40, note="20 changed lines is more")
    state, changed = await states.record(REPO, 5, big)
    assert changed and [e.head for e in state.entries] == ["a" * 40]
    state, changed = await states.record(REPO, 5, big)  # the same line again (a retry): nothing
    assert not changed and len(state.entries) == 1
    bigger = Entry("too_large", "b" * 40, since="0" * 40, note="40 changed lines is more")
    state, changed = await states.record(REPO, 5, bigger)  # still too large: the line moves on
    assert changed and state.entries == (bigger,)
    reviewed = Entry("reviewed", "c" * 40, url="https://x", findings=1)
    broken = Entry("invalid_config", "d" * 40, note="auto_review.drafts: expected true or false")
    await states.record(REPO, 5, reviewed)
    await states.record(REPO, 5, broken)
    state, _ = await states.record(REPO, 5, Entry("invalid_config", "e" * 40, note=broken.note))
    assert [(e.kind, e.head[0]) for e in state.entries] == [
        ("too_large", "b"),
        ("reviewed", "c"),
        ("invalid_config", "e"),
    ]
    other = Entry("invalid_config", "e" * 40, note="debounce: 'soon' is not a duration")
    state, _ = await states.record(REPO, 5, other)  # another mistake in the file: its own line
    label = Entry("skipped", "f" * 40, note="label `no-review`")
    state, _ = await states.record(REPO, 5, label)
    state, _ = await states.record(REPO, 5, Entry("skipped", "f" * 40, note="draft"))
    assert [e.kind for e in state.entries][-4:] == ["invalid_config", "invalid_config", "skipped", "skipped"]


async def test_pushes_over_the_same_limit_leave_one_line(store: Store) -> None:
    states = ReviewStates(store)
    await states.push(REPO, 6, "a" * 40, due_at=0.0)
    note = (
        "skipped; this would go over the limit of 1 runs per day on this repository. It resets at 00:00 UTC."
    )
    await states.record(REPO, 6, Entry("over_limit", "a" * 40, since="0" * 40, note=note))
    state, changed = await states.record(REPO, 6, Entry("over_limit", "b" * 40, since="0" * 40, note=note))
    assert changed and [(e.kind, e.head[0]) for e in state.entries] == [("over_limit", "b")]
    tomorrow = note.replace("00:00", "00:00 tomorrow")
    state, _ = await states.record(REPO, 6, Entry("over_limit", "c" * 40, since="0" * 40, note=tomorrow))
    assert [e.head[0] for e in state.entries] == ["b", "c"]  # another day's limit: its own line
