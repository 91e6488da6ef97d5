"""Tool calls for servers that take no `tools`: the tools described in the prompt, calls read from text.

`BEAM_MODEL_TOOLS` picks the protocol: `native` sends `tools` and never falls back; `text` always
uses this protocol; `auto` (the default) sends `tools` and, when the server refuses them with a 400
that says so, switches to this protocol and remembers that for the base URL and model (in memory,
for the life of the process).

The model is asked for Hermes-style `<tool_call>` tags, which Qwen, Hermes and most instruction-tuned
models know; `tool_dialects` reads whatever dialect it writes back. Earlier rounds are rewritten the
same way every time (assistant calls as tags, tool results as user turns), so each round's prompt
still extends the last one unchanged (ARCHITECTURE.md section 11).
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from bot.beam.tools import ToolSpec

ToolsMode = Literal["auto", "native", "text"]
TOOLS_MODES: tuple[ToolsMode, ...] = ("auto", "native", "text")

# (base URL, model) pairs whose server refused `tools`: asked in text from then on.
_TEXT_ONLY: set[tuple[str, str]] = set()

# How servers say they take no tools (llama.cpp without --jinja, vLLM without a tool parser, Ollama
# and LM Studio for models without a tool template, hosted APIs for models without function calling).
_REFUSES_TOOLS = re.compile(
    r"(?:tools?|tool_choice)\W{0,3}(?:param(?:eter)?s? )?requires? (?:the )?--?jinja"
    r"|tool.?choice.{0,40}requires? --enable-auto-tool-choice"
    r"|--enable-auto-tool-choice"
    r"|(?:does not|doesn't|do not|don't|cannot|can't) (?:support|use|accept) (?:tools|tool calls|tool use"
    r"|tool calling|function calling|function calls|functions)"
    r"|(?:tools|tool calls|tool use|tool calling|function calling|functions?)['\"`]? (?:is |are )?"
    r"(?:not supported|unsupported|not available|not enabled|disabled)"
    r"|unrecognized request argument supplied: tools"
    r"|\btools\b.{0,30}extra (?:inputs|fields) (?:are )?not permitted",
    re.IGNORECASE,
)

# How servers say the prompt does not fit (OpenAI and vLLM, llama.cpp, Ollama, TGI, Mistral, LM Studio).
_CONTEXT_OVERFLOW = re.compile(
    r"context[_ ]length[_ ]exceeded|exceed_context_size|maximum context length|context (?:length|size|window)"
    r" (?:is |was |has been )?exceeded|exceeds? (?:the )?(?:available |maximum )?context"
    r"|longer than the maximum model length|prompt is too long|input is too (?:long|large)"
    r"|too many tokens|tokens \+ `?max_new_tokens`? must be <="
    r"|too large for model with \d+ maximum context length|greater than the context length"
    r"|reduce the length of the (?:messages|prompt)|context (?:the )?overflows",
    re.IGNORECASE,
)


def refuses_tools(error_text: str) -> bool:
    """Whether a server's error says it takes no `tools` (and not that the prompt is too long)."""
    return bool(_REFUSES_TOOLS.search(error_text)) and not context_overflow(error_text)


def context_overflow(error_text: str) -> bool:
    return bool(_CONTEXT_OVERFLOW.search(error_text))


def parse_mode(value: str | None) -> ToolsMode | None:
    """The mode a variable names ("" and unset mean the default); None when it names none."""
    text = (value or "auto").strip().lower() or "auto"
    for mode in TOOLS_MODES:
        if text == mode:
            return mode
    return None


def refused(base_url: str, model: str) -> bool:
    return (base_url, model) in _TEXT_ONLY


def remember_refused(base_url: str, model: str) -> None:
    _TEXT_ONLY.add((base_url, model))


def forget_all() -> None:
    """Forgets every server that refused tools (tests; an operator restarts the process instead)."""
    _TEXT_ONLY.clear()


def describe(specs: list[ToolSpec]) -> str:
    """The tools and how to call them, for the end of the system prompt; the same text every round."""
    lines = [
        "# Tools",
        "",
        "You can call the tools below. To call one, answer with only this, and no other text:",
        "<tool_call>",
        '{"name": "<tool name>", "arguments": {<the arguments as a JSON object>}}',
        "</tool_call>",
        "You may write several <tool_call> blocks in one answer. Each result comes back to you in the "
        "next message, inside <tool_response> tags. When you need no more tools, answer in plain text, "
        "without any tags.",
        "",
        "The tools (the arguments are described as JSON Schema):",
    ]
    for spec in specs:
        parameters = json.dumps(spec.parameters, separators=(",", ":"), ensure_ascii=False, sort_keys=True)
        lines.append(f"- {spec.name}: {spec.description}\n  arguments: {parameters}")
    return "\n".join(lines)


def as_text_messages(messages: list[dict[str, Any]], specs: list[ToolSpec]) -> list[dict[str, Any]]:
    """The conversation for a server without tools: no `tools`, `tool_calls` or `tool` roles in it."""
    tools_text = describe(specs)
    out: list[dict[str, Any]] = []
    names: dict[str, str] = {}
    described = False
    for message in messages:
        role = message.get("role")
        if role == "system" and not described:
            content = message.get("content")
            text = content if isinstance(content, str) else ""
            out.append({"role": "system", "content": f"{text}\n\n{tools_text}" if text else tools_text})
            described = True
        elif role == "assistant" and message.get("tool_calls"):
            out.append({"role": "assistant", "content": _calls_as_text(message, names)})
        elif role == "tool":
            call_id = message.get("tool_call_id")
            name = names.get(call_id, "") if isinstance(call_id, str) else ""
            response = {"name": name, "content": message.get("content", "")}
            text = json.dumps(response, ensure_ascii=False)
            out.append({"role": "user", "content": f"<tool_response>\n{text}\n</tool_response>"})
        else:
            out.append(dict(message))
    if not described:
        out.insert(0, {"role": "system", "content": tools_text})
    return out


def _calls_as_text(message: dict[str, Any], names: dict[str, str]) -> str:
    parts: list[str] = []
    content = message.get("content")
    if isinstance(content, str) and content.strip():
        parts.append(content)
    for call in message.get("tool_calls") or ():
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict):
            continue
        name = str(function.get("name", ""))
        arguments = function.get("arguments")
        try:
            args = json.loads(arguments) if isinstance(arguments, str) else arguments
        except ValueError:
            args = arguments
        if isinstance(call.get("id"), str):
            names[call["id"]] = name
        text = json.dumps({"name": name, "arguments": args if args is not None else {}}, ensure_ascii=False)
        parts.append(f"<tool_call>\n{text}\n</tool_call>")
    return "\n".join(parts)
