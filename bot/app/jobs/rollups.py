"""Daily roll-ups of runs and findings (issue 44), kept by the database itself.

The dashboard sums a repository's runs and findings over 7, 30 or 90 days; summing 100,000 rows per
page is what made a big repository's page slow on SQLite. `run_days` and `finding_days` hold the same
sums per repository and UTC day (`floor(time / 86400)`); `pull_totals` each pull request's runs and
tokens of all time, with bounds on when its runs were created (a pull request whose first run is
inside the span counts whole; only the others are summed from their runs). Triggers on `runs` and
`review_findings` move a row's contribution whenever it is inserted, changed or deleted. A trigger
runs inside the statement that wrote the row, so the roll-ups commit or roll back with it: no writer
(the runs ledger, the findings ledger, retention, a test's or a benchmark's bulk insert) can leave
them behind.

A roll-up row that falls to zero is deleted (a pull request's bounds only widen: a run taken away
leaves them bounds, never wrong ones), so the tables only hold days that had something. On
PostgreSQL a change takes its two roll-up rows (the old key's and the new key's) in key order, so two
transactions moving runs in opposite directions cannot deadlock on them.

Durations are summed in whole milliseconds: integers add and subtract exactly, so a run counted in and
out again leaves no rounding behind.
"""

from __future__ import annotations

import math

from sqlalchemy import Connection, text

DAY = 86400.0

RUN_KEY = ("repo", "day", "skill", "status", "installation_id")
RUN_SUMS = ("runs", "timed", "duration_ms", "input_tokens", "output_tokens")
PULL_KEY = ("repo", "number")
PULL_SUMS = ("runs", "input_tokens", "output_tokens")
FINDING_KEY = ("repo", "day", "state")
FINDING_SUMS = ("posted", "left_open")
# What the triggers watch: a change of any other column (a finding's reactions etag, a run's summary)
# moves nothing.
RUN_COLUMNS = (
    "repo",
    "created_at",
    "skill",
    "status",
    "installation_id",
    "input_tokens",
    "output_tokens",
    "started_at",
    "finished_at",
)
FINDING_COLUMNS = ("repo", "state", "created_at", "updated_at")
# SQLite's triggers; PostgreSQL has one per table (`run_days_change`, `finding_days_change`).
ROLLUP_TRIGGERS = tuple(f"{t}_days_{op}" for t in ("run", "finding") for op in ("insert", "update", "delete"))


def day_of(when: float) -> int:
    """The roll-up day of a time, as the database computes it (a float division, then floor)."""
    return math.floor(when / DAY)


def _day(dialect: str, column: str) -> str:
    if dialect == "postgresql":
        return f"CAST(floor({column} / 86400.0) AS BIGINT)"
    return f"CAST({column} / 86400.0 AS INTEGER)"  # times are positive: truncation is floor


def _milliseconds(row: str) -> str:
    return f"CAST(round(({row}.finished_at - {row}.started_at) * 1000) AS BIGINT)"


def _run_values(dialect: str, row: str, sign: str) -> list[str]:
    """The roll-up key and sums one run adds (`sign` 1) or takes away (-1)."""
    timed = f"({row}.started_at IS NOT NULL AND {row}.finished_at IS NOT NULL)"
    return [
        f"{row}.repo",
        _day(dialect, f"{row}.created_at"),
        f"{row}.skill",
        f"{row}.status",
        f"COALESCE({row}.installation_id, 0)",
        sign,
        f"CASE WHEN {timed} THEN {sign} ELSE 0 END",
        f"CASE WHEN {timed} THEN {sign} * {_milliseconds(row)} ELSE 0 END",
        f"{sign} * COALESCE({row}.input_tokens, 0)",
        f"{sign} * COALESCE({row}.output_tokens, 0)",
    ]


