"""The claim on PostgreSQL: one server-side function, so completing a job and claiming the next is
one statement and one round trip.

The claim run as separate statements from the worker cost six round trips a job (BEGIN, complete,
installations with due jobs, the locked picks, take, COMMIT). On a machine where the database shares
the cores with the workers, that database time is what keeps two worker processes from doing twice
the work of one (issue 9). This function runs the same transaction inside the server, statement by
statement, exactly as `fairness.FairTurns.take` and `JobQueue._claim_in` do on SQLite; the
behavioural tests of fair claims, caps, leases and key exclusion run against both.

Each statement in a PL/pgSQL function takes a fresh snapshot (READ COMMITTED, VOLATILE), so the
running count read after the turn row's lock sees every claim committed before it, as in fairness.py.
A race for the same key still ends in the unique index's error, which undoes the whole call
(completion included); the caller runs it again.

The function's name carries a hash of its text: a changed function is a new one, created at start-up
by the first process that needs it, while processes of the previous release keep calling theirs
during a rolling deploy. No schema version is spent on it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

# Every statement here is built from constants of this module, never from input (hence the S608
# waivers); the values travel as the function's arguments.

# The installations with a due job, least recently served first: one LIMIT 1 probe of the
# (installation_id, state, id) index per installation, however many jobs are queued (a scalar with a
# LIMIT, not EXISTS, which PostgreSQL may turn into a hashed subplan over every due job).
CANDIDATES = """SELECT t.installation_id FROM installation_turns AS t
     WHERE (SELECT c.id FROM jobs AS c
             WHERE c.installation_id = t.installation_id AND c.state = 'queued'
               AND c.run_after <= p_now LIMIT 1) IS NOT NULL
        OR (SELECT c.id FROM jobs AS c
             WHERE c.installation_id = t.installation_id AND c.state = 'running'
               AND c.lease_expires_at < p_now LIMIT 1) IS NOT NULL
     ORDER BY t.last_turn, t.installation_id
     LIMIT p_choices"""


# The pick's filter when an installation is at its cap: only its jobs of the kinds not capped.
UNCAPPED = " AND c.kind <> ALL (p_capped_kinds)"


def pick(extra: str = "") -> str:
    """Installation `v_inst`'s oldest claimable job as (id, kind): the older of the first expired
    lease and the first due queued job, each an ordered index probe whose row is locked, skipping
    locked rows (`FOR UPDATE` needs each in a subquery of its own)."""
    key_free = (
        "(c.key IS NULL OR NOT EXISTS (SELECT 1 FROM jobs AS o"
        " WHERE o.key = c.key AND o.state = 'running' AND o.id <> c.id))"
    )
    picks = [
        f"SELECT x.id, x.kind FROM (SELECT c.id, c.kind FROM jobs AS c"  # noqa: S608
        f" WHERE c.installation_id = v_inst AND {claimable}{extra} AND {key_free}"
        f" ORDER BY c.id LIMIT 1 FOR UPDATE SKIP LOCKED) AS x"
        for claimable in (
            "c.state = 'running' AND c.lease_expires_at < p_now",
            # `+ 0`: the index walk stays in id order (see fastpath).
            "c.state = 'queued' AND c.run_after + 0 <= p_now",
        )
    ]
    both = f"({picks[0]} UNION ALL {picks[1]}) AS p"
    return f"SELECT p.id, p.kind FROM {both} ORDER BY p.id LIMIT 1"  # noqa: S608


def _pick_into(extra: str = "") -> str:
    return f"SELECT q.id, q.kind INTO v_id, v_kind FROM ({pick(extra)}) AS q;"  # noqa: S608


_TEMPLATE = """
DECLARE
    v_done boolean;
    v_choices bigint[];
    v_inst bigint;
    v_id bigint;
    v_kind text;
    v_job jobs%ROWTYPE;
    v_taken boolean;
    v_buried bigint[] := '{{}}';
    v_buried_kinds text[] := '{{}}';
