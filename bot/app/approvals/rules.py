"""Who may approve a held push, and what a set of answers means: decided without any I/O.

Reactions (polled) and `/beam approve|reject` commands (webhooks) both become `Signal`s and go
through `decide`, so the two paths can never disagree. Permissions are the ones GitHub reports at
decision time, never the ones at request time: a maintainer removed since the request counts for
nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from bot.app.github.models import is_bot_login
from bot.app.permissions import permission_at_least

SignalKind = Literal["approve", "reject"]
Outcome = Literal["approve", "reject", "expire", "wait", "settled"]

REACTIONS: dict[str, SignalKind] = {"+1": "approve", "-1": "reject"}


@dataclass(frozen=True, slots=True)
class Signal:
    user: str
    kind: SignalKind
    source: Literal["reaction", "command"]
    is_bot: bool = False


@dataclass(frozen=True, slots=True)
class Policy:
    approve_permission: str = "write"
    self_approval: bool = True
    approvals_required: int = 1


@dataclass(frozen=True, slots=True)
class Verdict:
    outcome: Outcome
    approvers: tuple[str, ...] = ()
    rejected_by: str | None = None
    ignored: tuple[tuple[str, str], ...] = ()


def signals_from_reactions(reactions: Iterable[tuple[str, str, bool]]) -> list[Signal]:
    """`(user, content, is_bot)` triples to signals; reactions other than 👍 and 👎 mean nothing."""
    out: list[Signal] = []
    for user, content, is_bot in reactions:
        kind = REACTIONS.get(content)
        if kind is not None:
            out.append(Signal(user, kind, "reaction", is_bot or is_bot_login(user)))
    return out


def decide(
    *,
    state: str,
    expires_at: float,
    now: float,
    signals: Iterable[Signal],
    permissions: Mapping[str, str],
    requester: str,
    policy: Policy,
) -> Verdict:
    """The outcome for a held push. `permissions` is keyed by lower-case login.

    A rejection by anyone who may answer wins over approvals (a 👍 and a 👎 at once push nothing).
    The requester may always withdraw their own request; approving it themselves follows policy.
    """
    if state != "pending":
        return Verdict("settled")
    if now >= expires_at:
        return Verdict("expire")
    approvers: list[str] = []
    ignored: list[tuple[str, str]] = []
    rejected_by: str | None = None
    for signal in signals:
        who = signal.user.lower()
        is_requester = who == requester.lower()
        if signal.is_bot or is_bot_login(signal.user):
            ignored.append((signal.user, "a bot"))
            continue
        allowed = permission_at_least(permissions.get(who), policy.approve_permission)
        if signal.kind == "reject":
            if allowed or is_requester:
                rejected_by = rejected_by or signal.user
            else:
                ignored.append((signal.user, f"needs {policy.approve_permission} permission"))
            continue
        if not allowed:
            ignored.append((signal.user, f"needs {policy.approve_permission} permission"))
        elif is_requester and not policy.self_approval:
            ignored.append((signal.user, "asked for this change; self-approval is off"))
        elif who not in (a.lower() for a in approvers):
            approvers.append(signal.user)
    if rejected_by is not None:
        return Verdict("reject", tuple(approvers), rejected_by, tuple(ignored))
    if len(approvers) >= policy.approvals_required:
        return Verdict("approve", tuple(approvers), None, tuple(ignored))
    return Verdict("wait", tuple(approvers), None, tuple(ignored))


def users_to_check(signals: Iterable[Signal]) -> list[str]:
    """Distinct human logins whose permission must be asked of GitHub (lower-case)."""
    seen: dict[str, None] = {}
    for signal in signals:
        if not signal.is_bot and not is_bot_login(signal.user):
            seen.setdefault(signal.user.lower(), None)
    return list(seen)


def next_poll_delay(age: float, *, minimum: float, maximum: float) -> float:
    """Often at first, then backing off: a tenth of the push's age, within [minimum, maximum]."""
    return max(minimum, min(maximum, age / 10.0))
