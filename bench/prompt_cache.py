"""How much of each tool round's prompt a real server re-processes (ARCHITECTURE.md section 11).

Starts nothing: point it at a running llama-server (`../shared/tools/local-model start 0.5b`). It
runs the framework's tool loop (`RigAgentRunner` over `OpenAiCompatible`) on a small fixed review
and prints, per model call, the prompt tokens the server evaluated (`timings.prompt_n`) and those it
served from its prompt cache (`timings.cache_n`). For a later round it prints two ratios against
the previous round's whole prompt: `prompt_n` over it (the tokens processed, the new turns
included; the issue's target is at most 0.10), and the part of it the cache did not cover (0 when
the prefix stayed stable).

    .venv/bin/python bench/prompt_cache.py --base-url http://127.0.0.1:8089/v1 [--tools text]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import uuid
from typing import Any

import httpx

from bot.beam.openai_client import OpenAiCompatible
from bot.beam.runner import RigAgentRunner
from bot.beam.skills import Skill
from bot.beam.text_protocol import ToolsMode
from bot.beam.tools import FunctionTool, ToolSpec, json_params
from bot.beam.types import AgentContext, AgentInput, ContentPart

FILE = "def add(a, b):\n    return a + b\n# fixed\n"
DIFF = "@@ -1,2 +1,3 @@\n def add(a, b):\n-    return a - b\n+    return a + b\n+# fixed\n"
PROMPT = f"Review this change. Read src/calc.py with read_file, then post with review_change.\n\n{DIFF}"


class Recording(httpx.AsyncBaseTransport):
    """The real transport, keeping each reply's `timings` (llama-server's own counts)."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.timings: list[dict[str, Any]] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        body = await response.aread()
        try:
            self.timings.append(json.loads(body).get("timings") or {})
        except ValueError:
            self.timings.append({})
        print(f"reply {len(self.timings)}: {self.timings[-1]}", flush=True)  # a slow server: as it comes
        return httpx.Response(response.status_code, headers=response.headers, content=body)


def tools(posted: list[Any]) -> list[FunctionTool]:
    async def read_file(args: Any, _input: AgentInput) -> Any:
        return {"path": args.get("path"), "content": FILE}

    async def review_change(args: Any, _input: AgentInput) -> Any:
        posted.append(args)
        return {"posted": True}

    read = ToolSpec("read_file", "Read a file.", False, json_params({"path": {"type": "string"}}, ["path"]))
    review = ToolSpec(
        "review_change",
        "Post the review: a body and inline comments (path, line, body) on changed lines.",
        False,
        json_params({"body": {"type": "string"}, "comments": {"type": "array"}}, ["body"]),
    )
    return [FunctionTool(read, read_file), FunctionTool(review, review_change)]


async def run(base_url: str, mode: ToolsMode, max_tokens: int) -> int:
    transport = Recording()
    posted: list[Any] = []
    client = OpenAiCompatible(base_url, "local", "local", timeout=600, transport=transport, tools_mode=mode)
    client.with_max_tokens(max_tokens)
    skill = Skill("review", "You are a code reviewer.", ("read_file", "review_change"))
    runner = RigAgentRunner.new("review", client, tools(posted), skill)
    inp = AgentInput(content=[ContentPart.text_part(PROMPT)], session_id=uuid.uuid4(), run_id=uuid.uuid4())
    error = None
    try:
        await runner.stream(inp, AgentContext(session_id=str(inp.session_id)))
    except Exception as exc:  # the figures are worth printing whatever ended the run
        error = exc
    finally:
        await client.aclose()
    previous = None
    for n, timing in enumerate(transport.timings, 1):
        prompt_n, cache_n = int(timing.get("prompt_n", 0)), int(timing.get("cache_n", 0))
        line = f"round {n}: prompt_n {prompt_n:5d}  cache_n {cache_n:5d}"
        if previous:
            again = max(0, previous - cache_n)  # of the last prompt, what the cache did not cover
            line += f"  processed/previous {prompt_n / previous:.3f}  re-processed {again / previous:.3f}"
        print(line)
        previous = prompt_n + cache_n
    print(f"review posted: {bool(posted)}; ended: {error or 'with an answer'}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--tools", choices=["auto", "native", "text"], default="auto")
    parser.add_argument("--max-tokens", type=int, default=200)
    args = parser.parse_args()
    return asyncio.run(run(args.base_url, args.tools, args.max_tokens))


if __name__ == "__main__":
    sys.exit(main())
