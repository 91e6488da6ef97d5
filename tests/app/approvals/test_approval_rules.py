"""Who may approve a held push, decided without I/O."""

from __future__ import annotations

import pytest

from bot.app.approvals.held_push import check_target
from bot.app.approvals.rules import (
    Policy,
    Signal,
    decide,
    next_poll_delay,
    signals_from_reactions,
    users_to_check,
)

NOW = 1_000_000.0
PERMS = {"boss": "admin", "maint": "write", "reader": "read", "req": "write"}


def verdict(signals: list[Signal], policy: Policy | None = None, **kw: object):  # type: ignore[no-untyped-def]
    args = {
        "state": "pending",
        "expires_at": NOW + 60,
        "now": NOW,
        "signals": signals,
        "permissions": PERMS,
        "requester": "req",
        "policy": policy or Policy(),
    }
    args.update(kw)
    return decide(**args)  # type: ignore[arg-type]


def up(user: str, source: str = "reaction") -> Signal:
    return Signal(user, "approve", source)  # type: ignore[arg-type]


def down(user: str) -> Signal:
    return Signal(user, "reject", "reaction")


def test_one_maintainer_approves() -> None:
    result = verdict([up("maint")])
    assert result.outcome == "approve" and result.approvers == ("maint",)


def test_readers_bots_and_unknown_users_do_not_count() -> None:
    result = verdict(
        [up("reader"), Signal("ci[bot]", "approve", "reaction", True), up("stranger"), up("x[bot]")]
    )
    assert result.outcome == "wait"
    assert {who for who, _ in result.ignored} == {"reader", "ci[bot]", "stranger", "x[bot]"}


def test_a_rejection_wins_over_approvals() -> None:
    result = verdict([up("maint"), up("boss"), down("maint")])
    assert result.outcome == "reject" and result.rejected_by == "maint"


def test_a_reader_cannot_reject_but_the_requester_can_withdraw() -> None:
    assert verdict([down("reader"), up("boss")]).outcome == "approve"
    assert verdict([down("req")], permissions={"req": "read"}).outcome == "reject"


def test_self_approval_follows_policy() -> None:
    assert verdict([up("req")]).outcome == "approve"
    result = verdict([up("req")], Policy(self_approval=False))
    assert result.outcome == "wait" and "self-approval is off" in result.ignored[0][1]


def test_approvals_required_counts_distinct_people() -> None:
    policy = Policy(approvals_required=2)
    assert verdict([up("maint"), up("MAINT", "command")], policy).outcome == "wait"
    assert verdict([up("maint"), up("boss", "command")], policy).outcome == "approve"


def test_higher_approve_permission() -> None:
    assert verdict([up("maint")], Policy(approve_permission="admin")).outcome == "wait"
    assert verdict([up("boss")], Policy(approve_permission="admin")).outcome == "approve"


def test_expiry_and_settled_states() -> None:
    assert verdict([up("boss")], now=NOW + 61).outcome == "expire"
    for state in ("approved", "pushed", "rejected", "expired", "superseded", "failed"):
        assert verdict([up("boss")], state=state).outcome == "settled"


def test_reactions_to_signals() -> None:
    signals = signals_from_reactions(
        [("a", "+1", False), ("b", "-1", False), ("c", "heart", False), ("d", "+1", True)]
    )
    assert [(s.user, s.kind, s.is_bot) for s in signals] == [
        ("a", "approve", False),
        ("b", "reject", False),
        ("d", "approve", True),
    ]
    assert users_to_check([*signals, up("A")]) == ["a", "b"]


def test_polling_starts_often_and_backs_off() -> None:
    delays = [next_poll_delay(age, minimum=5, maximum=300) for age in (0, 30, 600, 3000, 86400)]
    assert delays == [5, 5, 60, 300, 300]
    assert delays == sorted(delays)


PROTECTED = ["feature", "main", "master"]


@pytest.mark.parametrize("ref", [None, "", "HEAD", "beam/pr-7/author-1", "refs/heads/beam/pr-7/author-1"])
def test_the_run_branch_is_the_only_target(ref: str | None) -> None:
    assert check_target(ref, "beam/pr-7/author-1", PROTECTED) is None


@pytest.mark.parametrize(
    ("ref", "code"),
    [
        ("main", "BEM-328"),
        ("HEAD:main", "BEM-328"),
        ("+main", "BEM-328"),
        (":main", "BEM-328"),
        ("MASTER", "BEM-328"),
        ("feature", "BEM-328"),
        ("beam/pr-7/author-2", "BEM-335"),
        ("+beam/pr-7/author-1", "BEM-335"),
        ("HEAD:beam/pr-7/author-2", "BEM-335"),
        ("git@evil:x.git", "BEM-335"),
        (["main"], "BEM-335"),
    ],
)
def test_any_other_target_is_refused(ref: object, code: str) -> None:
    error = check_target(ref, "beam/pr-7/author-1", PROTECTED)
    assert error is not None and error.code == code
