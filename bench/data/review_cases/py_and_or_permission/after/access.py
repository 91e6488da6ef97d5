"""Who may change a document."""

from dataclasses import dataclass


@dataclass(frozen=True)
class User:
    id: int
    admin: bool = False


@dataclass(frozen=True)
class Document:
    owner_id: int
    locked: bool = False
    archived: bool = False


def can_edit(user, doc):
    if doc.locked or doc.archived:
        return user.admin
    is_owner = user.id == doc.owner_id
    return user.admin and is_owner