def _upsert(
    dialect: str,
    table: str,
    key: tuple[str, ...],
    sums: tuple[str, ...],
    values: list[str],
    when: str = "",
    bounds: tuple[str, str] | None = None,
) -> str:
    """Add `values` to the row of their key, creating it, then drop that row if it fell to nothing;
    only `when` the condition (SQL on the trigger's row) holds. `bounds` names a lowest and a highest
    column (their values last): they only widen, so they stay bounds when a row is taken away."""
    columns = ", ".join((*key, *sums, *(bounds or ())))
    added = ", ".join(f"{s} = {table}.{s} + excluded.{s}" for s in sums)
    if bounds is not None:
        low, high = ("LEAST", "GREATEST") if dialect == "postgresql" else ("min", "max")
        added += f", {bounds[0]} = {low}({table}.{bounds[0]}, excluded.{bounds[0]})"
        added += f", {bounds[1]} = {high}({table}.{bounds[1]}, excluded.{bounds[1]})"
    match = " AND ".join(f"{k} = {v}" for k, v in zip(key, values[: len(key)], strict=True))
    empty = " AND ".join(f"{s} = 0" for s in sums)
    conflict = f"ON CONFLICT ({', '.join(key)}) DO UPDATE SET {added}"
    delete = f"DELETE FROM {table} WHERE {match} AND {empty};"  # noqa: S608
    insert = f"INSERT INTO {table} ({columns})"
    if not when:
        return f"{insert} VALUES ({', '.join(values)}) {conflict}; {delete}"
    if dialect == "postgresql":
        return f"IF {when} THEN {insert} VALUES ({', '.join(values)}) {conflict}; {delete} END IF;"
    # A trigger body on SQLite has no IF: a SELECT without FROM whose WHERE is the condition.
    return f"{insert} SELECT {', '.join(values)} WHERE {when} {conflict}; {delete}"


def _pull_values(row: str, sign: str) -> list[str]:
    """A run's share of its pull request's totals (number 0 for a run on none)."""
    return [
        f"{row}.repo",
        f"COALESCE({row}.number, 0)",
        sign,
        f"{sign} * COALESCE({row}.input_tokens, 0)",
        f"{sign} * COALESCE({row}.output_tokens, 0)",
        f"{row}.created_at",
        f"{row}.created_at",
    ]


def _run_change(dialect: str, row: str, sign: str) -> str:
    days = _upsert(dialect, "run_days", RUN_KEY, RUN_SUMS, _run_values(dialect, row, sign))
    pulls = _upsert(
        dialect, "pull_totals", PULL_KEY, PULL_SUMS, _pull_values(row, sign), bounds=("first_at", "last_at")
    )
    return f"{days} {pulls}"


def _finding_change(dialect: str, row: str, sign: str) -> str:
    """A finding counts as posted on its creation day under its state, and, once fixed or dismissed,
    as having left `open` on the day of its last update."""
    posted = [f"{row}.repo", _day(dialect, f"{row}.created_at"), f"lower({row}.state)", sign, "0"]
    left = [f"{row}.repo", _day(dialect, f"{row}.updated_at"), f"{row}.state", "0", sign]
    return _upsert(dialect, "finding_days", FINDING_KEY, FINDING_SUMS, posted) + _upsert(
        dialect, "finding_days", FINDING_KEY, FINDING_SUMS, left, f"{row}.state IN ('fixed', 'dismissed')"
    )


def trigger_statements(dialect: str) -> list[str]:
    """The DDL of the roll-up triggers for `dialect` (drop first, so running it twice is harmless)."""
    if dialect == "postgresql":
        return _pg_triggers()
    return _sqlite_triggers()


def _sqlite_triggers() -> list[str]:
    def trigger(name: str, when: str, table: str, body: str) -> str:
        return f"CREATE TRIGGER {name} AFTER {when} ON {table} FOR EACH ROW BEGIN {body} END"

    return [
        *(f"DROP TRIGGER IF EXISTS {name}" for name in ROLLUP_TRIGGERS),
        trigger("run_days_insert", "INSERT", "runs", _run_change("sqlite", "NEW", "1")),
        trigger(
            "run_days_update",
            f"UPDATE OF {', '.join(RUN_COLUMNS)}",
            "runs",
            _run_change("sqlite", "OLD", "-1") + " " + _run_change("sqlite", "NEW", "1"),
        ),
        trigger("run_days_delete", "DELETE", "runs", _run_change("sqlite", "OLD", "-1")),
        trigger("finding_days_insert", "INSERT", "review_findings", _finding_change("sqlite", "NEW", "1")),
        trigger(
            "finding_days_update",
            f"UPDATE OF {', '.join(FINDING_COLUMNS)}",
            "review_findings",
            _finding_change("sqlite", "OLD", "-1") + " " + _finding_change("sqlite", "NEW", "1"),
        ),
        trigger("finding_days_delete", "DELETE", "review_findings", _finding_change("sqlite", "OLD", "-1")),
    ]


