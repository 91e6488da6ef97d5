"""GitHub's repository roles in rank order, and the one comparison every permission check uses.

Kept at the root, beneath everything that asks "may this person do that" (the repository config's
thresholds, the command check, who may answer a held push), so no two places can rank roles apart.
"""

from __future__ import annotations

from typing import Literal, get_args

Permission = Literal["read", "triage", "write", "maintain", "admin"]
PERMISSIONS: tuple[Permission, ...] = get_args(Permission)

# GitHub's order of repository roles. The collaborator permission endpoint's `permission` is one of
# admin/write/read/none and its `role_name` may also be maintain/triage; pull/push are the older names.
# https://docs.github.com/en/rest/collaborators/collaborators#get-repository-permissions-for-a-user
_RANK = {"none": 0, "read": 1, "pull": 1, "triage": 2, "write": 3, "push": 3, "maintain": 4, "admin": 5}


def permission_at_least(actual: str | None, needed: str) -> bool:
    """True when role `actual` is `needed` or higher; an unknown or missing role grants nothing."""
    if needed.strip().lower() not in _RANK:
        raise ValueError(f"unknown permission {needed!r}; choose from {', '.join(PERMISSIONS)}")
    have = _RANK.get((actual or "none").strip().lower(), 0)
    return have >= _RANK[needed.strip().lower()]


def effective_permission(permission: str | None, role_name: str | None = None) -> str:
    """The higher of the endpoint's `permission` and `role_name`, since only `role_name` says maintain
    or triage; a custom role name is ignored (its base role is in `permission`)."""
    known = [name.strip().lower() for name in (permission, role_name) if name]
    known = [name for name in known if name in _RANK]
    best = max(known, key=_RANK.__getitem__, default="none")
    return {"pull": "read", "push": "write"}.get(best, best)
