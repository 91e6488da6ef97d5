"""The schema's versioned upgrade: a fresh database gets the current tables and `SCHEMA_VERSION` in one
step; an existing one runs `MIGRATIONS[v]` for every version above its own, in one transaction, under
a lock (BEGIN IMMEDIATE on SQLite, an advisory lock on PostgreSQL) so two processes starting together
upgrade once.

To change the schema: edit the tables in `schema.py`, bump `SCHEMA_VERSION`, and add the migration
that takes a database of the previous version to the new one (e.g. `ALTER TABLE ... ADD COLUMN`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from sqlalchemy import Connection, insert, inspect, select, text, update
from sqlalchemy.ext.asyncio import AsyncConnection

from bot.app.jobs import rollups
from bot.app.jobs.schema import (
    app_credentials,
    auto_reviews,
    dashboard_sessions,
    effects,
    finding_days,
    held_commits,
    installation_turns,
    jobs,
    leases,
    metadata,
    pull_totals,
    redeliveries,
    review_findings,
    run_checkpoints,
    run_days,
    runs,
    schema_version,
    usage_counters,
)

SCHEMA_VERSION = 12

# A migration takes a database at version `v - 1` to version `v`; it runs inside the upgrade's
# transaction, on a sync connection (DDL reads best that way).
Migration = Callable[[Connection], None]


# Arbitrary constant shared by every beam-bot process: the PostgreSQL advisory lock for upgrades.
_UPGRADE_LOCK = 0x6265616D  # "beam"


def _add_auto_reviews(conn: Connection) -> None:
    """v2: per pull request state of automatic reviews."""
    auto_reviews.create(conn, checkfirst=True)


def _claim_index(conn: Connection) -> None:
    """v3: the claim's `ORDER BY id LIMIT 1` per state walked this index instead of sorting the
    backlog (until fair claims probed `jobs_installation_state` instead; v6 drops it)."""
    conn.execute(text("CREATE INDEX IF NOT EXISTS jobs_state_id ON jobs (state, id)"))


def _add_effects_tables(conn: Connection) -> None:
    """v4: the effects journal and run checkpoints (issue 8)."""
    effects.create(conn, checkfirst=True)
    run_checkpoints.create(conn, checkfirst=True)


MIGRATIONS: dict[int, Migration] = {2: _add_auto_reviews, 3: _claim_index, 4: _add_effects_tables}


def _costs_and_limits(conn: Connection) -> None:
    """v5: installation on jobs and runs, token columns, fairness turns, usage counters.

    Each step checks first (as version 2's does), so a database that has some of them already is
    brought to the same end."""
    added = [
        ("jobs", "installation_id", "BIGINT NOT NULL DEFAULT 0"),
        ("runs", "installation_id", "BIGINT"),
        ("runs", "input_tokens", "BIGINT"),
        ("runs", "output_tokens", "BIGINT"),
        ("runs", "command_key", "TEXT"),
        ("runs", "command_url", "TEXT"),
        ("runs", "cancelled_by", "TEXT"),
    ]
    inspector = inspect(conn)
    present = {table: {c["name"] for c in inspector.get_columns(table)} for table in ("jobs", "runs")}
    for table, column, kind in added:
        if column not in present[table]:
            conn.execute(text(f"ALTER TABLE {table} ADD COLUMN {column} {kind}"))
    for index in (*jobs.indexes, *runs.indexes):
        if index.name in ("jobs_installation_state", "runs_created_at"):
            index.create(conn, checkfirst=True)
    installation_turns.create(conn, checkfirst=True)
    usage_counters.create(conn, checkfirst=True)
    # Jobs of older versions belong to no installation (0): give that one its turns.
    if (
        conn.execute(
            select(installation_turns.c.installation_id).where(installation_turns.c.installation_id == 0)
        ).first()
        is None
    ):
        conn.execute(insert(installation_turns).values(installation_id=0, last_turn=0))


MIGRATIONS[5] = _costs_and_limits


def _drop_claim_index(conn: Connection) -> None:
    """v6: nothing reads `jobs_state_id` since claims went per installation, and every job's two
    updates (claimed, then finished) change `state`, so each wrote it twice: 12% of the WAL a job
    writes on PostgreSQL."""
    conn.execute(text("DROP INDEX IF EXISTS jobs_state_id"))


MIGRATIONS[6] = _drop_claim_index
MIGRATIONS[7] = lambda conn: review_findings.create(conn, checkfirst=True)  # v7: the findings ledger
# v8: held pushes' commits in the database (issue 23); pushes held before keep only their local pin.
MIGRATIONS[8] = lambda conn: held_commits.create(conn, checkfirst=True)
MIGRATIONS[9] = lambda conn: app_credentials.create(conn, checkfirst=True)  # v9: sealed App credentials


def _add_redelivery_tables(conn: Connection) -> None:
    """v10: the sweep's lease and the deliveries it asked GitHub to redeliver (issue 32)."""
    leases.create(conn, checkfirst=True)
    redeliveries.create(conn, checkfirst=True)


MIGRATIONS[10] = _add_redelivery_tables

DASHBOARD_INDEXES = (
    "runs_repo_created",
    "review_findings_repo_created",
    "review_findings_repo_state_updated",
)


def _dashboard_indexes(conn: Connection) -> None:
    """v11: the indexes the dashboard's queries filter on (issue 44): a repository's runs and
    findings over a span of days."""
    for index in (*runs.indexes, *review_findings.indexes):
        if index.name in DASHBOARD_INDEXES:
            index.create(conn, checkfirst=True)


MIGRATIONS[11] = _dashboard_indexes


def _rollups(conn: Connection) -> None:
    """v12: the dashboard's daily roll-ups (issue 44), their triggers, and their sums of the rows
    already there, all in the upgrade's transaction; and its server-side sessions."""
    dashboard_sessions.create(conn, checkfirst=True)
    run_days.create(conn, checkfirst=True)
    pull_totals.create(conn, checkfirst=True)
    finding_days.create(conn, checkfirst=True)
    rollups.create_triggers(conn)
    rollups.backfill(conn)


MIGRATIONS[12] = _rollups


class SchemaError(RuntimeError):
    """The database cannot be used by this version of beam-bot (e.g. a newer one wrote it)."""


async def upgrade_schema(
    conn: AsyncConnection,
    now: float,
    *,
    target: int = SCHEMA_VERSION,
    migrations: Mapping[int, Migration] = MIGRATIONS,
) -> int:
    """Bring the database to `target` inside the caller's (write) transaction; return the old version.

    The caller opens the transaction with the write lock taken (BEGIN IMMEDIATE on SQLite), so the
    version read here cannot change until commit.
    """
    if conn.dialect.name == "postgresql":
        await conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _UPGRADE_LOCK})
    await conn.run_sync(lambda c: schema_version.create(c, checkfirst=True))
    current = (await conn.execute(select(schema_version.c.version).where(schema_version.c.id == 1))).scalar()
    if current is None:
        await conn.execute(insert(schema_version).values(id=1, version=0, updated_at=now))
        current = 0
    if current > target:
        raise SchemaError(
            f"the database is at schema version {current}, newer than this beam-bot ({target}); "
            "upgrade beam-bot or point it at another database"
        )
    if current == target:
        return current
    if current == 0:
        # A fresh database gets today's tables directly; migrations are only for older databases.
        await conn.run_sync(lambda c: metadata.create_all(c, checkfirst=True))
    else:
        for version in range(current + 1, target + 1):
            step = migrations.get(version)
            if step is None:
                raise SchemaError(f"no migration to schema version {version}")
            await conn.run_sync(step)
    await conn.execute(
        update(schema_version).where(schema_version.c.id == 1).values(version=target, updated_at=now)
    )
    return int(current)
