"""The app's tables and their versioned upgrade: one schema for SQLite and PostgreSQL alike.

Times are seconds since the epoch (UTC) in double columns: they compare the same way on both
databases, need no timezone handling, and the queue's lease arithmetic stays plain addition.
Structured columns use SQLAlchemy's JSON type; a delivery's body stays TEXT so its bytes are kept
exactly as GitHub signed them.

Upgrades live in `migrations.py`. To change the schema: edit the tables below, bump `SCHEMA_VERSION`
there, and add the migration that takes a database of the previous version to the new one.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    Connection,
    Double,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    Table,
    Text,
    event,
    insert,
    text,
)

from bot.app.jobs.rollups import create_triggers

JOB_STATES = ("queued", "running", "done", "failed", "dead")
DEFAULT_MAX_ATTEMPTS = 5


def queued_job(
    kind: str,
    key: str | None,
    now: float,
    *,
    installation_id: int = 0,
    delivery_id: str | None = None,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    run_after: float | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A new `jobs` row, queued and due at `run_after` (now by default): the one shape intake, the
    queue and the runs ledger insert. `extra` adds columns (a payload)."""
    return {
        "kind": kind,
        "key": key,
        "delivery_id": delivery_id,
        "state": "queued",
        "attempts": 0,
        "max_attempts": max_attempts,
        "run_after": now if run_after is None else run_after,
        "created_at": now,
        "updated_at": now,
        "installation_id": installation_id,
        **extra,
    }


RUN_STATUSES = ("queued", "running", "succeeded", "failed", "interrupted", "cancelled")

# SQLite only makes INTEGER PRIMARY KEY an auto-incrementing rowid; PostgreSQL wants BIGINT.
_Id = BigInteger().with_variant(Integer(), "sqlite")
_Json = JSON(none_as_null=True)

metadata = MetaData()

schema_version = Table(
    "schema_version",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("version", Integer, nullable=False),
    Column("updated_at", Double, nullable=False),
)

# Issue 23: the App's credentials from the setup page, sealed with BEAM_SECRET_KEY
# (bot/app/credentials/stored.py), so that every process on every host reads them. One row.
app_credentials = Table(
    "app_credentials",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("app_id", BigInteger, nullable=False),  # sealed too; in clear for messages and people
    Column("sealed", Text, nullable=False),  # a Fernet token of the credentials as JSON
    Column("created_at", Double, nullable=False),
    Column("updated_at", Double, nullable=False),
)

deliveries = Table(
    "deliveries",
    metadata,
    Column("delivery_id", Text, primary_key=True),
    Column("event", Text, nullable=False),
    Column("action", Text),
    Column("received_at", Double, nullable=False),
    Column("payload", Text, nullable=False),
)

jobs = Table(
    "jobs",
    metadata,
    Column("id", _Id, primary_key=True, autoincrement=True),
    Column("kind", Text, nullable=False),
    Column("delivery_id", Text, ForeignKey("deliveries.delivery_id")),
    Column("key", Text),
    Column("payload", _Json),
    Column("state", Text, nullable=False, server_default="queued"),
    Column("attempts", Integer, nullable=False, server_default="0"),
    Column("max_attempts", Integer, nullable=False, server_default=str(DEFAULT_MAX_ATTEMPTS)),
    Column("run_after", Double, nullable=False),
    Column("lease_owner", Text),
    Column("lease_expires_at", Double),
    Column("last_error", Text),
    Column("created_at", Double, nullable=False),
    Column("updated_at", Double, nullable=False),
    # The GitHub App installation the job works for (0: none); claims interleave installations.
    Column("installation_id", BigInteger, nullable=False, server_default="0"),
    Index("jobs_state_run_after", "state", "run_after"),
    Index("jobs_installation_state", "installation_id", "state", "id"),
    Index("jobs_delivery_id", "delivery_id"),
    # One job at a time per pull request, enforced by the database itself: a claim racing another
    # claim for the same key fails with an integrity error instead of running both.
    Index(
        "jobs_one_running_per_key",
        "key",
        unique=True,
        sqlite_where=text("state = 'running'"),
        postgresql_where=text("state = 'running'"),
    ),
)


