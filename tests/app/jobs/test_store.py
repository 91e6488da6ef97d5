"""Store: URLs, schema creation and upgrade, delivery intake (dedupe, atomicity, group commit), runs,
memory and the compare-and-set transition, on SQLite files and (when configured) PostgreSQL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from sqlalchemy import Connection, event, inspect, select, text

from bot.app.jobs.migrations import DASHBOARD_INDEXES, SCHEMA_VERSION, SchemaError, upgrade_schema
from bot.app.jobs.schema import jobs, pending_pushes, schema_version
from bot.app.jobs.store import Store, build_url, normalize_url
from tests.support.db import FakeClock, opened

pytestmark = pytest.mark.anyio

BODY = '{"action":"created","comment":{"body":"/beam review ✓"}}'.encode()


# -- URLs -------------------------------------------------------------------------------------------


def test_default_url_is_a_sqlite_file_in_the_work_dir(tmp_path: Path) -> None:
    assert build_url(None, tmp_path) == f"sqlite+aiosqlite:///{tmp_path}/beam.db"
    assert build_url("", tmp_path) == f"sqlite+aiosqlite:///{tmp_path}/beam.db"


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("postgresql://u:p%40ss@db:5432/beam", "postgresql+asyncpg://u:p%40ss@db:5432/beam"),
        ("postgres://u@db/beam", "postgresql+asyncpg://u@db/beam"),
        ("postgresql+asyncpg://u@db/beam", "postgresql+asyncpg://u@db/beam"),
        ("sqlite:////var/lib/beam/beam.db", "sqlite+aiosqlite:////var/lib/beam/beam.db"),
        ("sqlite+aiosqlite:///rel.db", "sqlite+aiosqlite:///rel.db"),
    ],
)
def test_urls_are_normalised_to_the_async_drivers(given: str, expected: str) -> None:
    assert normalize_url(given) == expected
    assert build_url(given, Path("/unused")) == expected


@pytest.mark.parametrize(
    "url", ["mysql://u@db/beam", "postgresql+psycopg2://u@db/beam", "sqlite://", "sqlite:///:memory:"]
)
def test_unsupported_urls_are_refused(url: str) -> None:
    with pytest.raises(ValueError, match=r"unsupported|in-memory"):
        normalize_url(url)


def test_a_password_is_not_echoed_in_the_error() -> None:
    with pytest.raises(ValueError) as err:
        normalize_url("mysql://user:hunter2@db/beam")
    assert "hunter2" not in str(err.value)


# -- schema -----------------------------------------------------------------------------------------


async def _version(store: Store) -> int:
    async with store.read() as conn:
        return int((await conn.execute(select(schema_version.c.version))).scalar_one())


async def _tables(store: Store) -> set[str]:
    async with store.read() as conn:
        return set(await conn.run_sync(lambda c: inspect(c).get_table_names()))


async def test_open_creates_every_table_at_the_current_version(db_url: str) -> None:
    async with opened(db_url) as s:
        assert await _tables(s) >= {
            "deliveries",
            "jobs",
            "runs",
            "memory",
            "pending_pushes",
            "schema_version",
        }
        assert await _version(s) == SCHEMA_VERSION
        assert await s.accept_delivery("d-1", "issue_comment", "created", BODY, "o/r#1")
    async with opened(db_url) as s:  # reopening keeps the data and the version
        assert await _version(s) == SCHEMA_VERSION
        assert await s.get_delivery("d-1") is not None
        async with s.read() as conn:
            assert (await conn.execute(select(schema_version))).all().__len__() == 1


async def test_a_version_0_database_is_brought_to_the_current_version(db_url: str) -> None:
    async with opened(db_url) as s:
        async with s.write() as conn:
            for table in ("held_commits", "pending_pushes", "memory", "runs", "jobs", "deliveries"):
                await conn.execute(text(f"DROP TABLE {table}"))
            await conn.execute(schema_version.update().values(version=0))
        assert "jobs" not in await _tables(s)
    async with opened(db_url) as s:
        assert await _version(s) == SCHEMA_VERSION
        assert await _tables(s) >= {"deliveries", "jobs", "runs", "memory", "pending_pushes"}
        assert await s.accept_delivery("d-1", "issue_comment", "created", BODY, "o/r#1")


async def test_an_older_database_runs_the_missing_migrations_in_order(db_url: str) -> None:
    ran: list[int] = []

    def to_2(conn: Connection) -> None:
        ran.append(SCHEMA_VERSION + 1)
        conn.execute(text("ALTER TABLE runs ADD COLUMN cost_usd DOUBLE PRECISION"))

    def to_3(conn: Connection) -> None:
        ran.append(SCHEMA_VERSION + 2)
        conn.execute(text("CREATE TABLE audit (id INTEGER PRIMARY KEY, note TEXT)"))

    async with opened(db_url) as s:
        run_id = await s.create_run(repo="o/r", number=1, skill="review", requester="alice")
        async with s.write() as conn:
            steps = {SCHEMA_VERSION + 1: to_2, SCHEMA_VERSION + 2: to_3}
            old = await upgrade_schema(conn, 1.0, target=SCHEMA_VERSION + 2, migrations=steps)
        assert old == SCHEMA_VERSION
        assert ran == [SCHEMA_VERSION + 1, SCHEMA_VERSION + 2]
        assert await _version(s) == SCHEMA_VERSION + 2
        assert "audit" in await _tables(s)
        async with s.read() as conn:
            columns = await conn.run_sync(lambda c: [col["name"] for col in inspect(c).get_columns("runs")])
        assert "cost_usd" in columns
        assert (await s.get_run(run_id) or {})["requester"] == "alice"  # data survived the upgrade
        async with s.write() as conn:  # nothing left to do: no migration runs twice
            assert (
                await upgrade_schema(conn, 2.0, target=SCHEMA_VERSION + 2, migrations={})
                == SCHEMA_VERSION + 2
            )


async def test_a_version_1_database_gains_the_auto_reviews_table(db_url: str) -> None:
    async with opened(db_url) as s:
        async with s.write() as conn:
            await conn.execute(text("DROP TABLE auto_reviews"))
            await conn.execute(schema_version.update().values(version=1))
        assert "auto_reviews" not in await _tables(s)
    async with opened(db_url) as s:
        assert await _version(s) == SCHEMA_VERSION
        assert "auto_reviews" in await _tables(s)


async def test_a_failed_migration_leaves_the_old_version_intact(db_url: str) -> None:
    def broken(conn: Connection) -> None:
        conn.execute(text("ALTER TABLE runs ADD COLUMN half_done TEXT"))
        raise RuntimeError("migration bug")

    async with opened(db_url) as s:
        with pytest.raises(RuntimeError, match="migration bug"):
            async with s.write() as conn:
                await upgrade_schema(
                    conn, 1.0, target=SCHEMA_VERSION + 1, migrations={SCHEMA_VERSION + 1: broken}
                )
        assert await _version(s) == SCHEMA_VERSION
        async with s.read() as conn:
            columns = await conn.run_sync(lambda c: [col["name"] for col in inspect(c).get_columns("runs")])
        assert "half_done" not in columns


async def test_a_database_from_a_newer_beam_bot_is_refused(db_url: str) -> None:
    async with opened(db_url) as s, s.write() as conn:
        await conn.execute(schema_version.update().values(version=SCHEMA_VERSION + 1))
    with pytest.raises(SchemaError, match="newer than this beam-bot"):
        await Store.open(db_url)


async def test_two_processes_opening_a_fresh_database_at_once_both_succeed(db_url: str) -> None:
    stores: list[Store] = []

    async def open_one() -> None:
        stores.append(await Store.open(db_url))

    try:
        async with anyio.create_task_group() as tg:
            for _ in range(3):
                tg.start_soon(open_one)
        assert len(stores) == 3
        assert await _version(stores[0]) == SCHEMA_VERSION
    finally:
        for s in stores:
            await s.close()


async def test_sqlite_runs_in_wal_mode_with_foreign_keys_and_a_busy_timeout(tmp_path: Path) -> None:
    async with opened(f"sqlite:///{tmp_path}/sub/dir/beam.db") as s, s.read() as conn:
        assert (await conn.execute(text("PRAGMA journal_mode"))).scalar() == "wal"
        assert (await conn.execute(text("PRAGMA foreign_keys"))).scalar() == 1
        assert (await conn.execute(text("PRAGMA busy_timeout"))).scalar_one() >= 1000
    assert (tmp_path / "sub/dir/beam.db").exists()


# -- deliveries -------------------------------------------------------------------------------------


async def _job_rows(s: Store) -> list[Any]:
    async with s.read() as conn:
        return list((await conn.execute(select(jobs).order_by(jobs.c.id))).all())


async def test_a_delivery_is_stored_with_its_job(store: Store) -> None:
    assert await store.accept_delivery("d-1", "issue_comment", "created", BODY, "o/r#7")
    delivery = await store.get_delivery("d-1")
    assert delivery is not None
    assert (delivery.event, delivery.action, delivery.payload) == ("issue_comment", "created", BODY)
    [job] = await _job_rows(store)
    assert (job.kind, job.key, job.delivery_id, job.state, job.attempts) == (
        "delivery",
        "o/r#7",
        "d-1",
        "queued",
        0,
    )
    assert await store.get_delivery("nope") is None


async def test_a_redelivery_changes_nothing(store: Store) -> None:
    assert await store.accept_delivery("d-1", "issue_comment", "created", BODY, "o/r#7")
    assert not await store.accept_delivery("d-1", "pull_request", "opened", b"{}", "o/r#8", "other")
    delivery = await store.get_delivery("d-1")
    assert delivery is not None and delivery.event == "issue_comment" and delivery.payload == BODY
    assert len(await _job_rows(store)) == 1


async def test_concurrent_redeliveries_to_two_processes_store_one_copy(db_url: str) -> None:
    results: list[bool] = []
    async with opened(db_url) as a, opened(db_url) as b:

        async def send(s: Store) -> None:
            results.append(await s.accept_delivery("d-dup", "issue_comment", "created", BODY, "o/r#1"))

        async with anyio.create_task_group() as tg:
            for i in range(20):
                tg.start_soon(send, a if i % 2 else b)
        assert sorted(results) == [False] * 19 + [True]
        assert len(await _job_rows(a)) == 1


async def test_concurrent_deliveries_are_group_committed(store: Store) -> None:
    commits: list[int] = []
    if store.sync_engine is not None:
        # SQLite intake commits on the raw sqlite3 connection: watch its statements.
        def trace(dbapi: Any, _record: Any) -> None:
            dbapi.set_trace_callback(lambda sql: commits.append(1) if sql == "COMMIT" else None)

        event.listen(store.sync_engine, "connect", trace)
    else:
        event.listen(store.engine.sync_engine, "commit", lambda conn: commits.append(1))
    results: dict[str, bool] = {}

    async def send(i: int) -> None:
        results[f"d-{i}"] = await store.accept_delivery(
            f"d-{i}", "issue_comment", "created", BODY, f"o/r#{i}"
        )

    async with anyio.create_task_group() as tg:
        for i in range(50):
            tg.start_soon(send, i)
    assert len(results) == 50 and all(results.values())
    assert 1 <= len(commits) < 50  # several deliveries shared a transaction
    rows = await _job_rows(store)
    assert sorted(r.delivery_id for r in rows) == sorted(results)
    stats = await store.stats()
    assert stats["deliveries"] == 50 and stats["jobs"]["queued"] == 50


async def test_delivery_and_job_are_one_transaction(store: Store) -> None:
    # A job that cannot be stored (its kind is NOT NULL) takes its delivery down with it, and
    # a delivery batched with it is still stored.
    outcome: dict[str, object] = {}

    async def send(delivery_id: str, kind: Any) -> None:
        try:
            outcome[delivery_id] = await store.accept_delivery(delivery_id, "push", None, b"{}", None, kind)
        except Exception as exc:
            outcome[delivery_id] = exc

    async with anyio.create_task_group() as tg:
        tg.start_soon(send, "good-1", "delivery")
        tg.start_soon(send, "bad", None)
        tg.start_soon(send, "good-2", "delivery")
    assert outcome["good-1"] is True and outcome["good-2"] is True
    assert isinstance(outcome["bad"], Exception)
    assert await store.get_delivery("bad") is None
    assert sorted(r.delivery_id for r in await _job_rows(store)) == ["good-1", "good-2"]
    # The failure left no trace: the same id can be delivered again.
    assert await store.accept_delivery("bad", "push", None, b"{}", None)


async def test_a_caller_cancelled_mid_batch_strands_nobody(tmp_path: Path) -> None:
    # The batch is written by a task of its own: a caller that goes away while its batch waits (the
    # client hung up) leaves that batch whole, and the callers behind it get their answers.
    async with opened(f"sqlite:///{tmp_path}/beam.db") as store:
        results: dict[str, bool] = {}

        async def send(delivery_id: str) -> None:
            results[delivery_id] = await store.accept_delivery(delivery_id, "push", None, b"{}", None)

        # The write lock is held: the batch cannot be written yet.
        async with anyio.create_task_group() as tg, store.write():
            with anyio.CancelScope() as gone:
                tg.start_soon(send, "first")
                await anyio.sleep(0.05)
                async with anyio.create_task_group() as inner:
                    inner.start_soon(send, "gone")
                    await anyio.sleep(0.05)
                    gone.cancel()
            for i in range(5):
                tg.start_soon(send, f"after-{i}")
            await anyio.sleep(0.05)
        assert "gone" not in results
        assert results == {"first": True, **{f"after-{i}": True for i in range(5)}}
        for delivery_id in ("first", "gone", "after-0", "after-4"):
            assert await store.get_delivery(delivery_id) is not None
        assert await store.accept_delivery("gone", "push", None, b"{}", None) is False


async def test_a_body_that_is_not_utf8_is_refused(store: Store) -> None:
    with pytest.raises(UnicodeDecodeError):
        await store.accept_delivery("d-1", "push", None, b"\xff\xfe{}", None)
    assert await store.get_delivery("d-1") is None


# -- compare-and-set ---------------------------------------------------------------------------------


async def _insert_push(s: Store, push_id: str) -> None:
    async with s.write() as conn:
        await conn.execute(pending_pushes.insert().values(id=push_id, repo="o/r", number=1, created_at=1.0))


async def test_transition_moves_only_from_the_expected_states(store: Store) -> None:
    await _insert_push(store, "p1")
    assert not await store.transition("pending_pushes", "p1", ["approved"], "pushing")
    assert await store.transition(
        pending_pushes, "p1", ["pending"], "approved", decided_by="bob", decided_at=5.0
    )
    assert not await store.transition("pending_pushes", "p1", ["pending"], "rejected")
    assert not await store.transition("pending_pushes", "missing", ["pending"], "approved")
    async with store.read() as conn:
        row = (await conn.execute(select(pending_pushes).where(pending_pushes.c.id == "p1"))).one()
    assert (row.state, row.decided_by, row.decided_at) == ("approved", "bob", 5.0)


async def test_two_concurrent_transitions_exactly_one_wins(db_url: str) -> None:
    async with opened(db_url) as a, opened(db_url) as b:
        for n in range(5):
            await _insert_push(a, f"p{n}")
        for n in range(5):
            wins: list[str] = []

            async def approve(s: Store, who: str, push_id: str = f"p{n}", wins: list[str] = wins) -> None:
                if await s.transition("pending_pushes", push_id, ["pending"], "approved", decided_by=who):
                    wins.append(who)

            async with anyio.create_task_group() as tg:
                for i in range(6):
                    tg.start_soon(approve, a if i % 2 else b, f"user{i}")
            assert len(wins) == 1
            async with a.read() as conn:
                decided = (
                    await conn.execute(
                        select(pending_pushes.c.decided_by).where(pending_pushes.c.id == f"p{n}")
                    )
                ).scalar()
            assert decided == wins[0]


async def test_transition_refuses_tables_without_state_and_unknown_columns(store: Store) -> None:
    with pytest.raises(ValueError, match="state column"):
        await store.transition("runs", "x", ["queued"], "running")
    with pytest.raises(ValueError, match="unknown pending_pushes columns: nope"):
        await store.transition("pending_pushes", "x", ["pending"], "approved", nope=1)


# -- runs and memory ---------------------------------------------------------------------------------


async def test_runs_are_created_updated_and_read_back(db_url: str, fake_clock: FakeClock) -> None:
    async with opened(db_url, fake_clock) as s:
        run_id = await s.create_run(
            repo="o/r", number=3, skill="review", requester="alice", tracking_comment_id=99
        )
        run = await s.get_run(run_id)
        assert run is not None
        assert (run["status"], run["skill"], run["tracking_comment_id"], run["created_at"]) == (
            "queued",
            "review",
            99,
            fake_clock.now,
        )
        usage = {"prompt_tokens": 10, "completion_tokens": 5}
        assert await s.update_run(
            run_id, status="succeeded", usage=usage, summary={"tools": ["search"]}, latency_ms=42
        )
        run = await s.get_run(run_id)
        assert run is not None
        assert (run["status"], run["usage"], run["summary"], run["latency_ms"]) == (
            "succeeded",
            usage,
            {"tools": ["search"]},
            42,
        )
        assert not await s.update_run("missing", status="failed")
        assert await s.get_run("missing") is None
        with pytest.raises(ValueError, match="unknown runs columns"):
            await s.update_run(run_id, colour="red")


async def test_memory_is_loaded_by_scope_oldest_first_and_can_be_forgotten(store: Store) -> None:
    first = await store.memory_append("repo:o/r", "fact", "uses tabs")
    await store.memory_append("user:alice", "preference", "short reviews")
    third = await store.memory_append("repo:o/r", "fact", "docs live in docs/")
    await store.memory_append("repo:other", "fact", "not mine")
    items = await store.memory_load(["repo:o/r", "user:alice"])
    assert [i.text for i in items] == ["uses tabs", "short reviews", "docs live in docs/"]
    assert [i.text for i in await store.memory_load(["repo:o/r", "user:alice"], limit=2)] == [
        "short reviews",
        "docs live in docs/",
    ]
    assert await store.memory_load([]) == []
    assert await store.memory_forget(first)
    assert not await store.memory_forget(first)
    assert [i.id for i in await store.memory_load(["repo:o/r"])] == [third]


async def test_a_version_10_database_gains_the_dashboards_indexes(db_url: str) -> None:
    async with opened(db_url) as s, s.write() as conn:
        for name in DASHBOARD_INDEXES:
            await conn.execute(text(f"DROP INDEX {name}"))
        await conn.execute(schema_version.update().values(version=10))
    async with opened(db_url) as s:
        assert await _version(s) == SCHEMA_VERSION
        async with s.read() as conn:
            found = await conn.run_sync(
                lambda c: {
                    index["name"]
                    for table in ("runs", "review_findings")
                    for index in inspect(c).get_indexes(table)
                }
            )
        assert set(DASHBOARD_INDEXES) <= found
