"""Pending actions: what an interrupted run asked to do, kept by the host until a person answers.

The original stored the action but then ran whatever tool and arguments the *client's* resume
envelope named, ran it even for a `cancelled` answer, and never checked who the action belonged to
(riverbeam-reference.md 8.5, 9.2). Here the stored `{tool, args}` is the only thing that can run,
an action is claimed with a compare-and-set from `pending` (so two concurrent resumes run it once),
and it must belong to the resuming session and agent.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import StrEnum
from typing import Any, Protocol

from bot.beam.errors import BeamError
from bot.beam.types import ActionResponseEnvelope, ActionResponseStatus, AgentInput, AgentResult, utc_now


class ActionStatus(StrEnum):
    PENDING = "pending"
    RESOLVED = "resolved"
    CANCELLED = "cancelled"


@dataclass(frozen=True, slots=True)
class PendingAction:
    action_id: str
    kind: str
    tool: str
    args: Any
    agent_name: str
    session_id: str
    interaction_id: str
    status: str = ActionStatus.PENDING
    created_at: datetime = field(default_factory=utc_now)


class ActionStore(Protocol):
    """Where pending actions live; `resolve` must be an atomic compare-and-set from `pending`."""

    async def save(self, action: PendingAction) -> None: ...

    async def get(self, action_id: str) -> PendingAction | None: ...

    async def resolve(self, action_id: str, new_status: str) -> bool: ...


class InMemoryActionStore:
    """The default store. No await between the status check and the write, so the set is atomic."""

    def __init__(self) -> None:
        self._actions: dict[str, PendingAction] = {}

    async def save(self, action: PendingAction) -> None:
        self._actions[action.action_id] = action

    async def get(self, action_id: str) -> PendingAction | None:
        return self._actions.get(action_id)

    async def resolve(self, action_id: str, new_status: str) -> bool:
        action = self._actions.get(action_id)
        if action is None or action.status != ActionStatus.PENDING:
            return False
        self._actions[action_id] = replace(action, status=new_status)
        return True


def _canonical_uuid(value: object) -> str | None:
    if not isinstance(value, str):
        return None
    try:
        return str(uuid.UUID(value))
    except ValueError:
        return None


def pending_actions_from(result: AgentResult, input: AgentInput, agent_name: str) -> list[PendingAction]:
    """One pending action per `action_required` entry of an interrupted result.

    The tool and arguments come from the agent's own result. An entry whose `action_id` is not a
    UUID gets a new one, written back into the entry so the id the client sees is the stored one.
    """
    if not result.interrupted or not result.action_required:
        return []
    interaction_id = str(input.interaction_id or input.run_id)
    actions = []
    for entry in result.action_required:
        action_id = _canonical_uuid(entry.get("action_id")) or str(uuid.uuid4())
        entry["action_id"] = action_id
        kind = entry.get("kind")
        tool = entry.get("tool")
        args = entry.get("args")
        actions.append(
            PendingAction(
                action_id=action_id,
                kind=kind if isinstance(kind, str) and kind else "confirmation",
                tool=tool if isinstance(tool, str) else "",
                args=args if args is not None else {},
                agent_name=agent_name,
                session_id=str(input.session_id),
                interaction_id=interaction_id,
            )
        )
    return actions


def host_envelope(envelope: ActionResponseEnvelope, action: PendingAction) -> ActionResponseEnvelope:
    """What the agent receives: the person's answer, with the stored action as the only payload."""
    submitted = envelope.status is ActionResponseStatus.SUBMITTED
    return ActionResponseEnvelope(
        action_id=action.action_id,
        kind=action.kind,
        request_id=envelope.request_id,
        status=envelope.status,
        payload={"tool": action.tool, "args": action.args} if submitted else None,
        responder_id=envelope.responder_id,
        responded_at=envelope.responded_at,
    )


async def claim_actions(
    store: ActionStore,
    envelopes: Sequence[ActionResponseEnvelope],
    *,
    session_id: str,
    agent_name: str,
) -> list[ActionResponseEnvelope]:
    """Check every envelope, then claim each action; returns the host-built envelopes.

    A `submitted` answer resolves the action; `cancelled`, `expired` and `invalid` cancel it. All
    checks run before any claim, so a bad envelope claims nothing. Losing a claim to a concurrent
    resume is BEM-066; actions this call claimed before that stay claimed and do not run.
    """
    checked: list[tuple[ActionResponseEnvelope, PendingAction]] = []
    for envelope in envelopes:
        action_id = _canonical_uuid(envelope.action_id)
        if action_id is None:
            raise BeamError("BEM-063", envelope.action_id)
        action = await store.get(action_id)
        if action is None:
            raise BeamError("BEM-027", action_id)
        if action.session_id != session_id or action.agent_name != agent_name:
            raise BeamError("BEM-065", action_id)
        if action.status != ActionStatus.PENDING:
            raise BeamError("BEM-066", action_id)
        checked.append((envelope, action))
    claimed = []
    for envelope, action in checked:
        submitted = envelope.status is ActionResponseStatus.SUBMITTED
        new_status = ActionStatus.RESOLVED if submitted else ActionStatus.CANCELLED
        if not await store.resolve(action.action_id, new_status):
            raise BeamError("BEM-066", action.action_id)
        claimed.append(host_envelope(envelope, action))
    return claimed
