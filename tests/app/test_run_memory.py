"""A run's framework memory on the real store: facts persist per repository, turns stay with the run."""

from __future__ import annotations

import uuid

import pytest

from bot.app.jobs.store import Store
from bot.app.runs.memory import RunMemory
from bot.beam.completion import Completion, ScriptedClient
from bot.beam.hub import RiverBeam
from bot.beam.memory import MESSAGE_KIND, MemoryItem, MemoryScope
from bot.beam.runner import RigAgentRunner
from bot.beam.skills import Skill
from tests.support.agents import make_input, make_request

pytestmark = pytest.mark.anyio


async def test_remembered_facts_persist_and_stay_in_their_repository(store: Store) -> None:
    mine = RunMemory(store, "octo/demo")
    tool = mine.remember_tool()
    result = await tool.invoke({"scope_name": "notes", "kind": "rule", "text": "Use tabs."}, make_input())
    assert result == {"id": result["id"], "scope": "notes"}
    await tool.invoke(
        {"scope_name": "notes", "scope_id": "ci", "kind": "fact", "text": "CI is slow."}, make_input()
    )
    await RunMemory(store, "octo/other").remember("notes", "", "rule", "Use spaces.")

    rows = await store.memory_load(["octo/demo/notes", "octo/demo/notes:ci", "octo/other/notes"])
    assert [(r.scope_key, r.text) for r in rows] == [
        ("octo/demo/notes", "Use tabs."),
        ("octo/demo/notes:ci", "CI is slow."),
        ("octo/other/notes", "Use spaces."),
    ]
    # A later run of the same repository gets the facts of the scopes it lists; another repository's
    # memory never, even under the same scope name.
    later = RunMemory(store, "octo/demo")
    assert [(i.scope, i.kind, i.text) for i in await later.load(["notes"])] == [
        ("notes", "rule", "Use tabs.")
    ]
    assert [i.text for i in await RunMemory(store, "octo/third").load(["notes"])] == []
    assert [i.id for i in await later.load(["notes"])] == [result["id"]]

    other_id = str(rows[2].id)
    assert not await later.forget(other_id)  # another repository's fact
    assert await later.forget(result["id"])
    assert not await later.forget(result["id"])
    assert [r.text for r in await store.memory_load(["octo/demo/notes", "octo/other/notes"])] == [
        "Use spaces."
    ]


async def test_conversation_turns_stay_with_the_run(store: Store) -> None:
    session = MemoryScope.session(uuid.uuid4()).key
    run = RunMemory(store, "octo/demo")
    turn = MemoryItem(scope=session, kind=MESSAGE_KIND, text="hello")
    await run.append(turn)
    await run.append(MemoryItem(scope=session, kind="fact", text="stored"))
    assert [i.text for i in await run.load([session])] == ["hello", "stored"]
    assert [i.text for i in await RunMemory(store, "octo/demo").load([session])] == ["stored"]
    assert await run.forget(turn.id)
    assert [i.text for i in await run.load([session])] == ["stored"]


async def test_an_invoke_that_lists_the_scope_shows_the_model_the_fact(store: Store) -> None:
    await RunMemory(store, "octo/demo").remember("notes", "", "rule", "Use tabs.")
    hub = RiverBeam(memory=RunMemory(store, "octo/demo"))
    client = ScriptedClient([Completion.of_text("ok")])
    hub.register_agent(RigAgentRunner.new("author", client, [], Skill("author", "", ())))
    await hub.invoke(make_request("author", "go", metadata={"memory_scopes": [{"name": "notes"}]}))
    messages, _ = client.requests[0]
    assert messages == [
        {"role": "system", "content": "[rule notes] Use tabs."},
        {"role": "user", "content": "go"},
    ]
