"""A changed hunk widened to the function or class around it, as a review's model reads it (issue 30,
"focused passes"); decided without I/O, from the head's text of the file.

A bare hunk shows three lines of context: too little to judge a change to a function whose start
is thirty lines up. A whole file is too much: on SWE-PRBench a ~2k-token structured diff beat full
context for every model tried, and the more context was pasted, the worse models did. So each hunk
is shown inside its innermost enclosing definition, found with tree-sitter (context/grammars.py), and
numbered as diff_context.py numbers a hunk:

    @@ -12 +12 @@ in method `Loader.load` (lines 10-14; the diff: 9-15)
    10     def load(self, path):
    11         with open(path) as f:
             -         return parse(f.read())
    12 +           data = f.read()
    13         return parse(data)

Hunks inside one definition make one block, a hunk that only removes lines too (a removed `return`
or check is as much a change as an added line, and the lines around it take a comment). A
definition longer than `MAX_BLOCK_LINES` shows its first line and a window around each hunk, and
says which lines. Where no definition can be found
(no grammar for the file, a file that does not parse, a hunk at the top level, a head that does not
match the patch), the hunk is shown exactly as `format_hunk` shows it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tree_sitter import Node

from bot.app.context.diff_context import (
    Hunk,
    file_heading,
    format_file,
    format_hunk,
    numbered_rows,
    parse_hunks,
    removed_by_line,
)
from bot.app.context.grammars import grammar_for, parse_tree
from bot.app.github.models import PullFile

# Told to the model with diff_context.py's HOW_TO_READ when the hunks are focused: the definition's
# other lines carry numbers too, and a comment on one would land outside the diff (folded into the
# body of `/beam review`, dropped by an automatic review).
HOW_TO_READ_FOCUSED = (
    "A hunk widened to the function or class around it (`in function f (lines 10-40; the diff: "
    "18-25)`) numbers that definition's other lines too, for reference: only the diff's lines take "
    "an inline comment."
)
MAX_BLOCK_LINES = 80  # past this, a definition is cut to windows around its hunks
MIN_MARGIN = 10  # lines kept either side of a hunk in a cut definition, at least
MAX_NAME_CHARS = 60

_JS_FUNCTIONS = {
    "function_declaration": "function",
    "generator_function_declaration": "function",
    "method_definition": "method",
    "function_expression": "function",
    "function": "function",
    "generator_function": "function",
    "arrow_function": "function",
}
_JS_TYPES = {"class_declaration": "class", "class": "class"}
_TS_TYPES = {
    **_JS_TYPES,
    "abstract_class_declaration": "class",
    "interface_declaration": "interface",
    "enum_declaration": "enum",
    "internal_module": "namespace",
    "module": "module",
}
_FUNCTIONS: dict[str, dict[str, str]] = {
    "python": {"function_definition": "function"},
    "javascript": _JS_FUNCTIONS,
    "typescript": _JS_FUNCTIONS,
    "tsx": _JS_FUNCTIONS,
    "go": {"function_declaration": "function", "method_declaration": "method"},
    "rust": {"function_item": "function"},
}
_TYPES: dict[str, dict[str, str]] = {
    "python": {"class_definition": "class"},
    "javascript": _JS_TYPES,
    "typescript": _TS_TYPES,
    "tsx": _TS_TYPES,
    "go": {"type_spec": "type"},
    "rust": {
        "impl_item": "impl",
        "struct_item": "struct",
        "enum_item": "enum",
        "union_item": "union",
        "trait_item": "trait",
        "mod_item": "module",
    },
}
# A function without a name of its own (`const f = () => ...`, `{ key: function () {} }`) is a
# definition only when what holds it names it; a callback passed inline is part of its caller.
_ANONYMOUS = {"arrow_function", "function_expression", "function", "generator_function", "class"}
_NAMING_FIELD = {
    "variable_declarator": "name",
    "assignment_expression": "left",
    "pair": "key",
    "public_field_definition": "name",
    "field_definition": "property",
}


@dataclass(frozen=True)
class Definition:
    """A function, method, class or type around some lines: `start`..`end` are 1-based and
    inclusive, decorators included; `name` is qualified by the definitions around it."""

    kind: str
    name: str
    start: int
    end: int


@dataclass(frozen=True)
class Block:
    """One block of a focused file: its text and the new-side lines it shows, first to last (the
    line a deletion followed, for a hunk with no line left), so a linter finding goes with the
    block of its line."""

    text: str
    first: int
    last: int


def _end_row(node: Node) -> int:
    """The last row a node covers: one that ends at column 0 of a row ends on the row before."""
    end = node.end_point
    return end.row - 1 if end.column == 0 and end.row > node.start_point.row else end.row


def _text(node: Node | None) -> str | None:
    if node is None or node.text is None:
        return None
    text = " ".join(node.text.decode("utf-8", "replace").split())
    return text[:MAX_NAME_CHARS] if text else None


def _receiver(node: Node) -> str | None:
    """A Go method's receiver type (`func (l *Loader) Load()`: Loader), which qualifies its name."""
    stack = [node.child_by_field_name("receiver")]
    while stack:
        current = stack.pop()
        if current is None:
            continue
        if current.type == "type_identifier":
            return _text(current)
        stack += reversed(current.children)
    return None


