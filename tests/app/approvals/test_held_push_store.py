"""The push row as the framework's action store: a resumed push runs its stored action exactly once."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import anyio
import pytest
from sqlalchemy import select

from bot.app.approvals.pushes import HeldPush, PushAction, PushContext, Pushes, new_push_id
from bot.app.approvals.resume import PushActionStore
from bot.app.jobs.store import Store, pending_pushes
from bot.beam.completion import EchoClient
from bot.beam.errors import BeamError
from bot.beam.hub import RiverBeam
from bot.beam.runner import RigAgentRunner
from bot.beam.tools import FunctionTool, ToolSpec, json_params
from bot.beam.types import ActionResponseEnvelope, AgentInput, InvokeRequest

pytestmark = pytest.mark.anyio

SESSION = uuid.uuid4()
INTERACTION = uuid.uuid4()
ACTION = str(uuid.uuid4())


async def make_push(tmp_path: Path, state: str) -> tuple[Store, Pushes, HeldPush]:
    store = await Store.open(f"sqlite+aiosqlite:///{tmp_path / 'beam.db'}")
    pushes = Pushes(store)
    now = time.time()
    push = HeldPush(
        id=new_push_id(),
        run_id=None,
        repo="o/r",
        number=7,
        base_sha="b" * 40,
        head_sha="h" * 40,
        commit_sha="c" * 40,
        branch="beam/pr-7/author-1",
        requester="maint",
        created_at=now,
        expires_at=now + 60,
        state=state,
        action=PushAction(
            action_id=ACTION,
            tool="git_push",
            args={"ref": "beam/pr-7/author-1"},
            agent_name="author",
            session_id=str(SESSION),
            interaction_id=str(INTERACTION),
        ),
        context=PushContext(
            installation_id=1,
            clone_url="http://git.invalid/o/r.git",
            html_url="https://github.com/o/r",
            default_branch="main",
            on_pull_request=True,
        ),
    )
    await pushes.create(push)
    return store, pushes, push


def git_push_tool(calls: list[Any]) -> FunctionTool:
    async def git_push(args: Any, input: AgentInput) -> Any:
        calls.append(args)
        await anyio.sleep(0.01)
        return {"pushed": args.get("ref")}

    return FunctionTool(
        ToolSpec(
            "git_push", "push", confirm_required=True, parameters=json_params({"ref": {"type": "string"}})
        ),
        git_push,
    )


def hub_for(pushes: Pushes, push: HeldPush, calls: list[Any]) -> RiverBeam:
    hub = RiverBeam(action_store=PushActionStore(pushes, push))
    hub.register_agent(RigAgentRunner.for_skill("author", EchoClient(), [git_push_tool(calls)]))
    return hub


def resume(forged_args: Any = None) -> InvokeRequest:
    payload = {"tool": "git_push", "args": forged_args} if forged_args is not None else None
    return InvokeRequest(
        agent_name="author",
        content=[],
        session_id=SESSION,
        interaction_id=INTERACTION,
        actions=[
            ActionResponseEnvelope(action_id=ACTION, kind="confirmation", request_id="r", payload=payload)
        ],
    )


async def test_an_approved_push_runs_its_stored_action_once(tmp_path: Path) -> None:
    store, pushes, push = await make_push(tmp_path, "approved")
    calls: list[Any] = []
    outcomes: list[Any] = []

    async def one() -> None:
        try:
            outcomes.append(await hub_for(pushes, push, calls).invoke(resume({"ref": "main"})))
        except BeamError as error:
            outcomes.append(error.code)

    async with anyio.create_task_group() as tg:
        for _ in range(4):
            tg.start_soon(one)
    assert calls == [{"ref": "beam/pr-7/author-1"}]  # the stored args, not the forged ones
    assert sorted(o for o in outcomes if isinstance(o, str)) == ["BEM-066"] * 3
    current = await pushes.get(push.id)
    assert current is not None and current.state == "pushing"
    await store.close()


@pytest.mark.parametrize("state", ["pending", "rejected", "expired", "pushed", "failed"])
async def test_a_push_that_is_not_approved_runs_nothing(tmp_path: Path, state: str) -> None:
    store, pushes, push = await make_push(tmp_path, state)
    calls: list[Any] = []
    with pytest.raises(BeamError) as error:
        await hub_for(pushes, push, calls).invoke(resume())
    assert error.value.code == "BEM-066" and calls == []
    assert (await pushes.get(push.id)).state == state  # type: ignore[union-attr]
    await store.close()


async def test_another_session_cannot_resume_it(tmp_path: Path) -> None:
    store, pushes, push = await make_push(tmp_path, "approved")
    calls: list[Any] = []
    request = resume().model_copy(update={"session_id": uuid.uuid4()})
    with pytest.raises(BeamError) as error:
        await hub_for(pushes, push, calls).invoke(request)
    assert error.value.code == "BEM-065" and calls == []
    await store.close()


async def test_the_typed_action_is_stored_as_one_flat_object(tmp_path: Path) -> None:
    store, pushes, push = await make_push(tmp_path, "pending")
    async with store.read() as conn:
        row = (await conn.execute(select(pending_pushes.c.action))).one()
    assert row.action["action_id"] == ACTION and row.action["args"] == {"ref": "beam/pr-7/author-1"}
    assert row.action["installation_id"] == 1 and row.action["default_branch"] == "main"
    assert await pushes.get(push.id) == push  # read back whole and typed
    await store.close()


async def test_a_push_interrupted_mid_push_is_finished_by_its_own_resume_only(tmp_path: Path) -> None:
    store, pushes, push = await make_push(tmp_path, "pushing")
    calls: list[Any] = []
    with pytest.raises(BeamError) as error:  # an ordinary resume does not take a push already claimed
        await hub_for(pushes, push, calls).invoke(resume())
    assert error.value.code == "BEM-066" and calls == []
    hub = RiverBeam(action_store=PushActionStore(pushes, push, resuming=True))
    hub.register_agent(RigAgentRunner.for_skill("author", EchoClient(), [git_push_tool(calls)]))
    await hub.invoke(resume({"ref": "main"}))
    assert calls == [{"ref": "beam/pr-7/author-1"}]
    assert (await pushes.get(push.id)).state == "pushing"  # type: ignore[union-attr]
    await store.close()
