"""The runner's two opt-in options (issue 8): recoverable tool errors go back to the model with their
BEM code, and a conversation checkpoint lets a run started again continue after its last round."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bot.beam.completion import Completion, ScriptedClient
from bot.beam.errors import BeamError
from bot.beam.runner import RigAgentRunner
from bot.beam.skills import Skill
from tests.support.agents import CountingTool, calls, make_context, make_input

SKILL = Skill("review", "Review.", ())
pytestmark = pytest.mark.anyio


class MemoryCheckpoint:
    def __init__(self) -> None:
        self.saved: tuple[int, list[dict[str, Any]]] | None = None
        self.saves = 0

    async def load(self) -> tuple[int, list[dict[str, Any]]] | None:
        return self.saved

    async def save(self, rounds: int, messages: list[dict[str, Any]]) -> None:
        self.saves += 1
        self.saved = (rounds, [dict(m) for m in messages])


def runner(client: ScriptedClient, *tools: CountingTool, **options: Any) -> RigAgentRunner:
    return RigAgentRunner("review", client, [t.tool for t in tools], SKILL, **options)


async def test_by_default_a_tool_error_ends_the_run() -> None:
    big = CountingTool("read_file", error=BeamError("BEM-319", "big.bin: 30000000 bytes"))
    client = ScriptedClient([calls(("read_file", {"path": "big.bin"})), Completion.of_text("never")])
    with pytest.raises(BeamError) as ended:
        await runner(client, big).stream(make_input(), make_context())
    assert ended.value.code == "BEM-319"


@pytest.mark.parametrize("code", ["BEM-307", "BEM-319"])
async def test_a_recoverable_tool_error_goes_back_to_the_model(code: str) -> None:
    failing = CountingTool("read_file", error=BeamError(code, "x: cannot be read"))
    client = ScriptedClient([calls(("read_file", {"path": "x"})), Completion.of_text("Read what I could.")])
    frames = await runner(client, failing, recoverable_errors={"BEM-307", "BEM-319"}).stream(
        make_input(), make_context()
    )
    assert frames[-1].result is not None and frames[-1].result.text == "Read what I could."
    told = client.requests[1][0][-1]
    assert told["role"] == "tool"
    assert json.loads(told["content"])["error"]["errcode"] == code


async def test_a_fatal_tool_error_still_ends_the_run_when_others_are_recoverable() -> None:
    escape = CountingTool("read_file", error=BeamError("BEM-302", "../etc/passwd"))
    client = ScriptedClient([calls(("read_file", {"path": "../etc/passwd"})), Completion.of_text("never")])
    with pytest.raises(BeamError) as ended:
        await runner(client, escape, recoverable_errors={"BEM-307", "BEM-319"}).stream(
            make_input(), make_context()
        )
    assert ended.value.code == "BEM-302"


async def test_a_run_started_again_continues_after_its_last_finished_round() -> None:
    checkpoint = MemoryCheckpoint()
    read = CountingTool("read_file", result={"text": "x = 1"})
    first = ScriptedClient([calls(("read_file", {"path": "a.py"})), calls(("read_file", {"path": "b.py"}))])
    with pytest.raises(BeamError):  # the model "goes away" in round three (BEM-081): the run dies
        await runner(first, read, checkpoint=checkpoint).stream(make_input(), make_context())
    assert checkpoint.saved is not None and checkpoint.saved[0] == 2
    assert [c["path"] for c in read.calls] == ["a.py", "b.py"]

    again = ScriptedClient([Completion.of_text("Both files are fine.")])
    frames = await runner(again, read, checkpoint=checkpoint).stream(make_input(), make_context())
    assert frames[-1].result is not None and frames[-1].result.text == "Both files are fine."
    assert len(read.calls) == 2  # no tool round was made again
    sent = again.requests[0][0]
    assert [m["role"] for m in sent].count("tool") == 2  # the model saw both earlier results
    assert sum(1 for m in sent if m["role"] == "user") == 1
