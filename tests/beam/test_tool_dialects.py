"""The dialect table: each way a real server writes a tool call (or an answer), read into one shape.

Messages are the `choices[0].message` of a chat-completions reply. The recorded ones are real
replies of llama-server (tests/data/model_responses/, see its README); the others are written in the
shapes those servers document, where no server here speaks the dialect.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bot.beam.completion import PendingToolCall
from bot.beam.tool_dialects import (
    Reading,
    looks_like_call,
    read_message,
    read_text,
    split_think,
    stable_id,
    without_calls,
)

RECORDED = Path(__file__).resolve().parent.parent / "data" / "model_responses"
OFFERED = frozenset({"read_file", "git_diff", "list_tree", "review_change"})
READ = {"path": "src/app.py"}


def msg(content: Any = None, **extra: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": content, **extra}


def native(*calls: dict[str, Any]) -> dict[str, Any]:
    return msg(None, tool_calls=list(calls))


def call(index: int, name: str, args: Any) -> PendingToolCall:
    return PendingToolCall(stable_id(index, name, args), name, args)


QWEN_FENCE = (
    "To review the last commit I will read the changed file first.\n\n"
    '```json\n{"name": "read_file", "arguments": {"path": "src/app.py"}}\n```'
)

# Qwen2.5-Coder-0.5B's whole answer after reading a file in the text protocol (seed 1): the
# `<tool_response>` it was shown, echoed. Read as a call it would run read_file again with no path.
ECHO = '{"name": "read_file", "content": "def add(a, b):\\n    return a + b\\n\\n# fixed\\n"}'

# Qwen2.5-Coder-0.5B's whole answer in a real `beam-bot run review` (2026-12-01): the tool's name,
# then its arguments, then an object more. Read as prose, it became the review's body verbatim.
NAMED = (
    'review_change: {"body": "Error reading \'src/tidy/moving_sum.py\': Could not read the file.", '
    '"comments": ["The error occurred because \'src/tidy/moving_sum.py\' does not exist."]}, '
    '{"severity": "critical"}'
)
NAMED_ARGS = {
    "body": "Error reading 'src/tidy/moving_sum.py': Could not read the file.",
    "comments": ["The error occurred because 'src/tidy/moving_sum.py' does not exist."],
}

# Its answer in another run the same day, after list_tree had failed: the call, then the result.
ECHOED_FENCE = (
    '```json\n{"name": "list_tree", "arguments": {"path": "local/scratch"}}\n'
    '{"error":{"http_status":400,"http_title":"Bad Request","errmesg":"List target is not a '
    'directory.","errcode":"BEM-306","errdata":{"detail":"local/scratch"}}}\n```'
)

# (case, message, calls expected, text expected, problem expected)
TABLE: list[tuple[str, dict[str, Any], tuple[PendingToolCall, ...], str, str | None]] = [
    (
        "native, arguments as a string",
        native(
            {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": json.dumps(READ)}}
        ),
        (PendingToolCall("c1", "read_file", READ),),
        "",
        None,
    ),
    (
        "native, arguments as an object",
        native({"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": READ}}),
        (PendingToolCall("c1", "read_file", READ),),
        "",
        None,
    ),
    (
        "native, no id and no type: a stable id",
        native({"function": {"name": "read_file", "arguments": READ}}),
        (call(0, "read_file", READ),),
        "",
        None,
    ),
    (
        "native, empty arguments string",
        native({"id": "c1", "function": {"name": "git_diff", "arguments": ""}}),
        (PendingToolCall("c1", "git_diff", {}),),
        "",
        None,
    ),
    (
        "native, a tool not offered",
        native({"id": "c1", "function": {"name": "shell", "arguments": "{}"}}),
        (),
        "",
        "`shell` is not one of the tools offered (git_diff, list_tree, read_file, review_change)",
    ),
    (
        "native, arguments not an object",
        native({"id": "c1", "function": {"name": "read_file", "arguments": '"src/app.py"'}}),
        (),
        "",
        "the arguments of `read_file` are not a JSON object",
    ),
    (
        "bare JSON in the text (Qwen)",
        msg('{"name": "read_file", "arguments": {"path": "src/app.py"}}'),
        (call(0, "read_file", READ),),
        "",
        None,
    ),
    (
        "a ```json fence after a sentence of prose (Qwen)",
        msg(QWEN_FENCE),
        (call(0, "read_file", READ),),
        "",
        None,
    ),
    (
        "a list of calls in a fence",
        msg(
            'Two reads:\n```json\n[{"name": "read_file", "arguments": {"path": "a"}},'
            ' {"name": "git_diff", "arguments": {}}]\n```'
        ),
        (call(0, "read_file", {"path": "a"}), call(1, "git_diff", {})),
        "",
        None,
    ),
    (
        "one call per line in a fence",
        msg(
            '```json\n{"name": "read_file", "arguments": {"path": "a"}}\n'
            '{"name": "git_diff", "arguments": {}}\n```'
        ),
        (call(0, "read_file", {"path": "a"}), call(1, "git_diff", {})),
        "",
        None,
    ),
    (
        "arguments as a JSON string in the text, and `parameters` (Llama 3)",
        msg('{"name": "read_file", "parameters": "{\\"path\\": \\"src/app.py\\"}"}'),
        (call(0, "read_file", READ),),
        "",
        None,
    ),
    (
        "a bare call, then a fence closed that was never opened (Qwen2.5-Coder-0.5B)",
        msg('{\n"name": "list_tree", "arguments": {"path": "test_files" }}\n```'),
        (call(0, "list_tree", {"path": "test_files"}),),
        "",
        None,
    ),
    (
        "a bare call after a sentence of prose",
        msg('I will read it first: {"name": "read_file", "arguments": {"path": "src/app.py"}}'),
        (call(0, "read_file", READ),),
        "",
        None,
    ),
    (
        "Hermes/Qwen <tool_call> tags, two of them",
        msg(
            '<tool_call>\n{"name": "read_file", "arguments": {"path": "a"}}\n</tool_call>\n'
            '<tool_call>\n{"name": "git_diff", "arguments": {}}\n</tool_call>'
        ),
        (call(0, "read_file", {"path": "a"}), call(1, "git_diff", {})),
        "",
        None,
    ),
    (
        "a <tool_call> tag left open at the end",
        msg('I will look.\n<tool_call>\n{"name": "git_diff", "arguments": {}}'),
        (call(0, "git_diff", {}),),
        "",
        None,
    ),
    (
        "Mistral [TOOL_CALLS][...] with its own ids",
        msg('[TOOL_CALLS][{"name": "read_file", "arguments": {"path": "a"}, "id": "a1b2c3d4e"}]'),
        (PendingToolCall("a1b2c3d4e", "read_file", {"path": "a"}),),
        "",
        None,
    ),
    (
        "Mistral [TOOL_CALLS]name[ARGS]{...} (newer templates)",
        msg('[TOOL_CALLS]read_file[ARGS]{"path": "a"}'),
        (call(0, "read_file", {"path": "a"}),),
        "",
        None,
    ),
    (
        "arguments at the top level, bare (Qwen2.5-Coder-0.5B)",
        msg('{"name": "read_file", "path": "src/app.py"}'),
        (call(0, "read_file", READ),),
        "",
        None,
    ),
    (
        "arguments at the top level, fenced after prose, its id kept and its type not an argument",
        msg(
            'I will read it.\n```json\n{"name": "read_file", "path": "src/app.py", "id": "c7",'
            ' "type": "function"}\n```'
        ),
        (PendingToolCall("c7", "read_file", READ),),
        "",
        None,
    ),
    (
        "arguments at the top level, in <tool_call> tags",
        msg('<tool_call>\n{"name": "read_file", "path": "src/app.py"}\n</tool_call>'),
        (call(0, "read_file", READ),),
        "",
        None,
    ),
    (
        "arguments at the top level, then a stray fence",
        msg('{"name": "list_tree", "path": "src"}\n```'),
        (call(0, "list_tree", {"path": "src"}),),
        "",
        None,
    ),
    (
        "a package.json with a name that is no tool stays text",
        msg('Add the package:\n```json\n{"name": "my-pkg", "version": "1.0.0"}\n```'),
        (),
        'Add the package:\n```json\n{"name": "my-pkg", "version": "1.0.0"}\n```',
        None,
    ),
    (
        "a bare JSON object named after no tool stays text",
        msg('{"name": "my-pkg", "version": "1.0.0"}'),
        (),
        '{"name": "my-pkg", "version": "1.0.0"}',
        None,
    ),
    (
        "a tool's result echoed back as the text protocol shows it is no call (the real 0.5B)",
        msg(ECHO),
        (),
        ECHO,
        None,
    ),
    (
        "a Python dict, bare, with True and None",
        msg("{'name': 'read_file', 'arguments': {'path': 'src/app.py', 'all': True, 'ref': None}}"),
        (call(0, "read_file", {"path": "src/app.py", "all": True, "ref": None}),),
        "",
        None,
    ),
    (
        "a Python dict in a fence after prose",
        msg("I will read it.\n```json\n{'name': 'read_file', 'arguments': {'path': 'src/app.py'}}\n```"),
        (call(0, "read_file", READ),),
        "",
        None,
    ),
    (
        "a Python dict in <tool_call> tags",
        msg("<tool_call>\n{'name': 'read_file', 'arguments': {'path': 'src/app.py'}}\n</tool_call>"),
        (call(0, "read_file", READ),),
        "",
        None,
    ),
    (
        "a Python dict with the arguments at the top level, after prose",
        msg("Reading: {'name': 'read_file', 'path': 'src/app.py'}"),
        (call(0, "read_file", READ),),
        "",
        None,
    ),
    (
        "unquoted keys, bare, with true",
        msg('{name: "read_file", arguments: {path: "src/app.py", all: true}}'),
        (call(0, "read_file", {"path": "src/app.py", "all": True}),),
        "",
        None,
    ),
    (
        "unquoted keys in a fence, a key's name inside a string left alone",
        msg('```json\n{name: "review_change", arguments: {body: "fix, name: x"}}\n```'),
        (call(0, "review_change", {"body": "fix, name: x"}),),
        "",
        None,
    ),
    (
        "unquoted keys in <tool_call> tags",
        msg('<tool_call>\n{name: "read_file", arguments: {path: "src/app.py"}}\n</tool_call>'),
        (call(0, "read_file", READ),),
        "",
        None,
    ),
    (
        "unquoted keys after a sentence of prose",
        msg('I will read it: {name: "read_file", arguments: {path: "src/app.py"}}'),
        (call(0, "read_file", READ),),
        "",
        None,
    ),
    (
        "a literal naming no tool stays text",
        msg("Use {'name': 'shell', 'arguments': {'cmd': 'ls'}} or {name: \"x\", arguments: {}} here."),
        (),
        "Use {'name': 'shell', 'arguments': {'cmd': 'ls'}} or {name: \"x\", arguments: {}} here.",
        None,
    ),
    (
        "a broken literal of an offered tool is an attempt",
        msg("{'name': 'read_file', 'arguments': {'path': }}"),
        (),
        "{'name': 'read_file', 'arguments': {'path': }}",
        "a tool call is not valid JSON",
    ),
    (
        "a literal that is an expression is never evaluated",
        msg("{'name': 'read_file', 'arguments': __import__('os').getcwd()}"),
        (),
        "{'name': 'read_file', 'arguments': __import__('os').getcwd()}",
        "a tool call is not valid JSON",
    ),
    (
        "a Python set as the arguments is no JSON value",
        msg("{'name': 'read_file', 'arguments': {'a.py'}}"),
        (),
        "{'name': 'read_file', 'arguments': {'a.py'}}",
        "a tool call is not valid JSON",
    ),
    (
        "reasoning_content beside a text answer",
        msg("The change is fine.", reasoning_content="The user wants a review. Let me think."),
        (),
        "The change is fine.",
        None,
    ),
    (
        "a <think> block before the answer",
        msg("<think>\nI should call read_file? No.\n</think>\n\nThe change is fine."),
        (),
        "The change is fine.",
        None,
    ),
    (
        "a think block opened in the prompt: only its end is in the answer",
        msg("the user asks for a review, so...\n</think>\nLooks good."),
        (),
        "Looks good.",
        None,
    ),
    (
        "a <think> block, then a call in tags",
        msg(
            '<think>read it</think>\n<tool_call>\n{"name": "read_file", "arguments": {"path": "a"}}'
            "\n</tool_call>"
        ),
        (call(0, "read_file", {"path": "a"}),),
        "",
        None,
    ),
    (
        "plain prose that mentions JSON stays text",
        msg('Set `"name": "x"` in the config; the code is fine.'),
        (),
        'Set `"name": "x"` in the config; the code is fine.',
        None,
    ),
    (
        "a JSON example that is no call stays text",
        msg('The file now returns:\n```json\n{"status": "ok", "count": 3}\n```'),
        (),
        'The file now returns:\n```json\n{"status": "ok", "count": 3}\n```',
        None,
    ),
    (
        "a python fence with a dict stays text",
        msg('```python\nx = {"name": "read_file", "arguments": {}}\n```'),
        (),
        '```python\nx = {"name": "read_file", "arguments": {}}\n```',
        None,
    ),
    (
        "a fenced call of a tool not offered is an attempt, not an answer",
        msg('Let me run it.\n```json\n{"name": "run_shell", "arguments": {"cmd": "ls"}}\n```'),
        (),
        'Let me run it.\n```json\n{"name": "run_shell", "arguments": {"cmd": "ls"}}\n```',
        "`run_shell` is not one of the tools offered (git_diff, list_tree, read_file, review_change)",
    ),
    (
        "a tag that holds broken JSON is an attempt",
        msg('<tool_call>\n{"name": "read_file", "arguments": {"path": }\n</tool_call>'),
        (),
        '<tool_call>\n{"name": "read_file", "arguments": {"path": }\n</tool_call>',
        "a tool call is not valid JSON",
    ),
    (
        "the tool's name, a colon, its arguments (real 0.5B reply)",
        msg(NAMED),
        (call(0, "review_change", NAMED_ARGS),),
        "",
        None,
    ),
    (
        "the tool's name called like a function, after prose",
        msg('I will read it first.\nread_file({"path": "src/app.py"})'),
        (call(0, "read_file", READ),),
        "",
        None,
    ),
    (
        "the tool's name in backticks, then a literal",
        msg("`read_file` {'path': 'src/app.py'}"),
        (call(0, "read_file", READ),),
        "",
        None,
    ),
    (
        "a tool's name in prose without arguments stays text",
        msg("read_file: the helper opens the file twice; `review_change` is not needed."),
        (),
        "read_file: the helper opens the file twice; `review_change` is not needed.",
        None,
    ),
    (
        "the name of a tool not offered, then an object, stays text",
        msg('run_shell: {"cmd": "ls"}'),
        (),
        'run_shell: {"cmd": "ls"}',
        None,
    ),
    (
        "a named call in a python fence stays text",
        msg('```python\nread_file({"path": path})\n```'),
        (),
        '```python\nread_file({"path": path})\n```',
        None,
    ),
    (
        "a fence of a call and the tool result it echoes (real 0.5B reply)",
        msg(ECHOED_FENCE),
        (call(0, "list_tree", {"path": "local/scratch"}),),
        "",
        None,
    ),
    (
        "a fence of JSON lines without a call stays text",
        msg('```json\n{"a": 1}\n{"b": 2}\n```'),
        (),
        '```json\n{"a": 1}\n{"b": 2}\n```',
        None,
    ),
    (
        "a named call cut off is an attempt",
        msg('review_change: {"body": "The disc'),
        (),
        'review_change: {"body": "The disc',
        "a tool call is not valid JSON",
    ),
    (
        "a fence with broken call JSON is an attempt",
        msg('```json\n{"name": "read_file", "arguments": {"path": "a"\n```'),
        (),
        '```json\n{"name": "read_file", "arguments": {"path": "a"\n```',
        "a tool call is not valid JSON",
    ),
]


@pytest.mark.parametrize(
    ("message", "calls", "text", "problem"),
    [case[1:] for case in TABLE],
    ids=[case[0] for case in TABLE],
)
def test_dialect(
    message: dict[str, Any], calls: tuple[PendingToolCall, ...], text: str, problem: str | None
) -> None:
    reading = read_message(message, OFFERED)
    assert (reading.calls, reading.text, reading.problem) == (calls, text, problem)


def test_reasoning_is_kept_apart_from_the_text() -> None:
    reading = read_message(msg("<think>secret plan</think>Done.", reasoning_content="first thought"), OFFERED)
    assert reading == Reading("Done.", (), None, "first thought\n\nsecret plan")


def test_a_valid_call_beside_a_broken_one_is_kept_and_the_other_reported() -> None:
    reading = read_message(
        native(
            {"id": "c1", "function": {"name": "read_file", "arguments": READ}},
            {"id": "c2", "function": {"name": "read_file", "arguments": "{broken"}},
        ),
        OFFERED,
    )
    assert reading.calls == (PendingToolCall("c1", "read_file", READ),)
    assert reading.problem == "the arguments of `read_file` are not valid JSON"


def test_stable_ids_repeat_for_the_same_call_and_differ_by_place() -> None:
    first = read_text(QWEN_FENCE, OFFERED).calls[0].id
    assert first == read_text(QWEN_FENCE, OFFERED).calls[0].id
    assert stable_id(0, "read_file", READ) != stable_id(1, "read_file", READ)
    assert first.startswith("call_")


def test_nothing_is_a_call_when_no_tool_is_offered() -> None:
    reading = read_text('{"name": "read_file", "arguments": {}}', frozenset())
    assert reading.calls == ()
    assert reading.problem == "`read_file` is not one of the tools offered (none)"


@pytest.mark.parametrize(
    ("text", "looks"),
    [
        ('{"name": "read_f', True),
        ('Let me see.\n```json\n{"name": "git', True),
        ("<tool_call>\n{", True),
        ("[TOOL_CALLS][", True),
        ("{'name': 'read_f", True),
        ('{name: "review_change", arguments: {body: "The', True),
        ("The review: the loop is fine.", False),
        ('The config has {"name": "x"} in it.', False),
    ],
)
def test_a_cut_call_is_recognised(text: str, looks: bool) -> None:
    assert looks_like_call(text) is looks


def test_split_think_leaves_a_text_without_think_untouched() -> None:
    assert split_think("  kept  ") == ("", "  kept  ")


def recorded_cases() -> list[Path]:
    return sorted(RECORDED.glob("*.json"))


@pytest.mark.parametrize("path", recorded_cases(), ids=lambda path: path.stem)
def test_recorded_reply(path: Path) -> None:
    """Each recording holds the server's reply, the tools it was offered and what it must read as."""
    record = json.loads(path.read_text(encoding="utf-8"))
    message = record["response"]["choices"][0]["message"]
    reading = read_message(message, frozenset(record["offered"]))
    expected = record["expect"]
    assert [[c.name, c.args] for c in reading.calls] == expected["calls"]
    assert reading.problem == expected.get("problem")
    if "text" in expected:
        assert reading.text == expected["text"]
    for raw in ("<tool_call>", "<think>", '{"name"', "[TOOL_CALLS]"):
        assert raw not in reading.text or reading.problem is not None or reading.calls