runs = Table(
    "runs",
    metadata,
    Column("id", Text, primary_key=True),
    Column("job_id", _Id, ForeignKey("jobs.id")),
    Column("repo", Text, nullable=False),
    Column("number", Integer),
    Column("skill", Text, nullable=False),
    Column("requester", Text),
    Column("status", Text, nullable=False, server_default="queued"),
    Column("tracking_comment_id", BigInteger),
    Column("created_at", Double, nullable=False),
    Column("started_at", Double),
    Column("finished_at", Double),
    Column("usage", _Json),
    Column("model_used", Text),
    Column("error_code", Text),
    Column("error_message", Text),
    Column("summary", _Json),
    Column("latency_ms", Integer),
    # Costs and limits (issue 11): who pays, what it used, what it was asked, who stopped it.
    Column("installation_id", BigInteger),
    Column("input_tokens", BigInteger),
    Column("output_tokens", BigInteger),
    Column("command_key", Text),
    Column("command_url", Text),
    Column("cancelled_by", Text),
    Index("runs_repo_number", "repo", "number"),
    Index("runs_job_id", "job_id"),
    Index("runs_created_at", "created_at"),
    # Issue 44: the dashboard reads one repository's runs over a span of days. The index covers every
    # column its sums read, so a span of 100,000 runs is read from the index alone, never row by row
    # (bench/dashboard.py: the page of such a repository went from 0.9-1.6 s to the figures in
    # docs/performance.md on SQLite). Runs are written a few times each, so the wider index costs little.
    Index(
        "runs_repo_created",
        "repo",
        "created_at",
        "skill",
        "status",
        "number",
        "installation_id",
        "input_tokens",
        "output_tokens",
        "started_at",
        "finished_at",
    ),
)

# When each installation was last given a job (fair claims), and per-period counters (limits).
installation_turns = Table(
    "installation_turns",
    metadata,
    Column("installation_id", BigInteger, primary_key=True, autoincrement=False),
    # A turn number, not a time: equal clocks (tests, two fast claims) still order installations.
    Column("last_turn", BigInteger, nullable=False, server_default="0"),
)


def _system_turns(target: Table, connection: Connection, **kw: Any) -> None:
    # The app's own jobs (installation 0) take turns from the start, also jobs written by other means.
    connection.execute(insert(installation_turns).values(installation_id=0, last_turn=0))


event.listen(installation_turns, "after_create", _system_turns)

usage_counters = Table(
    "usage_counters",
    metadata,
    # scope: "user:<repo>:<login>"-like keys; period: a UTC day "2026-11-30" or month "2026-11".
    Column("scope", Text, primary_key=True),
    Column("period", Text, primary_key=True),
    Column("amount", BigInteger, nullable=False, server_default="0"),
)

memory = Table(
    "memory",
    metadata,
    Column("id", _Id, primary_key=True, autoincrement=True),
    Column("scope_key", Text, nullable=False),
    Column("kind", Text, nullable=False),
    Column("text", Text, nullable=False),
    Column("created_at", Double, nullable=False),
    Index("memory_scope_key", "scope_key", "id"),
)

pending_pushes = Table(
    "pending_pushes",
    metadata,
    Column("id", Text, primary_key=True),
    Column("run_id", Text, ForeignKey("runs.id")),
    Column("repo", Text, nullable=False),
    Column("number", Integer),
    Column("base_sha", Text),
    Column("head_sha", Text),
    Column("commit_sha", Text),
    Column("branch", Text),
    Column("diffstat", _Json),
    Column("requester", Text),
    Column("action", _Json),
    Column("state", Text, nullable=False, server_default="pending"),
    Column("approval_comment_id", BigInteger),
    Column("etag", Text),
    Column("created_at", Double, nullable=False),
    Column("expires_at", Double),
    Column("decided_by", Text),
    Column("decided_at", Double),
    Column("pushed_at", Double),
    Column("result", _Json),
    Column("error", Text),
    Index("pending_pushes_repo_number", "repo", "number", "state"),
    Index("pending_pushes_state", "state"),
)

