"""Turning an author run's `git_push` into a held push, and running it (once) after approval.

At the interrupt the run's tree still exists: the commit is checked (target, blocked paths, not
empty), pinned in the mirror under `refs/beam/pending/<id>`, and recorded. After approval the run is
resumed through the framework's own resume path, with an action store backed by the push row: the
claim is the row's `approved -> pushing` compare-and-set, and the only tool bound is one that pushes
exactly the pinned commit to the run's own branch, whatever arguments anyone sends.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio
import pygit2

from bot.app.approvals.pushes import HeldPush, Pushes
from bot.app.effects.writer import GitHubEffects
from bot.app.git.checkout import Checkouts
from bot.beam.actions import ActionStatus, PendingAction
from bot.beam.completion import EchoClient
from bot.beam.errors import BeamError
from bot.beam.hub import RiverBeam
from bot.beam.runner import RigAgentRunner
from bot.beam.sandbox import WorkingTree, is_protected, push_branch_name
from bot.beam.tools import Tool, ToolSpec, json_params
from bot.beam.types import ActionResponseEnvelope, AgentInput, AgentResult, InvokeRequest

MAX_PATCH_CHARS = 200_000


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def check_target(ref: Any, branch: str, protected: list[str]) -> BeamError | None:
    """None when `ref` names the run's own branch (or the current one); else the error to report."""
    if ref is None or ref == "" or ref == "HEAD":
        return None
    if not isinstance(ref, str):
        return BeamError("BEM-335", {"detail": repr(ref)[:80]})
    if is_protected(ref, protected):
        return BeamError("BEM-328", {"detail": ref[:120]})
    if ":" in ref or ref.startswith("+") or push_branch_name(ref) != branch:
        return BeamError("BEM-335", {"detail": ref[:120]})
    return None


@dataclass(frozen=True)
class CommitSummary:
    sha: str
    message: str
    diffstat: dict[str, Any]
    patch: str


def summarize_commit(path: str, base: str, commit: str) -> CommitSummary:
    """Files, line counts and the patch between the run's base and its commit (blocking: pygit2)."""
    repo = pygit2.Repository(path)
    new = repo.get(commit)
    old = repo.get(base)
    if not isinstance(new, pygit2.Commit) or not isinstance(old, pygit2.Commit):
        raise BeamError("BEM-323", {"detail": "commit not found in the run's tree"})
    diff = repo.diff(old.tree, new.tree)
    files = []
    for patch in diff:
        _, additions, deletions = patch.line_stats
        files.append({"path": patch.delta.new_file.path, "additions": additions, "deletions": deletions})
    stats = {
        "files": files,
        "additions": sum(f["additions"] for f in files),
        "deletions": sum(f["deletions"] for f in files),
    }
    return CommitSummary(commit, new.message, stats, (diff.patch or "")[:MAX_PATCH_CHARS])


async def head_commit(tree: WorkingTree) -> str | None:
    return await anyio.to_thread.run_sync(tree.head_oid)


class PushActionStore:
    """The framework's `ActionStore` over one push row: pending (to the framework) means `approved`."""

    def __init__(self, pushes: Pushes, push: HeldPush) -> None:
        self.pushes = pushes
        self.push = push

    async def save(self, action: PendingAction) -> None:
        raise BeamError("BEM-027", {"detail": "a resumed push cannot hold a new action"})

    async def get(self, action_id: str) -> PendingAction | None:
        stored = self.push.action
        if stored.get("action_id") != action_id:
            return None
        current = await self.pushes.get(self.push.id)
        status = ActionStatus.PENDING if current is not None and current.state == "approved" else "resolved"
        return PendingAction(
            action_id=action_id,
            kind="confirmation",
            tool=str(stored.get("tool")),
            args=stored.get("args") or {},
            agent_name=str(stored.get("agent_name")),
            session_id=str(stored.get("session_id")),
            interaction_id=str(stored.get("interaction_id")),
            status=status,
        )

    async def resolve(self, action_id: str, new_status: str) -> bool:
        if new_status != ActionStatus.RESOLVED or self.push.action.get("action_id") != action_id:
            return False
        return await self.pushes.transition(self.push.id, ("approved",), "pushing")


class HeldPushTool(Tool):
    """`git_push` for a resumed run: pushes the pinned commit to the run's branch and nothing else."""

    def __init__(
        self,
        checkouts: Checkouts,
        push: HeldPush,
        token: str,
        effects: GitHubEffects | None = None,
        refresh: Callable[[], Awaitable[str]] | None = None,
    ) -> None:
        self.checkouts = checkouts
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
        await push_pinned(self.checkouts, self.push, self._token, self.effects, self.refresh)
        return {"pushed": self.push.branch, "commit": self.push.commit_sha}


async def push_pinned(
    checkouts: Checkouts,
    push: HeldPush,
    token: str,
    effects: GitHubEffects | None = None,
    refresh: Callable[[], Awaitable[str]] | None = None,
) -> None:
    """Push the pinned commit; through the effects journal (issue 8), an earlier attempt's push is
    found by the branch tip on GitHub and not made again."""
    url = str(push.action["clone_url"])

    async def tip() -> str | None:
        return await checkouts.remote_tip(push.repo, url, token, push.branch)

    async def send() -> None:
        await checkouts.push_from_mirror(
            push.repo,
            url,
            token,
            push.pending_ref,
            push.branch,
            expected_sha=push.commit_sha,
            refresh=refresh,
        )

    if effects is None:
        await send()
    else:
        await effects.push(f"push:{push.id}:push", push.commit_sha, tip, send)


async def resume_push(
    pushes: Pushes,
    checkouts: Checkouts,
    push: HeldPush,
    token: str,
    effects: GitHubEffects | None = None,
    refresh: Callable[[], Awaitable[str]] | None = None,
) -> AgentResult:
    """Resume the author run with its stored action; BEM-066 if another worker claimed it first."""
    action = push.action
    hub = RiverBeam(action_store=PushActionStore(pushes, push))
    hub.register_agent(
        RigAgentRunner.for_skill(
            "author", EchoClient(), [HeldPushTool(checkouts, push, token, effects, refresh)]
        )
    )
    request = InvokeRequest(
        agent_name="author",
        content=[],
        session_id=uuid.UUID(str(action["session_id"])),
        interaction_id=uuid.UUID(str(action["interaction_id"])),
        request_id=uuid.uuid4(),
        actions=[
            ActionResponseEnvelope(
                action_id=str(action["action_id"]),
                kind="confirmation",
                request_id=str(action["action_id"]),
                responder_id=push.decided_by,
            )
        ],
    )
    return (await hub.invoke(request)).result