@pytest.mark.parametrize(
    ("text", "prose"),
    [
        ('{"name": "list_tree", "arguments": {}}\n```', ""),
        ("<think>plan</think>The loop is fine.", "The loop is fine."),
        (
            'The fix is missing a test.\n```json\n{"name": "run_shell", "arguments": {"cmd": "ls"}}\n```',
            "The fix is missing a test.",
        ),
        (
            'Reading it: {"name": "read_file", "arguments": {"path": "a"}} then more.',
            "Reading it:  then more.",
        ),
        ('The fix:\n```json\n{"name": "review_change", "argu', "The fix:"),
        ('Cut: {"name": "review_change", "arguments": {"body": "The disc', "Cut:"),
        ("Fine.\n<tool_call>\n{}\n</tool_call>\n[TOOL_CALLS][{}]", "Fine."),
        ('Returns:\n```json\n{"status": "ok"}\n```', 'Returns:\n```json\n{"status": "ok"}\n```'),
        (
            '```python\nx = {"name": "read_file", "arguments": {}}\n```',
            '```python\nx = {"name": "read_file", "arguments": {}}\n```',
        ),
        ('Reading it: {"name": "read_file", "path": "a"} then more.', "Reading it:  then more."),
        ("Done.\n```json\n{'name': 'read_file', 'arguments': {'path': 'a'}}\n```", "Done."),
        ('Reading: {name: "read_file", arguments: {path: "a"}} then more.', "Reading:  then more."),
        ('The fix: {name: "review_change", arguments: {body: "The disc', "The fix:"),
        ("Broken: {'name': 'read_file', 'arguments': {'path': }}", "Broken:"),
        (
            'Add:\n```json\n{"name": "my-pkg", "version": "1.0.0"}\n```',
            'Add:\n```json\n{"name": "my-pkg", "version": "1.0.0"}\n```',
        ),
        ('The config has {"name": "x"} in it.', 'The config has {"name": "x"} in it.'),
        ("Use {name: 'x', arguments: {}} here.", "Use {name: 'x', arguments: {}} here."),
        (NAMED, ""),
        (f"Here:\n{ECHOED_FENCE}", "Here:"),
        ('The review:\nreview_change: {"body": "ok"}, {"x": 1}\nThanks.', "The review:\n\nThanks."),
        ('Fine.\nreview_change: {"body": "The disc', "Fine."),
        ("read_file: it opens the file twice.", "read_file: it opens the file twice."),
    ],
    ids=[
        "stray-fence",
        "think",
        "fenced-call",
        "bare-in-prose",
        "cut-fence",
        "cut-bare",
        "tags",
        "json-example",
        "python",
        "top-level-in-prose",
        "python-dict-fenced",
        "unquoted-in-prose",
        "unquoted-cut",
        "literal-broken",
        "package-json-fenced",
        "json-with-a-name-in-prose",
        "literal-of-no-tool",
        "named-real-0.5b",
        "echoed-fence-real-0.5b",
        "named-between-prose",
        "named-cut",
        "name-in-prose",
    ],
)
def test_without_calls_keeps_only_the_prose(text: str, prose: str) -> None:
    """What a review may show of an answer whose calls could not be used: never the call syntax."""
    assert without_calls(text, OFFERED) == prose


def test_without_calls_leaves_the_shapes_of_offered_tools_alone_when_it_is_not_told_them() -> None:
    """Arguments beside the name and literals are calls only of an offered tool; no tools, no calls."""
    text = "Use {'name': 'read_file', 'path': 'a'} here."
    assert without_calls(text) == text
    assert without_calls(text, OFFERED) == "Use  here."