# Issue 23: a held push's commit as a git bundle (what it adds over `prerequisites`, commits GitHub
# has), so a worker on any host can push it after the approval; `sha256` is checked on every read.
# It lives exactly as long as its push row (ON DELETE CASCADE; retention keeps push rows).
held_commits = Table(
    "held_commits",
    metadata,
    Column("push_id", Text, ForeignKey("pending_pushes.id", ondelete="CASCADE"), primary_key=True),
    Column("commit_sha", Text, nullable=False),
    Column("base_sha", Text, nullable=False),
    Column("prerequisites", _Json),
    Column("size", BigInteger, nullable=False),
    Column("sha256", Text, nullable=False),
    Column("pack", LargeBinary, nullable=False),
    Column("created_at", Double, nullable=False),
)

# Automatic reviews (issue 10): one row per pull request. `generation` grows with every push and with
# `closed`, so a queued or running review of an older head sees that it was superseded; `entries`
# is the summary comment's list of reviewed ranges, which the bot edits and never re-posts.
auto_reviews = Table(
    "auto_reviews",
    metadata,
    Column("repo", Text, primary_key=True),
    Column("number", Integer, primary_key=True),
    Column("generation", Integer, nullable=False, server_default="0"),
    Column("target_head", Text),
    Column("due_at", Double, nullable=False, server_default="0"),
    Column("closed", Boolean, nullable=False, server_default=text("false")),
    Column("reviewed_head", Text),
    Column("diff_digest", Text),
    Column("summary_comment_id", BigInteger),
    Column("check_run_id", BigInteger),
    Column("check_head", Text),
    Column("entries", _Json),
    Column("updated_at", Double, nullable=False),
)

# Issue 8: the effects journal (bot/app/effects). One row per write a job makes on GitHub, keyed by
# run id + step: `intent` is recorded before the call, `done` with what GitHub answered after it.
effects = Table(
    "effects",
    metadata,
    Column("key", Text, primary_key=True),
    Column("kind", Text, nullable=False),
    Column("state", Text, nullable=False),
    Column("result", _Json),
    Column("created_at", Double, nullable=False),
    Column("updated_at", Double, nullable=False),
)

# Issue 21: the findings ledger (reviews/ledger.py). One row per inline finding the bot posted: where
# it is anchored (path, line and the code there at `head_sha`), what it claims, and its state.
review_findings = Table(
    "review_findings",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("repo", Text, nullable=False),
    Column("number", Integer, nullable=False),
    Column("comment_id", BigInteger, nullable=False),
    Column("path", Text, nullable=False),
    Column("line", Integer, nullable=False),
    Column("line_text", Text, nullable=False),
    Column("claim", Text, nullable=False),
    Column("severity", Text, nullable=False),
    Column("head_sha", Text, nullable=False),
    Column("state", Text, nullable=False),  # open, dismissed, fixed
    Column("reason", Text),  # how it left `open`: reaction, reply, resolved, or the fixing commit
    Column("by", Text),  # who dismissed it
    Column("reactions_etag", Text),
    Column("created_at", Double, nullable=False),
    Column("updated_at", Double, nullable=False),
    Index("review_findings_comment", "repo", "number", "comment_id", unique=True),
    # Issue 44: the dashboard counts a repository's findings posted in a span, and those that left
    # `open` (fixed, dismissed) per week.
    Index("review_findings_repo_created", "repo", "created_at", "state"),  # covering the counts by state
    Index("review_findings_repo_state_updated", "repo", "state", "updated_at"),
)