def _own_name(node: Node) -> str | None:
    if node.type == "impl_item":
        return _text(node.child_by_field_name("type"))
    if node.type == "method_declaration":
        name, receiver = _text(node.child_by_field_name("name")), _receiver(node)
        return f"{receiver}.{name}" if receiver and name else name
    named = _text(node.child_by_field_name("name"))
    if named is not None or node.type not in _ANONYMOUS:
        return named
    parent = node.parent
    if parent is not None and parent.type in _NAMING_FIELD:
        return _text(parent.child_by_field_name(_NAMING_FIELD[parent.type]))
    return None


def _definition_of(node: Node, grammar: str) -> tuple[Node, str, str, Node] | None:
    """(the node whose lines it spans, its kind, its name, the definition's own node) if `node` is a
    definition. Python's decorators belong to what they decorate: the span is the decorated one."""
    if node.type == "decorated_definition":
        inner = node.child_by_field_name("definition")
        found = _definition_of(inner, grammar) if inner is not None else None
        return (node, found[1], found[2], found[3]) if found is not None else None
    kind = _FUNCTIONS[grammar].get(node.type) or _TYPES[grammar].get(node.type)
    name = _own_name(node) if kind is not None else None
    if kind is None or name is None:
        return None
    return node, kind, name, node


def definitions_around(root: Node, grammar: str, first: int, last: int) -> list[Definition]:
    """The definitions enclosing lines `first`..`last` (1-based) in a parsed file, outermost first."""
    chain: list[Definition] = []
    counted: Node | None = None  # a decorated definition's own node, already counted with its decorators
    node = root
    while True:
        child = next(
            (
                c
                for c in node.children
                if c.start_point.row <= first - 1 and _end_row(c) >= last - 1 and c.end_byte > c.start_byte
            ),
            None,
        )
        if child is None:
            return chain
        node = child
        found = _definition_of(child, grammar) if child != counted else None
        if found is None:
            continue
        span, kind, name, counted = found
        if kind == "function" and chain and chain[-1].kind in _METHOD_HOLDERS:
            kind = "method"
        qualified = f"{chain[-1].name}.{name}" if chain else name
        chain.append(Definition(kind, qualified, span.start_point.row + 1, _end_row(span) + 1))


_METHOD_HOLDERS = frozenset({"class", "impl", "trait", "interface"})


def enclosing_definition(path: str, source: str, first: int, last: int) -> Definition | None:
    """The innermost function, method, class or type of a head file around lines `first`..`last`;
    None without a grammar for the file, when it does not parse, or at the top level."""
    grammar = grammar_for(path)
    if grammar is None:
        return None
    tree = parse_tree(grammar, source)
    if tree.root_node.has_error:
        return None
    chain = definitions_around(tree.root_node, grammar, first, last)
    return chain[-1] if chain else None


# -- the blocks of a file ---------------------------------------------------------------------------


@dataclass
class _Group:
    """The hunks shown in one block: those inside one definition (None: a hunk shown as it is)."""

    definition: Definition | None
    hunks: list[Hunk] = field(default_factory=list)


def _changed(hunk: Hunk) -> tuple[int, int]:
    """The lines a hunk changes, whose definition it belongs to: its added lines, or for a deletion
    the lines either side of where it was (so a deletion at a definition's edge is not inside it)."""
    added = hunk.added
    if added:
        return min(added), max(added)
    return max(1, hunk.removed_after), hunk.removed_after + 1


def _span(hunk: Hunk) -> tuple[int, int]:
    """The new-side lines a hunk shows (the line a deletion followed, for one that adds none)."""
    if hunk.new:
        return hunk.new[0][0], hunk.new[-1][0]
    return hunk.removed_after, hunk.removed_after


def _matches(hunks: list[Hunk], lines: list[str]) -> bool:
    """Whether the head's text is the new side the patch describes (else its lines would be mislabelled)."""
    return all(0 < n <= len(lines) and lines[n - 1] == text for hunk in hunks for n, _, text in hunk.new)


def _definitions(path: str, source: str | None, hunks: list[Hunk]) -> list[Definition | None]:
    """Each hunk's innermost enclosing definition, or None (for all of them when the file cannot be
    read as code: no grammar, no source, a parse error, a head other than the patch's)."""
    grammar = grammar_for(path)
    if grammar is None or source is None or not _matches(hunks, source.split("\n")):
        return [None] * len(hunks)
    tree = parse_tree(grammar, source)
    if tree.root_node.has_error:
        return [None] * len(hunks)
    found: list[Definition | None] = []
    for hunk in hunks:
        chain = definitions_around(tree.root_node, grammar, *_changed(hunk))
        found.append(chain[-1] if chain else None)
    return found


