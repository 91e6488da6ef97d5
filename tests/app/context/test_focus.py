"""Focused passes (issue 30): each hunk inside its innermost enclosing definition, found with
tree-sitter in real sources of the six languages, and the hunk as `format_hunk` shows it wherever no
definition can be found."""

from __future__ import annotations

import difflib
import re

import pytest

from bot.app.context.diff_context import file_heading, format_file, format_hunk, parse_hunks
from bot.app.context.focus import MAX_BLOCK_LINES, enclosing_definition, focused_blocks, focused_hunks
from bot.app.github.models import PullFile

PYTHON = '''import os


class Loader:
    """Reads files under a root."""

    def __init__(self, root):
        self.root = root

    @staticmethod
    def load(root, path):
        def clean(text):
            return text.strip()  # INNER

        full = os.path.join(root, path)  # METHOD
        return clean(open(full).read())


TIMEOUT = 5  # TOP
'''

JAVASCRIPT = """import fs from "fs";

export class Loader {
  constructor(root) {
    this.root = root;
  }

  load(path) {
    const clean = (text) => {
      return text.trim(); // INNER
    };
    const full = `${this.root}/${path}`; // METHOD
    return clean(fs.readFileSync(full, "utf8"));
  }
}

items.forEach((item) => {
  console.log(item); // TOP
});
"""

TYPESCRIPT = """export interface Options {
  root: string;
}

export class Loader {
  constructor(private options: Options) {}

  load(path: string): string {
    function clean(text: string): string {
      return text.trim(); // INNER
    }
    const full: string = `${this.options.root}/${path}`; // METHOD
    return clean(full);
  }
}

export const TIMEOUT: number = 5; // TOP
"""

TSX = """import React from "react";

export class Panel extends React.Component<{ title: string }> {
  render() {
    const heading = (text: string) => {
      return <h1>{text}</h1>; // INNER
    };
    const title = this.props.title.toUpperCase(); // METHOD
    return <div>{heading(title)}</div>;
  }
}

export default Panel; // TOP
"""

GO = """package loader

import "strings"

type Loader struct {
	root string
}

func (l *Loader) Load(path string) string {
	clean := func(text string) string {
		return strings.TrimSpace(text) // INNER
	}
	full := l.root + "/" + path // METHOD
	return clean(full)
}

var Timeout = 5 // TOP
"""

RUST = """use std::path::Path;

pub struct Loader {
    root: String,
}

impl Loader {
    pub fn load(&self, path: &str) -> String {
        fn clean(text: &str) -> String {
            text.trim().to_string() // INNER
        }
        let full = Path::new(&self.root).join(path); // METHOD
        clean(&full.display().to_string())
    }
}

pub const TIMEOUT: u32 = 5; // TOP
"""

# (path, source, the method's name, the nested function's name)
LANGUAGES = [
    ("loader.py", PYTHON, "Loader.load", "Loader.load.clean"),
    ("loader.js", JAVASCRIPT, "Loader.load", "Loader.load.clean"),
    ("loader.ts", TYPESCRIPT, "Loader.load", "Loader.load.clean"),
    ("panel.tsx", TSX, "Panel.render", "Panel.render.heading"),
    ("loader.go", GO, "Loader.Load", "Loader.Load"),  # Go's nested function is a literal: part of its method
    ("loader.rs", RUST, "Loader.load", "Loader.load.clean"),
]


def line_of(source: str, marker: str) -> int:
    return next(n for n, line in enumerate(source.split("\n"), 1) if marker in line)


def edited(source: str, marker: str, replacement: str) -> str:
    """`source` with the line holding `marker` replaced (a change on that line, at the head)."""
    return "\n".join(replacement if marker in line else line for line in source.split("\n"))


def change(path: str, before: str, after: str) -> PullFile:
    """The pull request's file for `before` -> `after`, its patch as git writes one (no file header)."""
    diff = list(difflib.unified_diff(before.splitlines(True), after.splitlines(True), n=3))[2:]
    adds = sum(1 for line in diff if line.startswith("+"))
    dels = sum(1 for line in diff if line.startswith("-"))
    return PullFile(filename=path, status="modified", additions=adds, deletions=dels, patch="".join(diff))


def unfocused(item: PullFile) -> list[str]:
    return [file_heading(item), *("\n".join(format_hunk(h)) for h in parse_hunks(item.patch or ""))]