# Issue 44: daily roll-ups of runs and findings for the dashboard, kept by triggers (jobs/rollups.py).
# `day` is floor(time / 86400) in UTC. A run counts on the day it was created, under its command,
# status and installation (0 for none); durations are whole milliseconds of the runs that had both ends.
run_days = Table(
    "run_days",
    metadata,
    Column("repo", Text, primary_key=True),
    Column("day", BigInteger, primary_key=True, autoincrement=False),
    Column("skill", Text, primary_key=True),
    Column("status", Text, primary_key=True),
    Column("installation_id", BigInteger, primary_key=True, autoincrement=False),
    Column("runs", BigInteger, nullable=False),
    Column("timed", BigInteger, nullable=False),
    Column("duration_ms", BigInteger, nullable=False),
    Column("input_tokens", BigInteger, nullable=False),
    Column("output_tokens", BigInteger, nullable=False),
)

# A pull request's runs and tokens of all time (number 0: runs on none), and the earliest and latest
# creation time its runs may have (bounds: deleting a run does not narrow them).
pull_totals = Table(
    "pull_totals",
    metadata,
    Column("repo", Text, primary_key=True),
    Column("number", BigInteger, primary_key=True, autoincrement=False),
    Column("runs", BigInteger, nullable=False),
    Column("input_tokens", BigInteger, nullable=False),
    Column("output_tokens", BigInteger, nullable=False),
    Column("first_at", Double, nullable=False),
    Column("last_at", Double, nullable=False),
    Index("pull_totals_repo_first", "repo", "first_at", "last_at"),
)

# A finding counts as `posted` on the day it was created, under its state now (lower case), and, while
# fixed or dismissed, as `left_open` on the day of its last update.
finding_days = Table(
    "finding_days",
    metadata,
    Column("repo", Text, primary_key=True),
    Column("day", BigInteger, primary_key=True, autoincrement=False),
    Column("state", Text, primary_key=True),
    Column("posted", BigInteger, nullable=False),
    Column("left_open", BigInteger, nullable=False),
)


# Issue 44: the dashboard's signed-in sessions (dashboard/session_store.py). `id` is the SHA-256 of the
# random id the browser's cookie carries, `token` the user's GitHub token sealed with the cookies' key:
# a copy of the database opens no session and reads no token.
dashboard_sessions = Table(
    "dashboard_sessions",
    metadata,
    Column("id", Text, primary_key=True),
    Column("login", Text, nullable=False),
    Column("token", Text, nullable=False),
    Column("repos", _Json, nullable=False),
    Column("operator", Boolean, nullable=False),
    Column("by_token", Boolean, nullable=False),
    Column("checked_at", Double, nullable=False),
    Column("created_at", Double, nullable=False),
    Column("expires_at", Double, nullable=False),
    Index("dashboard_sessions_expires", "expires_at"),
)


def _rollup_triggers(target: MetaData, connection: Connection, **kw: Any) -> None:
    # Once every table exists: the triggers join runs and review_findings to their roll-ups.
    create_triggers(connection)


event.listen(metadata, "after_create", _rollup_triggers)

# A run's conversation after its last finished tool round, so a retried run continues from there.
run_checkpoints = Table(
    "run_checkpoints",
    metadata,
    Column("run_id", Text, primary_key=True),
    Column("rounds", Integer, nullable=False),
    Column("messages", _Json, nullable=False),
    Column("updated_at", Double, nullable=False),
)

# Issue 32: a named lease one process holds at a time (the redelivery sweep), taken and renewed by
# compare-and-set on `expires_at`, so several processes on several hosts agree on one holder.
leases = Table(
    "leases",
    metadata,
    Column("name", Text, primary_key=True),
    Column("owner", Text, nullable=False),
    Column("expires_at", Double, nullable=False),
)

# Issue 32: deliveries GitHub was asked to redeliver, by GitHub's delivery id (one failed attempt):
# a sweep never asks twice for the same one. `delivered_at` is when GitHub first tried to deliver
# the event (when the command was posted); `outage_since` the oldest failure that sweep found.
redeliveries = Table(
    "redeliveries",
    metadata,
    Column("delivery_id", BigInteger, primary_key=True, autoincrement=False),
    Column("guid", Text, nullable=False),
    Column("event", Text, nullable=False),
    Column("delivered_at", Double, nullable=False),
    Column("outage_since", Double, nullable=False),
    Column("asked_at", Double, nullable=False),
    Index("redeliveries_guid", "guid"),
)