def _pg_triggers() -> list[str]:
    run_key_old = ", ".join(_run_values("postgresql", "OLD", "1")[: len(RUN_KEY)])
    run_key_new = ", ".join(_run_values("postgresql", "NEW", "1")[: len(RUN_KEY)])
    runs_body = f"""
BEGIN
  IF TG_OP = 'INSERT' THEN {_run_change("postgresql", "NEW", "1")}
  ELSIF TG_OP = 'DELETE' THEN {_run_change("postgresql", "OLD", "-1")}
  ELSIF ({run_key_old}) <= ({run_key_new}) THEN
    {_run_change("postgresql", "OLD", "-1")} {_run_change("postgresql", "NEW", "1")}
  ELSE
    {_run_change("postgresql", "NEW", "1")} {_run_change("postgresql", "OLD", "-1")}
  END IF;
  RETURN NULL;
END"""
    findings_body = f"""
BEGIN
  IF TG_OP = 'INSERT' THEN {_finding_change("postgresql", "NEW", "1")}
  ELSIF TG_OP = 'DELETE' THEN {_finding_change("postgresql", "OLD", "-1")}
  ELSIF (OLD.repo, OLD.created_at, OLD.state) <= (NEW.repo, NEW.created_at, NEW.state) THEN
    {_finding_change("postgresql", "OLD", "-1")} {_finding_change("postgresql", "NEW", "1")}
  ELSE
    {_finding_change("postgresql", "NEW", "1")} {_finding_change("postgresql", "OLD", "-1")}
  END IF;
  RETURN NULL;
END"""

    def function(name: str, body: str) -> str:
        return (
            f"CREATE OR REPLACE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $rollup${body}$rollup$"
        )

    return [
        "DROP TRIGGER IF EXISTS run_days_change ON runs",
        "DROP TRIGGER IF EXISTS finding_days_change ON review_findings",
        function("run_days_apply", runs_body),
        function("finding_days_apply", findings_body),
        "CREATE TRIGGER run_days_change AFTER INSERT OR DELETE OR UPDATE OF "
        f"{', '.join(RUN_COLUMNS)} ON runs FOR EACH ROW EXECUTE FUNCTION run_days_apply()",
        "CREATE TRIGGER finding_days_change AFTER INSERT OR DELETE OR UPDATE OF "
        f"{', '.join(FINDING_COLUMNS)} ON review_findings FOR EACH ROW EXECUTE FUNCTION finding_days_apply()",
    ]


def create_triggers(conn: Connection) -> None:
    for statement in trigger_statements(conn.dialect.name):
        conn.exec_driver_sql(statement)


def drop_triggers(conn: Connection) -> None:
    """Take the triggers away (what a database before v12 lacks): the upgrade tests build one."""
    statements = trigger_statements(conn.dialect.name)
    for statement in statements:
        if statement.startswith("DROP TRIGGER"):
            conn.exec_driver_sql(statement)


def backfill(conn: Connection) -> None:
    """Fill the roll-ups from the rows already there (the upgrade to v12), in the same transaction
    that creates the triggers, so no write falls between the two."""
    dialect = conn.dialect.name
    for table in ("run_days", "pull_totals", "finding_days"):
        conn.execute(text(f"DELETE FROM {table}"))  # noqa: S608
    values = _run_values(dialect, "runs", "1")
    sums = ", ".join(f"SUM({v})" for v in values[len(RUN_KEY) :])
    keys = ", ".join(values[: len(RUN_KEY)])
    conn.execute(
        text(
            f"INSERT INTO run_days ({', '.join((*RUN_KEY, *RUN_SUMS))}) "  # noqa: S608
            f"SELECT {keys}, {sums} FROM runs GROUP BY {keys}"
        )
    )
    conn.execute(
        text(
            "INSERT INTO pull_totals (repo, number, runs, input_tokens, output_tokens, first_at, last_at) "
            "SELECT repo, COALESCE(number, 0), COUNT(*), SUM(COALESCE(input_tokens, 0)), "
            "SUM(COALESCE(output_tokens, 0)), MIN(created_at), MAX(created_at) FROM runs "
            "GROUP BY repo, COALESCE(number, 0)"
        )
    )
    created, updated = _day(dialect, "created_at"), _day(dialect, "updated_at")
    conn.execute(
        text(
            "INSERT INTO finding_days (repo, day, state, posted, left_open) "  # noqa: S608
            f"SELECT repo, {created}, lower(state), COUNT(*), 0 FROM review_findings "
            f"GROUP BY repo, {created}, lower(state)"
        )
    )
    # WHERE 1 = 1: SQLite reads `ON` after a bare FROM as a join's; the WHERE ends the SELECT.
    conn.execute(
        text(
            "INSERT INTO finding_days (repo, day, state, posted, left_open) "  # noqa: S608
            f"SELECT repo, {updated}, state, 0, COUNT(*) FROM review_findings "
            f"WHERE state IN ('fixed', 'dismissed') GROUP BY repo, {updated}, state "
            "ON CONFLICT (repo, day, state) DO UPDATE SET "
            "left_open = finding_days.left_open + excluded.left_open"
        )
    )
