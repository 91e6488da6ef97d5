"""The one way a held push reaches GitHub: the author run resumed with its stored action.

After approval the run is resumed through the framework's own resume path, with an action store
backed by the push row: the claim is the row's compare-and-set (`Pushes.claim`), and the only tool
bound is one that pushes exactly the pinned commit to the run's own branch, whatever arguments
anyone sends. A watch job that finds its own earlier attempt died mid-push resumes the same way.
With an effects journal (issue 8) the push is recorded before and after, and a retry first reads the
branch tip on the remote, so an attempt that died after git pushed does not push again; git gets a
fresh token after a 401 when `refresh` is given.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from bot.app.approvals.held_commits import restore_held_commit
from bot.app.approvals.landing_range import check_landing
from bot.app.approvals.pushes import HeldPush, Pushes
from bot.app.effects.writer import GitHubEffects
from bot.app.git.checkout import Checkouts
from bot.beam.actions import ActionStatus, PendingAction
from bot.beam.completion import EchoClient
from bot.beam.errors import BeamError
from bot.beam.hub import RiverBeam
from bot.beam.runner import RigAgentRunner
from bot.beam.tools import Tool, ToolSpec, json_params
from bot.beam.types import ActionResponseEnvelope, AgentInput, AgentResult, InvokeRequest

Refresh = Callable[[], Awaitable[str]]  # a fresh installation token, after git got a 401


class PushActionStore:
    """The framework's `ActionStore` over one push row: pending (to the framework) means claimable.

    A thin adapter: the state lives in the row and only `Pushes` moves it. Claimable is `approved`,
    or `pushing` when this store resumes the push's own interrupted attempt (`resuming`).
    """

    def __init__(self, pushes: Pushes, push: HeldPush, *, resuming: bool = False) -> None:
        self.pushes = pushes
        self.push = push
        self.resuming = resuming

    async def save(self, action: PendingAction) -> None:
        raise BeamError("BEM-027", {"detail": "a resumed push cannot hold a new action"})

    async def get(self, action_id: str) -> PendingAction | None:
        stored = self.push.action
        if stored.action_id != action_id:
            return None
        current = await self.pushes.get(self.push.id)
        claimable = "pushing" if self.resuming else "approved"
        pending = current is not None and current.state == claimable
        return PendingAction(
            action_id=action_id,
            kind="confirmation",
            tool=stored.tool,
            args=stored.args,
            agent_name=stored.agent_name,
            session_id=stored.session_id,
            interaction_id=stored.interaction_id,
            status=ActionStatus.PENDING if pending else ActionStatus.RESOLVED,
        )

    async def resolve(self, action_id: str, new_status: str) -> bool:
        if new_status != ActionStatus.RESOLVED or self.push.action.action_id != action_id:
            return False
        return await self.pushes.claim(self.push.id, resuming=self.resuming)


class HeldPushTool(Tool):
    """`git_push` for a resumed run: pushes the pinned commit to the run's branch and nothing else.

    The commit comes from this host's pin, or from the database when this host has none
    (`restore_held_commit`): the worker that pushes need not be the one that held it."""

    def __init__(
        self,
        checkouts: Checkouts,
        pushes: Pushes,
        push: HeldPush,
        token: str,
        effects: GitHubEffects | None = None,
        refresh: Refresh | None = None,
    ) -> None:
        self.checkouts = checkouts
        self.pushes = pushes
        self.push = push
        self._token = token
        self.effects = effects
        self.refresh = refresh

    def spec(self) -> ToolSpec:
        return ToolSpec(
            name="git_push",
            description="Push the approved commit to the run's own branch.",
            confirm_required=True,
            parameters=json_params({"ref": {"type": "string"}}),
        )

    async def invoke(self, args: Any, input: AgentInput) -> Any:
        push, token, url = self.push, self._token, self.push.context.clone_url

        async def send() -> None:
            await restore_held_commit(self.checkouts, self.pushes, push, token, self.refresh)
            # Nothing lands that the approval comment did not list (issue 28; BEM-348).
            await check_landing(self.checkouts, push, token, self.refresh)
            await self.checkouts.push_from_mirror(
                push.repo,
                url,
                token,
                push.pending_ref,
                push.branch,
                expected_sha=push.commit_sha,
                expected_remote=push.context.expected_tip,
                refresh=self.refresh,
            )

        async def tip() -> str | None:
            return await self.checkouts.remote_tip(push.repo, url, token, push.branch)

        if self.effects is None:
            await send()
        else:
            await self.effects.push(f"push:{push.id}:push", push.commit_sha, tip, send)
        return {"pushed": push.branch, "commit": push.commit_sha}


async def push_held(
    pushes: Pushes,
    checkouts: Checkouts,
    push: HeldPush,
    token: str,
    effects: GitHubEffects | None = None,
    refresh: Refresh | None = None,
) -> AgentResult:
    """Resume the author run with its stored action; BEM-066 if it is not this caller's to push.

    `push` is the row as the caller loaded it: `approved` claims it, `pushing` (the watch job's own
    attempt that died mid-push) finishes it.
    """
    action = push.action
    store = PushActionStore(pushes, push, resuming=push.state == "pushing")
    hub = RiverBeam(action_store=store)
    hub.register_agent(
        RigAgentRunner.for_skill(
            "author", EchoClient(), [HeldPushTool(checkouts, pushes, push, token, effects, refresh)]
        )
    )
    request = InvokeRequest(
        agent_name="author",
        content=[],
        session_id=uuid.UUID(action.session_id),
        interaction_id=uuid.UUID(action.interaction_id),
        request_id=uuid.uuid4(),
        actions=[
            ActionResponseEnvelope(
                action_id=action.action_id,
                kind="confirmation",
                request_id=action.action_id,
                responder_id=push.decided_by,
            )
        ],
    )
    return (await hub.invoke(request)).result