@pytest.mark.parametrize(("path", "source", "method", "inner"), LANGUAGES)
def test_a_hunk_in_a_method_finds_the_method_and_in_a_nested_function_the_innermost(
    path: str, source: str, method: str, inner: str
) -> None:
    found = enclosing_definition(path, source, line_of(source, "METHOD"), line_of(source, "METHOD"))
    assert found is not None and found.name == method and found.kind == "method"
    assert found.start <= line_of(source, "INNER") < line_of(source, "METHOD") <= found.end
    nested = enclosing_definition(path, source, line_of(source, "INNER"), line_of(source, "INNER"))
    assert nested is not None and nested.name == inner
    assert found.start <= nested.start <= nested.end <= found.end
    assert enclosing_definition(path, source, line_of(source, "TOP"), line_of(source, "TOP")) is None


def test_the_decorators_are_part_of_the_function_and_a_class_body_finds_the_class() -> None:
    found = enclosing_definition(
        "loader.py", PYTHON, line_of(PYTHON, "@staticmethod"), line_of(PYTHON, "@staticmethod")
    )
    assert (
        found is not None and found.name == "Loader.load" and found.start == line_of(PYTHON, "@staticmethod")
    )
    doc = line_of(PYTHON, "Reads files")
    assert enclosing_definition("loader.py", PYTHON, doc, doc) == enclosing_definition(
        "loader.py", PYTHON, line_of(PYTHON, "class Loader"), line_of(PYTHON, "class Loader")
    )
    struct = enclosing_definition(
        "loader.rs", RUST, line_of(RUST, "root: String"), line_of(RUST, "root: String")
    )
    assert struct is not None and (struct.kind, struct.name) == ("struct", "Loader")
    go_type = enclosing_definition("loader.go", GO, line_of(GO, "root string"), line_of(GO, "root string"))
    assert go_type is not None and (go_type.kind, go_type.name) == ("type", "Loader")
    interface = enclosing_definition("loader.ts", TYPESCRIPT, 2, 2)
    assert interface is not None and (interface.kind, interface.name) == ("interface", "Options")


ROW = re.compile(r"^ *(\d+) ([+ ])(.*)$")


def numbered(block: str) -> list[tuple[int, str, str]]:
    """A block's numbered rows as (number, mark, text)."""
    return [(int(m[1]), m[2], m[3]) for row in block.split("\n") if (m := ROW.match(row))]


@pytest.mark.parametrize(("path", "source", "method", "inner"), LANGUAGES)
def test_the_block_numbers_the_whole_method_with_the_change_marked(
    path: str, source: str, method: str, inner: str
) -> None:
    at = line_of(source, "METHOD")
    after = edited(source, "METHOD", source.split("\n")[at - 1] + " // x")
    item = change(path, source, after)
    heading, block = focused_blocks(item, after)
    assert heading == file_heading(item)
    definition = enclosing_definition(path, after, at, at)
    assert definition is not None
    header, *_ = block.split("\n")
    assert f"in method `{method}` (lines {definition.start}-{definition.end};" in header
    assert header.startswith(f"@@ -{parse_hunks(item.patch or '')[0].old_start} +")
    rows = numbered(block)
    numbers = [n for n, _, _ in rows]
    assert numbers == list(range(numbers[0], numbers[-1] + 1))  # every line, in order
    assert numbers[0] <= definition.start and numbers[-1] >= definition.end
    assert [(n, text) for n, mark, text in rows if mark == "+"] == [(at, after.split("\n")[at - 1])]
    assert all(text == after.split("\n")[n - 1] for n, _, text in rows)
    rows = block.split("\n")
    removed = rows.index(f"{'':>{len(str(numbers[-1]))}} -" + source.split("\n")[at - 1])
    assert ROW.match(rows[removed + 1]) and int(rows[removed + 1].split()[0]) == at  # in its place


def test_a_top_level_hunk_is_shown_as_format_hunk_shows_it() -> None:
    after = edited(PYTHON, "TOP", "TIMEOUT = 10  # TOP")
    item = change("loader.py", PYTHON, after)
    assert focused_blocks(item, after) == unfocused(item)


def test_two_hunks_in_one_function_make_one_block() -> None:
    body = "\n".join(f"    step_{n} = {n}" for n in range(1, 21))
    before = f"def run():\n{body}\n    return step_1\n\n\nDONE = True\n"
    after = before.replace("step_2 = 2", "step_2 = 22").replace("step_18 = 18", "step_18 = 180")
    item = change("run.py", before, after)
    assert len(parse_hunks(item.patch or "")) == 2
    _, block = focused_blocks(item, after)
    assert block.count("@@ -") == 2 and "in function `run` (lines 1-22;" in block.split("\n")[0]
    assert "\n   -    step_2 = 2\n 3 +    step_2 = 22" in block  # each removed line above its new one
    assert "\n   -    step_18 = 18\n19 +    step_18 = 180" in block
    assert " 3 +    step_2 = 22" in block and "19 +    step_18 = 180" in block
    assert "10      step_9 = 9" in block  # a line between the hunks, from the definition


