"""Running the tool calls a person approved (a resumed run): no model call, only the tools.

Kept apart from the tool loop (`runner`) because it shares nothing with it but the JSON the results
are written in: `compact_json`, the original's format for tool results in strings.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from bot.beam.errors import BeamError
from bot.beam.tools import Tool
from bot.beam.types import ActionResponseStatus, AgentInput, ToolCallRecord


def compact_json(value: Any) -> str:
    """JSON as the original writes it into strings: no spaces, non-ASCII kept."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


async def run_approved(
    tools: Mapping[str, Tool], input: AgentInput
) -> tuple[list[str], list[ToolCallRecord]]:
    """Each approved action's `name: result` line and record.

    Only `submitted` envelopes run; the tool and arguments are read from the payload, which the hub
    builds from the stored action (a host calling the runner directly must do the same). A tool the
    runner does not have is BEM-090.
    """
    lines: list[str] = []
    records: list[ToolCallRecord] = []
    for envelope in input.actions or ():
        if envelope.status is not ActionResponseStatus.SUBMITTED:
            continue
        payload = envelope.payload if isinstance(envelope.payload, dict) else {}
        name = payload.get("tool")
        if not isinstance(name, str) or not name:
            continue
        args = payload.get("args")
        args = {} if args is None else args
        tool = tools.get(name)
        if tool is None:
            raise BeamError("BEM-090", name)
        result_text = compact_json(await tool.invoke(args, input))
        lines.append(f"{name}: {result_text}")
        records.append(
            ToolCallRecord(tool_name=name, args=args, tool_call_id=envelope.action_id, result=result_text)
        )
    return lines, records
