"""The live line's text (`FramePrinter.status`): what the call in flight has streamed, beside the
tokens the finished calls used, and never a finished call's stream."""

from __future__ import annotations

import io
import re

import pytest

from bot.app.runs.usage import Meter
from bot.beam.completion import EchoClient
from bot.beam.openai_client import OpenAiCompatible
from bot.beam.types import StreamChunk, StreamChunkType
from bot.local.output import FramePrinter

pytestmark = pytest.mark.anyio


def test_the_line_shows_the_stream_of_the_call_in_flight_only() -> None:
    meter = Meter(EchoClient())
    printer = FramePrinter(io.StringIO(), meter=meter)
    assert re.fullmatch(r"⋯ \d+ s · model call 1", printer.status())
    printer.stream_sink(42)
    assert printer.status().endswith("· model call 1 · 42 tokens streamed")
    meter.calls, meter.output_tokens = 1, 50  # the call answered: its tokens are the meter's now
    assert printer.status().endswith("· model call 2 · 50 tokens so far")
    printer.stream_sink(7)
    assert printer.status().endswith("· model call 2 · 7 tokens streamed · 50 tokens so far")


async def test_a_frame_ends_the_stream_shown_and_the_client_streams_only_while_the_line_is_alive() -> None:
    client = OpenAiCompatible("http://127.0.0.1:9/v1", "k", "m")
    printer = FramePrinter(io.StringIO(), streams_from=client)
    quiet = FramePrinter(io.StringIO(), "json", streams_from=client)
    async with quiet.alive():
        assert client.stream_to is None  # `--json` shows no line: nothing to stream for
    async with printer.alive():
        assert client.stream_to is not None
        client.stream_to(12)
        assert printer.status().endswith(" s · 12 tokens streamed")
        await printer(StreamChunk(type=StreamChunkType.THINKING))
        assert "streamed" not in printer.status()
    assert client.stream_to is None
