"""What a chat-completions server answered, in any common dialect, read as text or tool calls.

Real servers differ (ARCHITECTURE.md section 11): native `tool_calls` (with `arguments` as a string
or an object, with or without `id` and `type`); calls written into the text as bare JSON, as a
```json fence after a sentence of prose, in Hermes/Qwen `<tool_call>` tags or after Mistral's
`[TOOL_CALLS]`; reasoning in `reasoning_content` or a `<think>` block. Small models also leave out
the `arguments` key (`{"name": "read_file", "path": "a.py"}`) or write a Python or JavaScript literal
instead of JSON (`call_shapes`); both are read only for a tool that was offered, since without
that a JSON object with a "name" (a package.json in a review) would pass for a call. One reading for
all of them, so the runner sees one shape.

The rules (ARCHITECTURE.md section 4, invariant 10): a call counts only for a tool that was offered
and with arguments that parse as a JSON object. Anything else stays text, except that text which is
plainly an attempt at a call (the syntax is there, the call is not usable) is flagged as `problem`:
such text must neither become an answer nor be dropped without telling the model.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from bot.beam.call_shapes import (
    ARG_KEYS,
    Brackets,
    arguments_of,
    call_shaped,
    call_starts,
    function_of,
    literal_call,
    named_calls,
    names_offered,
    value_at,
)
from bot.beam.completion import PendingToolCall

_THINK = re.compile(r"<think(?:ing)?>.*?(?:</think(?:ing)?>|\Z)", re.DOTALL | re.IGNORECASE)
# A think block some templates open in the prompt: the answer then starts inside it.
_THINK_CLOSE = re.compile(r"\A.*?</think(?:ing)?>", re.DOTALL | re.IGNORECASE)
_TAG = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_-]*)[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL)
_MISTRAL = "[TOOL_CALLS]"
_MISTRAL_ARGS = re.compile(r"\A\s*([A-Za-z0-9_.-]+)\s*\[ARGS\]\s*(.*)\Z", re.DOTALL)
_CALL_START = re.compile(r"""(?:\A\s*|```[A-Za-z_]*\s*)\[?\s*\{\s*(["']?)(?:name|function)\1\s*:""")


@dataclass(frozen=True, slots=True)
class Reading:
    """One message read: `calls` when it held usable calls, else `text`; `problem` says what was wrong.

    `reasoning` is kept apart so a host may log it; it is never part of `text`.
    """

    text: str
    calls: tuple[PendingToolCall, ...] = ()
    problem: str | None = None
    reasoning: str | None = None


def stable_id(index: int, name: str, args: Any) -> str:
    """An id for a call the server sent without one: the same call in the same place gets the same id."""
    digest = hashlib.sha256(
        json.dumps([index, name, args], sort_keys=True, ensure_ascii=False).encode("utf-8")
    ).hexdigest()
    return f"call_{digest[:24]}"


def read_message(message: dict[str, Any], offered: Collection[str]) -> Reading:
    """The message as calls (native first, then written in the text) or as text without reasoning."""
    reasoning = _reasoning(message)
    raw = content_text(message)
    thought, text = split_think(raw)
    if thought:
        reasoning = "\n\n".join(part for part in (reasoning, thought) if part)
    native = message.get("tool_calls")
    if isinstance(native, list) and native:
        calls, problems = _native_calls(native, offered)
        if calls:
            return Reading("", calls, _joined(problems), reasoning)
        return Reading(text, (), _joined(problems) or "the tool calls could not be read", reasoning)
    reading = read_text(text, offered)
    return Reading(reading.text, reading.calls, reading.problem, reasoning)


def read_text(text: str, offered: Collection[str]) -> Reading:
    """Calls written into a text (tags, [TOOL_CALLS], fenced or bare JSON), or the text itself."""
    candidates = _candidates(text, offered)
    if not candidates:
        return Reading(text)
    calls: list[PendingToolCall] = []
    problems: list[str] = []
    for value in candidates:
        found, wrong = _calls_in(value, offered, len(calls))
        calls.extend(found)
        problems.extend(wrong)
    if calls:
        return Reading("", tuple(calls), _joined(problems))
    if problems:
        return Reading(text, (), _joined(problems))
    return Reading(text)


def without_calls(text: str, offered: Collection[str] = ()) -> str:
    """The prose of a text, its call syntax and think blocks taken out.

    What a run may still show of an answer that mixed prose with calls it could not use (a review
    posted from the model's plain text): tags with what they hold, everything after `[TOOL_CALLS]`,
    fences and bare JSON written as calls. JSON that is not shaped like a call stays. `offered` are
    the tools the run offered: the shapes read only for them (arguments beside the name, literals)
    are call syntax only then.
    """
    _, text = split_think(text)
    text = _TAG.sub("", text)
    text = re.sub(r"</?tool_call>|</?tool_response>", "", text, flags=re.IGNORECASE)
    cut = text.lower().find(_MISTRAL.lower())
    if cut >= 0:
        text = text[:cut]
    text = _FENCE.sub(lambda m: "" if _fence_is_call(m, offered) else m.group(0), text)
    for start, end, _ in reversed(_bare_calls(text, offered)):
        text = text[:start] + text[end:]
    for start, end, _ in reversed(named_calls(_masked(text), offered)):
        text = text[:start] + text[end:]
    masked = _masked(text)
    if (cut_call := _broken_call(masked, offered)) is not None:  # a call cut off or broken
        text = text[:cut_call]
    text = re.sub(r"```[A-Za-z0-9_-]*\s*```", "", text)  # fences left empty
    if text.count("```") % 2:  # a fence closed that was never opened, or opened and never closed
        text = re.sub(r"\n?[ \t]*```[A-Za-z0-9_-]*[ \t]*(?=\n|\Z)", "", text, count=1)
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def looks_like_call(text: str) -> bool:
    """Whether a text holds call syntax at all (so a cut or broken one is not taken for an answer)."""
    lowered = text.lower()
    return "<tool_call>" in lowered or _MISTRAL.lower() in lowered or bool(_CALL_START.search(text))


def content_text(message: dict[str, Any]) -> str:
    """`content` as one string: a string as is, a list of parts joined; "" for anything else."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
        return "".join(parts)
    return ""


def split_think(text: str) -> tuple[str, str]:
    """(reasoning, answer): `<think>` blocks taken out, also one whose opening tag was in the prompt."""
    thoughts: list[str] = []
    if "</think" in text.lower() and "<think" not in text.lower().split("</think", 1)[0]:
        match = _THINK_CLOSE.match(text)
        if match is not None:
            thoughts.append(re.sub(r"</think(?:ing)?>\Z", "", match.group(0), flags=re.IGNORECASE))
            text = text[match.end() :]
    if "<think" in text.lower():
        thoughts.extend(_inner(m.group(0)) for m in _THINK.finditer(text))
        text = _THINK.sub("", text)
    if not thoughts:
        return "", text
    return "\n\n".join(t.strip() for t in thoughts if t.strip()), text.strip()


def _inner(block: str) -> str:
    return re.sub(r"\A<think(?:ing)?>|</think(?:ing)?>\Z", "", block, flags=re.IGNORECASE)


def _reasoning(message: dict[str, Any]) -> str | None:
    parts = [
        value.strip()
        for key in ("reasoning_content", "reasoning")
        if isinstance(value := message.get(key), str) and value.strip()
    ]
    return "\n\n".join(parts) or None


def _joined(problems: list[str]) -> str | None:
    return "; ".join(dict.fromkeys(problems)) or None


def _native_calls(
    native: list[Any], offered: Collection[str]
) -> tuple[tuple[PendingToolCall, ...], list[str]]:
    calls: list[PendingToolCall] = []
    problems: list[str] = []
    for index, item in enumerate(native):
        if not isinstance(item, dict):
            problems.append("a tool call is not an object")
            continue
        function = item.get("function")
        if not isinstance(function, dict):
            function = item  # some servers put name and arguments on the call itself
        call, problem = _call(
            function.get("name"), arguments_of(function, ()), offered, index, item.get("id")
        )
        if call is not None:
            calls.append(call)
        if problem is not None:
            problems.append(problem)
    return tuple(calls), problems


def _call(
    name: Any, arguments: Any, offered: Collection[str], index: int, call_id: Any = None
) -> tuple[PendingToolCall | None, str | None]:
    """One call checked against the rules, or what is wrong with it."""
    if not isinstance(name, str) or not name:
        return None, "a tool call has no name"
    if name not in offered:
        known = ", ".join(sorted(offered)) or "none"
        return None, f"`{name}` is not one of the tools offered ({known})"
    args: Any
    if arguments is None or (isinstance(arguments, str) and not arguments.strip()):
        args = {}
    elif isinstance(arguments, str):
        try:
            args = json.loads(arguments)
        except ValueError:
            return None, f"the arguments of `{name}` are not valid JSON"
    else:
        args = arguments
    if not isinstance(args, dict):
        return None, f"the arguments of `{name}` are not a JSON object"
    if not isinstance(call_id, str) or not call_id:
        call_id = stable_id(index, name, args)
    return PendingToolCall(call_id, name, args), None


def _candidates(text: str, offered: Collection[str]) -> list[Any]:
    """Parts of a text that are written as calls: each a parsed JSON value, or None if it did not parse.

    Tags and [TOOL_CALLS] are call syntax whatever they hold; a fence or the whole text counts only
    when it holds JSON shaped like a call (a name and arguments).
    """
    lowered = text.lower()
    if "<tool_call>" in lowered:
        return [_parsed(match.group(1), offered) for match in _TAG.finditer(text)]
    if _MISTRAL.lower() in lowered:
        parts = re.split(re.escape(_MISTRAL), text, flags=re.IGNORECASE)[1:]
        return [_mistral(part, offered) for part in parts]
    found = [
        value for match in _FENCE.finditer(text) if (value := _fenced(match, offered)) is not _NOT_A_CALL
    ]
    if found:
        return found
    stripped = text.strip()
    whole = _parsed(stripped, offered) if stripped[:1] in ("{", "[") else None
    if call_shaped(whole, offered):
        return [whole]
    # Calls in prose, or a whole-text call with something after it (Qwen2.5-Coder-0.5B closes a
    # fence it never opened: `{"name": ...}` then a stray ```).
    bare = [value for _, _, value in _bare_calls(text, offered)]
    if bare:
        return bare
    named = [value for _, _, value in named_calls(_masked(text), offered)]
    if named:  # `review_change: {...}`, `read_file({...})`
        return named
    if whole is None and stripped[:1] in ("{", "[") and _named(stripped, offered):
        return [None]
    return []


_NOT_A_CALL = object()
_FENCE_LANGUAGES = ("", "json", "tool_call", "tool_code", "javascript")


def _fenced(match: re.Match[str], offered: Collection[str]) -> Any:
    """The call a fence holds (None when it is a broken one), or `_NOT_A_CALL`."""
    if match.group(1).lower() not in _FENCE_LANGUAGES:
        return _NOT_A_CALL
    body = match.group(2)
    value = _parsed(body, offered)
    if value is None and "\n" in body.strip():
        lines = [_parsed(line, offered) for line in body.strip().splitlines() if line.strip()]
        # One value per line; the calls among them count, and the rest is what the real 0.5B writes
        # beside its call: the tool's result it was shown, echoed (`{"error": ...}`).
        calls = [v for v in lines if call_shaped(v, offered)]
        value = (calls or lines) if all(v is not None for v in lines) else None
    if call_shaped(value, offered) or (value is None and _named(body, offered)):
        return value
    return _NOT_A_CALL


def _fence_is_call(match: re.Match[str], offered: Collection[str]) -> bool:
    """A fence holding a call, a broken one, or one cut off after its first key."""
    if _fenced(match, offered) is not _NOT_A_CALL:
        return True
    body = match.group(2).strip()
    return match.group(1).lower() in _FENCE_LANGUAGES and _broken_call(body, offered) == 0


def _masked(text: str) -> str:
    """The text with its fences blanked out, every other character where it was."""
    return _FENCE.sub(lambda m: " " * len(m.group(0)), text)


def _bare_calls(text: str, offered: Collection[str]) -> list[tuple[int, int, Any]]:
    """Calls written inside prose ("I will read it: {...}"), outside any fence: each with its span.
    Only a value shaped like a call counts; a fence is never looked into here."""
    masked = _masked(text)
    brackets = Brackets(masked)
    spans: list[tuple[int, int, Any]] = []
    position = 0
    for start in call_starts(masked, offered):
        if start < position:
            continue
        value, end = value_at(brackets, start, offered)
        if call_shaped(value, offered):
            spans.append((start, end, value))
            position = end
    return spans


def _broken_call(text: str, offered: Collection[str]) -> int | None:
    """Where call syntax starts that never forms a value: a call cut off, or broken past reading.
    JSON that parses is not a call here (a call would have been read), so it stays."""
    brackets = Brackets(text)
    position = 0
    for start in call_starts(text, offered):
        if start < position:
            continue
        value, end = value_at(brackets, start, offered)
        if value is None and end == start + 1:
            return start
        position = end
    return None


def _named(text: str, offered: Collection[str]) -> bool:
    """Broken JSON that still shows the call keys, or a broken literal naming an offered tool: a cut
    or mistyped call, not prose."""
    if re.search(r'"name"\s*:', text) and any(f'"{key}"' in text for key in ARG_KEYS):
        return True
    stripped = text.strip()
    return call_starts(stripped, offered)[:1] == [0] and names_offered(stripped[:300], offered)


def _loads(text: str) -> Any:
    try:
        return json.loads(text.strip())
    except ValueError:
        return None


def _parsed(text: str, offered: Collection[str]) -> Any:
    """Strict JSON, else a Python or JavaScript literal that is a call of an offered tool, else None."""
    value = _loads(text)
    return value if value is not None else literal_call(text, offered)


def _mistral(part: str, offered: Collection[str]) -> Any:
    """What follows one [TOOL_CALLS]: a JSON list of calls, or `name[ARGS]{...}` (newer templates)."""
    match = _MISTRAL_ARGS.match(part)
    if match is not None:
        args = _loads(match.group(2))
        return {"name": match.group(1), "arguments": args if args is not None else match.group(2)}
    return _parsed(part, offered)


def _calls_in(value: Any, offered: Collection[str], start: int) -> tuple[list[PendingToolCall], list[str]]:
    """The calls in one parsed candidate (an object or a list of them), numbered from `start`."""
    if value is None:
        return [], ["a tool call is not valid JSON"]
    items = value if isinstance(value, list) else [value]
    calls: list[PendingToolCall] = []
    problems: list[str] = []
    for item in items:
        if not isinstance(item, dict):
            problems.append("a tool call is not a JSON object")
            continue
        function = function_of(item)
        call, problem = _call(
            function.get("name"), arguments_of(function, offered), offered, start + len(calls), item.get("id")
        )
        if call is not None:
            calls.append(call)
        if problem is not None:
            problems.append(problem)
    return calls, problems
