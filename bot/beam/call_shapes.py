"""What counts as a tool call written into a text: its shapes, and the literals that are not JSON.

A call is a name with its arguments under a key (`arguments`, `parameters`, `args`, `input`), maybe
inside `function`. Small models such as Qwen2.5-Coder-0.5B also put the arguments beside the name
(`{"name": "read_file", "path": "a.py"}`) or write a Python dict (`{'name': 'read_file',
'arguments': {'path': 'a.py'}}`, with `True`/`False`/`None`) or a JavaScript object with bare keys
(`{name: "read_file", arguments: {path: "a.py"}}`); read as JSON only, their tools would never run.
Those shapes count only for a tool that was offered, or any JSON object with a "name" (a package.json
in a review) or any dict in a code answer would pass for a call. The literals are only a fallback
after strict JSON failed, for a text that names an offered tool first (`names_offered`). Nothing is
evaluated: `ast.literal_eval` builds constants only, and what it builds must be a JSON value (no
sets, bytes, tuples or complex numbers) or it is not read.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Collection
from typing import Any

# A reply is bounded by `max_tokens`; anything far longer is not a call worth parsing leniently.
_MAX_CHARS = 100_000
# The start of a call in either literal form: `{'name':`, `{name:`, `[{'function':`...
LITERAL_START = re.compile(r"\[?\s*\{\s*(?:'(?:name|function)'|(?:name|function)\b)\s*:")
_NAME_VALUE = re.compile(r"""(?:["']name["']|\bname)\s*:\s*(["'])([^"'\\\n]{1,200})\1""")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NEXT = re.compile(r"\s*:")
_JS_WORDS = {"true": "True", "false": "False", "null": "None"}
ARG_KEYS = ("arguments", "parameters", "args", "input")
# Keys of a call that are never its arguments, when the arguments stand beside the name.
_NOT_ARGS = ("name", "id", "type")
# How `text_protocol.as_text_messages` shows the model a tool's result (small models echo it back).
_RESPONSE_KEYS = {"name", "content"}
_BARE_START = re.compile(r'\[?\s*\{\s*"(?:name|function)"\s*:')
_DECODER = json.JSONDecoder()
_CLOSING = {"{": "}", "[": "]"}
_STRUCTURE = re.compile(r"""["'{}\[\]]""")
_STRINGS = {quote: re.compile(rf"{quote}(?:[^{quote}\\\n]|\\.)*{quote}") for quote in "\"'"}


def call_shaped(value: Any, offered: Collection[str]) -> bool:
    """A name and arguments; or a name with its arguments beside it, for an offered tool only,
    since a package.json or any record has a "name" too."""
    if isinstance(value, list):
        return bool(value) and all(call_shaped(item, offered) for item in value)
    if not isinstance(value, dict):
        return False
    if isinstance(value.get("function"), dict):
        return call_shaped(value["function"], offered)
    return isinstance(value.get("name"), str) and (
        any(key in value for key in ARG_KEYS) or _arguments_beside(value, offered)
    )


def arguments_of(value: dict[str, Any], offered: Collection[str]) -> Any:
    """The arguments under their key, else (for an offered tool) the keys beside the name, less
    those a call carries for itself (`id`, `type`), which no tool here takes."""
    for key in ARG_KEYS:
        if key in value:
            return value[key]
    if _arguments_beside(value, offered):
        return {key: item for key, item in value.items() if key not in _NOT_ARGS}
    return None


def _arguments_beside(value: dict[str, Any], offered: Collection[str]) -> bool:
    """An offered tool's name with its arguments beside it, unless the object is a tool's result as
    the text protocol shows it (`{"name": ..., "content": ...}`): the real Qwen2.5-Coder-0.5B echoes
    that back as its answer, and read as a call it would run the tool again without its arguments."""
    return offered_name(value, offered) and set(value) != _RESPONSE_KEYS


def offered_name(value: dict[str, Any], offered: Collection[str]) -> bool:
    name = value.get("name")
    return isinstance(name, str) and name in offered


def function_of(item: dict[str, Any]) -> dict[str, Any]:
    """The object that holds a call's name: its `function`, or the call itself."""
    function = item.get("function")
    return function if isinstance(function, dict) else item


def literal_call(text: str, offered: Collection[str]) -> Any:
    """A literal read as calls only where it names an offered tool and every call in it is of one:
    reading a literal is a guess, which must not turn a dict in an answer into a call."""
    if not names_offered(text, offered):
        return None
    value = literal_value(text)
    items = value if isinstance(value, list) else [value]
    if not call_shaped(value, offered) or not all(offered_name(function_of(item), offered) for item in items):
        return None
    return value


def call_starts(text: str, offered: Collection[str]) -> list[int]:
    """Where calls may open, in order: `{"name":` as JSON, or a literal one naming an offered tool.
    The first object of a list counts too, since a list that is not all calls may still open with one."""
    starts: set[int] = set()
    for pattern, named in ((_BARE_START, False), (LITERAL_START, True)):
        for match in pattern.finditer(text):
            opening = _opening(match)
            if named and not names_offered(text[opening : opening + 300], offered):
                continue
            starts.add(opening)
            if text[opening] == "[":
                starts.add(text.index("{", opening))
    return sorted(starts)


def _opening(match: re.Match[str]) -> int:
    """Where the bracket of a matched start stands (the pattern may take spaces before it)."""
    return match.start() + len(match.group(0)) - len(match.group(0).lstrip())


def value_at(brackets: Brackets, start: int, offered: Collection[str]) -> tuple[Any, int]:
    """The value that opens at `start` (JSON, else a literal call of an offered tool) and its end;
    (None, start + 1) when there is none."""
    try:
        return _DECODER.raw_decode(brackets.text, start)
    except ValueError:
        pass
    end = brackets.close(start)
    if end is not None and (value := literal_call(brackets.text[start:end], offered)) is not None:
        return value, end
    return None, start + 1


class Brackets:
    """Where the brackets of one text close (strings of either quote skipped), each found once.

    A scan from a bracket reads what follows exactly as the scan from an earlier bracket did, which
    was outside any string there, so what that scan found holds for it too: a reply a small model
    fills with calls it never closes is read in linear time, not in quadratic.
    """

    def __init__(self, text: str) -> None:
        self.text = text
        self._closes: dict[int, int | None] = {}

    def close(self, start: int) -> int | None:
        """The index after the bracket opening at `start` closes; None when it never closes (a call
        cut off) or its brackets do not match."""
        if start in self._closes:
            return self._closes[start]
        if self.text[start : start + 1] not in _CLOSING:
            return None
        stack: list[tuple[str, int]] = []
        position = start
        while (match := _STRUCTURE.search(self.text, position)) is not None:
            char, position = match.group(0), match.start()
            if char in "\"'":
                end = _string_end(self.text, position)
                if end is None:
                    break
                position = end
                continue
            position += 1
            if char in _CLOSING:
                stack.append((_CLOSING[char], position - 1))
                continue
            expected, opened = stack.pop()
            if expected != char:
                self._closes[opened] = None
                break
            self._closes[opened] = position
            if not stack:
                return position
        for _, opened in stack:
            self._closes[opened] = None
        return None


def named_calls(text: str, offered: Collection[str]) -> list[tuple[int, int, Any]]:
    """Calls written as an offered tool's name at the start of a line, then its arguments:
    `review_change: {"body": ...}`, `read_file({"path": "a.py"})`, `` `list_tree` {} ``.

    The real Qwen2.5-Coder-0.5B wrote the first as its whole review, with more objects after it on
    the line; read as prose, its call syntax went into the review's body. Each span runs to the end
    of its line; its value is the call, or None when the object never forms one (a call cut off).
    """
    if not offered or len(text) > _MAX_CHARS:
        return []
    names = "|".join(re.escape(name) for name in sorted(offered, key=len, reverse=True))
    pattern = re.compile(rf"^[ \t]*(?:[-*>][ \t]+)?`?({names})`?[ \t]*[:(]?[ \t]*(?=\{{)", re.MULTILINE)
    brackets = Brackets(text)
    spans: list[tuple[int, int, Any]] = []
    for match in pattern.finditer(text):
        if spans and match.start() < spans[-1][1]:
            continue
        opening = match.end()
        try:
            args, _ = _DECODER.raw_decode(text, opening)
        except ValueError:
            close = brackets.close(opening)
            args = literal_value(text[opening:close]) if close is not None else None
        line_end = text.find("\n", opening)
        end = len(text) if line_end < 0 else line_end
        value = {"name": match.group(1), "arguments": args} if isinstance(args, dict) else None
        spans.append((match.start(), end, value))
    return spans


def names_offered(text: str, offered: Collection[str]) -> bool:
    """Whether the first `name` key in the text names an offered tool: the gate before anything
    here reads the text, so a dict that merely has a name stays what it was."""
    match = _NAME_VALUE.search(text)
    return match is not None and match.group(2) in offered


def literal_value(text: str) -> Any:
    """The JSON value a Python or JavaScript literal stands for, or None when it is neither.

    Python first (it is what a dict's repr looks like), then the JavaScript form with its bare keys
    quoted and `true`/`false`/`null` spelled the Python way.
    """
    text = text.strip()
    if not text or len(text) > _MAX_CHARS or text[0] not in "{[":
        return None
    value = _evaluated(text)
    if value is None:
        quoted = _quoted_keys(text)
        if quoted is not None and quoted != text:
            value = _evaluated(quoted)
    return value


def _evaluated(text: str) -> Any:
    try:
        value = ast.literal_eval(text)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    return value if _is_json(value) and isinstance(value, (dict, list)) else None


def _is_json(value: Any) -> bool:
    if value is None or isinstance(value, (str, bool, int, float)):
        return True
    if isinstance(value, list):
        return all(_is_json(item) for item in value)
    if isinstance(value, dict):
        return all(isinstance(key, str) and _is_json(item) for key, item in value.items())
    return False


def _quoted_keys(text: str) -> str | None:
    """The text with each bare key (an identifier after `{` or `,` and before `:`) quoted and the
    JavaScript constants renamed; strings are copied as they are. None if a string never ends."""
    out: list[str] = []
    before = ""  # the last character written that is not a space
    position = 0
    while position < len(text):
        char = text[position]
        if char in "\"'":
            end = _string_end(text, position)
            if end is None:
                return None
            out.append(text[position:end])
            before, position = text[end - 1], end
            continue
        match = _IDENT.match(text, position)
        if match is None:
            out.append(char)
            before = before if char.isspace() else char
            position += 1
            continue
        word = match.group(0)
        after = _NEXT.match(text, match.end())
        if before in ("{", ",") and after is not None:
            out.append(f'"{word}"')
        else:
            out.append(_JS_WORDS.get(word, word))
        before, position = word[-1], match.end()
    return "".join(out)


def _string_end(text: str, start: int) -> int | None:
    """The index after the string that opens at `start`, escapes skipped; None if it never ends on
    its line (neither language lets a quoted string run over one)."""
    match = _STRINGS[text[start]].match(text, start)
    return match.end() if match is not None else None
