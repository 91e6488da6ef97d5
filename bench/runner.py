"""Benchmark: RigAgentRunner's own overhead per tool round, against a bare loop in the same process.

Each run is 8 completion rounds from a ScriptedClient: 7 rounds that call a no-op tool, then a text
answer. The baseline awaits the same ScriptedClient and the same no-op tool directly, with none of
the runner's work (frames, records, message building, JSON). The difference per round is what the
runner itself costs. Target: well under 1 ms a round.

    .venv/bin/python bench/runner.py [--runs 2000]
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid
from typing import Any

import anyio

from bot.beam.completion import Completion, PendingToolCall, ScriptedClient
from bot.beam.runner import RigAgentRunner
from bot.beam.skills import Skill
from bot.beam.tools import FunctionTool, ToolSpec, json_params
from bot.beam.types import AgentContext, AgentInput, ContentPart

ROUNDS = 8


async def noop(args: Any, input: AgentInput) -> Any:
    return {"ok": True}


TOOL = FunctionTool(ToolSpec("noop", "Does nothing.", False, json_params({"n": {"type": "integer"}})), noop)


def script() -> list[Completion]:
    steps = [
        Completion.of_tool_calls([PendingToolCall(f"call-{i}", "noop", {"n": i})]) for i in range(ROUNDS - 1)
    ]
    return [*steps, Completion.of_text("done")]


def make_input() -> AgentInput:
    return AgentInput(
        content=[ContentPart.text_part("benchmark")],
        session_id=uuid.uuid4(),
        interaction_id=uuid.uuid4(),
        run_id=uuid.uuid4(),
    )


async def runner_runs(runs: int) -> float:
    inp, context = make_input(), AgentContext(session_id="bench")
    skill = Skill("bench", "You are a benchmark.", ("noop",))
    total = 0.0
    for _ in range(runs):
        agent = RigAgentRunner.new("bench", ScriptedClient(script()), [TOOL], skill)
        start = time.perf_counter()
        frames = await agent.stream(inp, context)
        total += time.perf_counter() - start
        assert len(frames) == 2 + (ROUNDS - 1) + 2
    return total


async def baseline_runs(runs: int) -> float:
    inp = make_input()
    specs = [TOOL.spec()]
    total = 0.0
    for _ in range(runs):
        client = ScriptedClient(script())
        messages: list[dict[str, Any]] = [{"role": "user", "content": "benchmark"}]
        start = time.perf_counter()
        for _ in range(ROUNDS):
            completion = await client.complete_for(inp, messages, specs)
            for call in completion.tool_calls or ():
                await TOOL.invoke(call.args, inp)
        total += time.perf_counter() - start
    return total


async def main(runs: int, repeats: int) -> None:
    await runner_runs(50)  # warm up imports and caches
    await baseline_runs(50)
    runner_us, baseline_us = [], []
    for _ in range(repeats):
        runner_us.append(await runner_runs(runs) / (runs * ROUNDS) * 1e6)
        baseline_us.append(await baseline_runs(runs) / (runs * ROUNDS) * 1e6)
    runner, baseline = statistics.median(runner_us), statistics.median(baseline_us)
    print(f"{runs} runs x {ROUNDS} rounds, median of {repeats}")
    print(f"runner:    {runner:8.1f} us/round")
    print(f"baseline:  {baseline:8.1f} us/round (ScriptedClient + no-op tool awaited directly)")
    print(f"overhead:  {runner - baseline:8.1f} us/round, ratio runner/baseline {runner / baseline:.1f}x")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    options = parser.parse_args()
    anyio.run(main, options.runs, options.repeats)