def test_a_long_definition_is_cut_to_windows_around_its_hunks_and_says_so() -> None:
    body = "\n".join(f"    total += {n}" for n in range(1, 301))
    before = f"def add():\n    total = 0\n{body}\n    return total\n"
    after = before.replace("total += 150\n", "total -= 150\n").replace("total += 280\n", "total -= 280\n")
    item = change("add.py", before, after)
    _, block = focused_blocks(item, after)
    rows = block.split("\n")
    assert "in function `add` (lines 1-303; shown: 1, " in rows[0]
    assert len(rows) < MAX_BLOCK_LINES + 20
    assert "  1  def add():" in rows  # the first line stays, for the signature
    assert any(row.endswith("(lines 2-") or "not shown)" in row for row in rows)
    assert "152 +    total -= 150" in rows and "282 +    total -= 280" in rows
    shown = [int(row.split()[0]) for row in rows if row[:4].strip().isdigit()]
    assert shown == sorted(shown) and 1 in shown and 303 not in shown


def test_removed_lines_are_shown_where_they_were_not_numbered() -> None:
    before = "def pay(amount):\n    check(amount)\n    charge(amount)\n    return True\n\n\nX = 1\n"
    after = before.replace("    check(amount)\n", "").replace("charge(amount)", "charge(amount, retry=True)")
    item = change("pay.py", before, after)
    _, block = focused_blocks(item, after)
    assert [text for _, _, text in numbered(block) if "check" in text] == []
    rows = block.split("\n")[1:]
    assert rows[:4] == [
        "1  def pay(amount):",
        "  -    check(amount)",
        "  -    charge(amount)",
        "2 +    charge(amount, retry=True)",
    ]


def test_a_deletion_only_hunk_shows_its_definition_with_the_removed_line_in_place() -> None:
    """A removed call (or `return`, or check) is the change: the 1.5B model saw "(1 line removed
    after line 5)" and nothing else, so it could not say what the removal broke (issue 30)."""
    body = "\n".join(f"    step_{n}()" for n in range(1, 11))
    before = f"def run():\n{body}\n"
    after = before.replace("    step_5()\n", "")
    item = change("run.py", before, after)
    _, block = focused_blocks(item, after)
    assert "in function `run` (lines 1-10;" in block.split("\n")[0]
    assert "\n 5      step_4()\n   -    step_5()\n 6      step_6()\n" in block
    assert [n for n, _, _ in numbered(block)] == list(range(1, 11))  # the lines around take a comment
    assert "removed after line" not in block


@pytest.mark.parametrize(
    ("path", "head"),
    [
        ("loader.rb", "the head"),  # no grammar for the file
        ("loader.py", "a parse error"),
        ("loader.py", "nothing"),  # the file could not be read
        ("loader.py", "another text"),  # the head is not the patch's new side
    ],
)
def test_without_a_readable_definition_every_hunk_is_shown_as_it_is(path: str, head: str) -> None:
    after = edited(PYTHON, "METHOD", "        full = os.path.join(root, path, 'x')  # METHOD")
    item = change(path, PYTHON, after)
    text = {"the head": after, "a parse error": after + "def broken(:\n", "nothing": None}.get(head, head)
    assert focused_blocks(item, text) == unfocused(item)
    assert enclosing_definition("loader.py", after + "def broken(:\n", 15, 15) is None


def test_a_nested_function_with_a_hunk_of_its_own_joins_its_outer_one() -> None:
    after = edited(PYTHON, "INNER", "            return text.strip().lower()  # INNER")
    after = edited(after, "METHOD", "        full = os.path.join(root, path, 'x')  # METHOD")
    item = change("loader.py", PYTHON, after)
    blocks = focused_hunks(item, after)
    assert len(blocks) == 1 and "in method `Loader.load`" in blocks[0].text


def test_a_file_without_a_patch_is_shown_as_format_file_shows_it() -> None:
    item = PullFile(filename="logo.png", status="added")
    assert "\n".join(focused_blocks(item, None)) == format_file(item)