BEGIN
    IF p_done_id IS NOT NULL THEN
        UPDATE jobs AS j
           SET state = 'done', lease_owner = NULL, lease_expires_at = NULL, last_error = NULL,
               updated_at = p_now
         WHERE j.id = p_done_id AND j.state = 'running' AND j.lease_owner = p_owner
           AND j.attempts = p_done_attempts;
        v_done := FOUND;
    END IF;
    IF NOT p_claim THEN
        r_done := v_done;
        RETURN NEXT;
        RETURN;
    END IF;
    LOOP
        v_taken := false;
        v_choices := ARRAY({candidates});
        FOR n IN 1 .. coalesce(array_length(v_choices, 1), 0) LOOP
            v_inst := v_choices[n];
            v_id := NULL;
            -- Its oldest claimable job, locked.
            {pick}
            CONTINUE WHEN v_id IS NULL;
            IF p_cap IS NOT NULL AND v_inst <> p_system
               AND (p_capped_kinds IS NULL OR v_kind = ANY (p_capped_kinds)) THEN
                -- A capped job: the installation's claims go one at a time from here (the first
                -- choice waits for the lock, later ones skip), and the count is read after it.
                IF n = 1 THEN
                    PERFORM 1 FROM installation_turns AS t
                      WHERE t.installation_id = v_inst FOR UPDATE;
                ELSE
                    PERFORM 1 FROM installation_turns AS t
                      WHERE t.installation_id = v_inst FOR UPDATE SKIP LOCKED;
                    CONTINUE WHEN NOT FOUND;
                END IF;
                IF (SELECT count(*) FROM jobs AS r
                     WHERE r.installation_id = v_inst AND r.state = 'running'
                       AND r.lease_expires_at >= p_now
                       AND (p_capped_kinds IS NULL OR r.kind = ANY (p_capped_kinds))) >= p_cap THEN
                    -- At its cap: only its jobs of other kinds (with every kind capped, none).
                    CONTINUE WHEN p_capped_kinds IS NULL;
                    v_id := NULL;
                    {pick_uncapped}
                    CONTINUE WHEN v_id IS NULL;
                END IF;
            END IF;
            UPDATE jobs AS j
               SET state = 'running', attempts = j.attempts + 1, lease_owner = p_owner,
                   lease_expires_at = p_expires, updated_at = p_now
             WHERE j.id = v_id
            RETURNING j.* INTO v_job;
            CONTINUE WHEN NOT FOUND;
            IF array_length(v_choices, 1) > 1 THEN
                -- Alone with due jobs, an installation keeps its place (no write).
                UPDATE installation_turns AS t
                   SET last_turn = (SELECT coalesce(max(l.last_turn), 0) + 1
                                      FROM installation_turns AS l)
                 WHERE t.installation_id = v_inst;
            END IF;
            v_taken := true;
            EXIT;
        END LOOP;
        IF NOT v_taken THEN
            r_done := v_done;
            r_buried := v_buried;
            r_buried_kinds := v_buried_kinds;
            RETURN NEXT;
            RETURN;
        END IF;
        EXIT WHEN v_job.attempts <= v_job.max_attempts;
        -- Its last allowed attempt died with its worker: bury it, look again.
        UPDATE jobs AS j
           SET state = 'dead', attempts = j.max_attempts, lease_owner = NULL,
               lease_expires_at = NULL, updated_at = p_now,
               last_error = p_lost || ' (' || v_job.max_attempts || '): worker lost'
         WHERE j.id = v_job.id;
        v_buried := v_buried || v_job.id;
        v_buried_kinds := v_buried_kinds || v_job.kind;
    END LOOP;
    RETURN QUERY
        SELECT v_done, v_job.id, v_job.kind, v_job.key, v_job.delivery_id, v_job.payload::text,
               v_job.attempts, v_job.max_attempts, v_job.lease_owner, v_job.lease_expires_at,
               v_job.installation_id, d.event, d.action, d.payload, v_buried, v_buried_kinds
          FROM (SELECT 1) AS one
          LEFT JOIN deliveries AS d ON d.delivery_id = v_job.delivery_id;
END
"""
_PARTS = {
    "candidates": CANDIDATES,
    "pick": _pick_into(),
    "pick_uncapped": _pick_into(UNCAPPED),
}
_BODY = _TEMPLATE.format(**_PARTS)

_SIGNATURE = """(
    p_done_id bigint, p_done_attempts integer, p_owner text, p_now double precision,
    p_expires double precision, p_claim boolean, p_cap integer, p_capped_kinds text[],
    p_system bigint, p_choices integer, p_lost text
) RETURNS TABLE (
    r_done boolean, r_id bigint, r_kind text, r_key text, r_delivery_id text, r_payload text,
    r_attempts integer, r_max_attempts integer, r_lease_owner text,
    r_lease_expires_at double precision, r_installation_id bigint,
    r_event text, r_action text, r_delivery_payload text,
    r_buried bigint[], r_buried_kinds text[]
)"""

FUNCTION = "beam_claim_" + hashlib.sha256((_SIGNATURE + _BODY).encode()).hexdigest()[:12]
CREATE = (
    f"CREATE OR REPLACE FUNCTION {FUNCTION}{_SIGNATURE}\nLANGUAGE plpgsql VOLATILE AS $beam${_BODY}$beam$"
)
CALL = f"SELECT * FROM {FUNCTION}($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)"  # noqa: S608
EXISTS = "SELECT to_regproc($1) IS NOT NULL"

# The function's columns, as the names `Job` and the SQLite path use.
COLUMNS = (
    "id",
    "kind",
    "key",
    "delivery_id",
    "payload",
    "attempts",
    "max_attempts",
    "lease_owner",
    "lease_expires_at",
    "installation_id",
    "event",
    "action",
    "delivery_payload",
)


@dataclass(frozen=True, slots=True)
class ClaimCall:
    """The arguments of one call: what to complete (if anything) and whether to claim."""

    owner: str
    now: float
    expires: float
    claim: bool
    done_id: int | None = None
    done_attempts: int | None = None

    def args(
        self, cap: int | None, capped_kinds: frozenset[str] | None, system: int, choices: int, lost: str
    ) -> tuple[Any, ...]:
        kinds = None if capped_kinds is None else sorted(capped_kinds)
        return (
            self.done_id,
            self.done_attempts,
            self.owner,
            self.now,
            self.expires,
            self.claim,
            cap,
            kinds,
            system,
            choices,
            lost,
        )


def unpack(row: Any) -> tuple[bool | None, dict[str, Any] | None, list[tuple[int, str]]]:
    """The call's one row: (completed, or None when nothing was to complete; the job, or None; the
    (id, kind) of every job the claim buried on the way, whose end the caller reports at once)."""
    values = tuple(row)
    done, job, (ids, kinds) = values[0], values[1 : 1 + len(COLUMNS)], values[1 + len(COLUMNS) :]
    buried = list(zip(ids or (), kinds or (), strict=True))
    if job[0] is None:
        return done, None, buried
    return done, dict(zip(COLUMNS, job, strict=True)), buried
