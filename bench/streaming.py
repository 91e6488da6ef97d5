"""Benchmark: what a streamed answer costs the client, against the same answer asked plainly.

A terminal's runs stream (issue 42) so the live line can count the tokens as they come; the client
then reads hundreds of Server-Sent Events instead of one JSON body. Both ways here ask
`tests/support/openai_server.py` (a real loopback server) for the same answer, one request at a time,
and the bench prints the median seconds a call takes each way and the ratio streamed / plain. On a
real model the answer's own generation (seconds) dwarfs both: the ratio says what reading the events
costs on top, where nothing else hides it.

    .venv/bin/python bench/streaming.py [--requests 60] [--chars 4000]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.beam.openai_client import OpenAiCompatible
from tests.support.openai_server import FakeOpenAI, chat_response, text_message, usage

MESSAGES = [{"role": "user", "content": "Summarize the change."}]


async def timed(llm: FakeOpenAI, requests: int, answer: str, *, streamed: bool) -> list[float]:
    told: list[int] = []
    times = []
    async with OpenAiCompatible(llm.url, "bench-key-0123456789", "m") as client:
        if streamed:
            client.stream_to = told.append
        for _ in range(requests):
            llm.enqueue(chat_response(text_message(answer), usage=usage(20, len(answer) // 4)))
            start = time.perf_counter()
            done = await client.complete(MESSAGES, [])
            times.append(time.perf_counter() - start)
            assert done.text == answer
    if streamed:
        assert llm.requests[-1]["stream"] is True and len(told) > len(answer) // 4
    return times


async def main(requests: int, chars: int) -> None:
    answer = ("The change fixes the greeting. " * (chars // 31 + 1))[:chars]
    with FakeOpenAI() as llm:
        await timed(llm, 5, answer, streamed=False)  # warm: connections, imports
        plain = statistics.median(await timed(llm, requests, answer, streamed=False))
        streamed = statistics.median(await timed(llm, requests, answer, streamed=True))
    events = chars // 4 + 3
    print(f"answer: {chars} characters, {events} events when streamed; {requests} requests each way")
    print(f"plain    median {plain * 1000:8.2f} ms")
    print(f"streamed median {streamed * 1000:8.2f} ms")
    print(f"ratio streamed / plain: {streamed / plain:.2f}x")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=60)
    parser.add_argument("--chars", type=int, default=4000)
    options = parser.parse_args()
    asyncio.run(main(options.requests, options.chars))
