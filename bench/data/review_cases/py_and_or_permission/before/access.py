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


def can_edit(user, doc):
    if doc.locked:
        return user.admin
    return user.admin or user.id == doc.owner_id
