"""Our chat-completions client against the official `openai` client, on the same loopback server.

Issue 20 asks for a well-kept library for the transport if it measures as fast as ours. Both send
the same body to `tests/support/openai_server.py` (a real HTTP server that checks the request
against OpenAI's schema), one request at a time, and the bench prints requests per second of each
and the ratio openai / ours. `openai` is not a dependency of the project: install it beside the
venv to run this (the bench says so when it is missing).

    .venv/bin/python bench/llm_transport.py [--requests 400]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.beam.openai_client import OpenAiCompatible
from bot.beam.tools import ToolSpec, json_params
from tests.support.openai_server import FakeOpenAI, chat_response, tool_call, tool_calls_message

MESSAGES = [{"role": "system", "content": "You review code."}, {"role": "user", "content": "x" * 2000}]
READ = ToolSpec("read_file", "Read a file.", False, json_params({"path": {"type": "string"}}, ["path"]))


def reply() -> dict[str, Any]:
    return chat_response(tool_calls_message([tool_call("read_file", {"path": "src/app.py"}, "c1")]))


async def ours(url: str, n: int) -> float:
    async with OpenAiCompatible(url, "k", "m") as client:
        started = time.perf_counter()
        for _ in range(n):
            completion = await client.complete(MESSAGES, [READ])
            assert completion.tool_calls
        return time.perf_counter() - started


async def official(url: str, n: int) -> float:
    import openai

    client = openai.AsyncOpenAI(base_url=url, api_key="k", max_retries=2, timeout=60)
    body = OpenAiCompatible(url, "k", "m").request_body(MESSAGES, [READ])
    extra = {key: body.pop(key) for key in ("chat_template_kwargs",)}
    started = time.perf_counter()
    for _ in range(n):
        response = await client.chat.completions.create(**body, extra_body=extra)
        assert response.choices[0].message.tool_calls
    elapsed = time.perf_counter() - started
    await client.close()
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    try:
        import openai  # noqa: F401
    except ImportError:
        print("the official client is not installed: pip install openai (beside the venv) to compare")
        return 2
    best: dict[str, float] = {}
    for _ in range(args.rounds):  # interleaved, best of each, so a busy machine hurts both alike
        for name, run in (("ours (httpx)", ours), ("openai", official)):
            with FakeOpenAI() as llm:
                for _ in range(args.requests + 1):
                    llm.enqueue(reply())
                asyncio.run(run(llm.url, 1))  # warm: imports, first connection
                elapsed = asyncio.run(run(llm.url, args.requests))
            best[name] = min(best.get(name, float("inf")), elapsed)
    for name, elapsed in best.items():
        each = elapsed * 1000 / args.requests
        print(f"{name:14s} {args.requests / elapsed:8.0f} requests/s  ({each:.2f} ms each)")
    print(f"ratio openai / ours (time per request): {best['openai'] / best['ours (httpx)']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