def _groups(hunks: list[Hunk], definitions: list[Definition | None]) -> list[_Group]:
    """Hunks grouped by definition, in the file's order; a definition inside another one that has a
    hunk of its own joins the outer one's block, so no line is shown twice."""
    by_span: dict[tuple[int, int], _Group] = {}
    loose: list[_Group] = []
    for hunk, definition in zip(hunks, definitions, strict=True):
        if definition is None:
            loose.append(_Group(None, [hunk]))
        else:
            by_span.setdefault((definition.start, definition.end), _Group(definition)).hunks.append(hunk)
    merged: list[_Group] = []
    for group in sorted(by_span.values(), key=lambda g: (_start(g), -_end(g))):
        outer = next((m for m in merged if _start(m) <= _start(group) and _end(group) <= _end(m)), None)
        if outer is None:
            merged.append(group)
        else:
            outer.hunks = sorted([*outer.hunks, *group.hunks], key=lambda h: h.new_start)
    return sorted([*merged, *loose], key=lambda g: _span(g.hunks[0]))


def _start(group: _Group) -> int:
    assert group.definition is not None
    return group.definition.start


def _end(group: _Group) -> int:
    assert group.definition is not None
    return group.definition.end


def _runs(numbers: list[int]) -> list[tuple[int, int]]:
    """Sorted numbers as (first, last) runs of consecutive ones."""
    runs: list[tuple[int, int]] = []
    for n in numbers:
        if runs and runs[-1][1] == n - 1:
            runs[-1] = (runs[-1][0], n)
        else:
            runs.append((n, n))
    return runs


def _spans_text(runs: list[tuple[int, int]]) -> str:
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def _render(definition: Definition, hunks: list[Hunk], lines: list[str]) -> Block:
    """The definition's lines numbered as a hunk's, its hunks' removed lines apart; a long one cut to
    its first line and a window around each hunk, sized so the block stays near `MAX_BLOCK_LINES`."""
    spans = [_span(h) for h in hunks]
    low = min(definition.start, *(a for a, _ in spans))
    high = max(definition.end, *(b for _, b in spans))
    shown = list(range(low, high + 1))
    if len(shown) > MAX_BLOCK_LINES:
        used = sum(b - a + 1 for a, b in spans)
        margin = max(MIN_MARGIN, (MAX_BLOCK_LINES - used) // (2 * len(spans)))
        keep = {definition.start}
        for a, b in spans:
            keep.update(range(max(low, a - margin), min(high, b + margin) + 1))
        shown = sorted(keep)
    runs = _runs(shown)
    added = {n for hunk in hunks for n in hunk.added}
    diff = _spans_text(_runs(sorted({n for hunk in hunks for n, _, _ in hunk.new})))
    where = f"lines {definition.start}-{definition.end}"
    if len(runs) > 1 or runs[0] != (low, high):
        where += f"; shown: {_spans_text(runs)}"
    refs = " ".join(f"@@ -{h.old_start} +{h.new_start} @@" for h in hunks)
    out = [f"{refs} in {definition.kind} `{definition.name}` ({where}; the diff: {diff})"]
    width = len(str(high))
    removed = removed_by_line(hunks)
    for index, (a, b) in enumerate(runs):
        if index:
            out.append(f"{'':>{width}} ... (lines {runs[index - 1][1] + 1}-{a - 1} not shown)")
        rows = [(n, "+" if n in added else " ", lines[n - 1]) for n in range(a, b + 1)]
        out += numbered_rows(rows, removed, width)
    return Block("\n".join(out), low, high)


def hunk_blocks(item: PullFile) -> list[Block]:
    """The blocks of a changed file with a patch, unfocused: each hunk as `format_hunk` shows it."""
    return [Block("\n".join(format_hunk(hunk)), *_span(hunk)) for hunk in parse_hunks(item.patch or "")]


def focused_hunks(item: PullFile, source: str | None) -> list[Block]:
    """The blocks of a changed file with a patch: each hunk inside its enclosing definition, hunks
    of one definition together, in the file's order. `source`: the file's text at the head."""
    hunks = parse_hunks(item.patch or "")
    lines = (source or "").split("\n")
    blocks: list[Block] = []
    for group in _groups(hunks, _definitions(item.filename, source, hunks)):
        if group.definition is None:
            hunk = group.hunks[0]
            blocks.append(Block("\n".join(format_hunk(hunk)), *_span(hunk)))
        else:
            blocks.append(_render(group.definition, group.hunks, lines))
    return blocks


def focused_blocks(item: PullFile, source: str | None) -> list[str]:
    """A file's section as focused blocks: its heading (as `file_heading`), then one block per
    definition with hunks in it, or per hunk where there is none. A file without a patch is shown
    as `format_file` shows it."""
    if not (item.patch or "").strip():
        heading, _, note = format_file(item).partition("\n")
        return [heading, note]
    return [file_heading(item), *(block.text for block in focused_hunks(item, source))]
