"""The grammars of context/grammars.py: each extension's grammar parses real code of its language, and
each thread gets parsers of its own (one tree-sitter parser must not run two parses at once)."""

from __future__ import annotations

import threading

import pytest

from bot.app.context.grammars import GRAMMAR_BY_EXTENSION, GRAMMARS, grammar_for, parse_tree, parser

SNIPPETS = {
    "python": "def f(x):\n    return x + 1\n",
    "javascript": "export const f = (x) => <b>{x + 1}</b>;\n",
    "typescript": "export function f(x: number): number {\n  return x + 1;\n}\n",
    "tsx": "export const f = (x: number) => <b>{x + 1}</b>;\n",
    "go": "package p\n\nfunc F(x int) int {\n\treturn x + 1\n}\n",
    "rust": "pub fn f(x: i32) -> i32 {\n    x + 1\n}\n",
}


@pytest.mark.parametrize("extension", sorted(GRAMMAR_BY_EXTENSION))
def test_every_extension_has_a_grammar_that_parses_its_language(extension: str) -> None:
    grammar = grammar_for(f"src/x{extension}")
    assert grammar in GRAMMARS
    tree = parse_tree(grammar, SNIPPETS[grammar])
    assert not tree.root_node.has_error and tree.root_node.end_point.row == SNIPPETS[grammar].count("\n")


def test_a_wrong_language_does_not_parse_and_an_unknown_extension_has_no_grammar() -> None:
    assert parse_tree("go", SNIPPETS["rust"]).root_node.has_error
    assert parse_tree("python", SNIPPETS["typescript"]).root_node.has_error
    assert grammar_for("lib/x.RS") == "rust" and grammar_for("a/b.pyi") == "python"
    assert grammar_for("x.rb") is None and grammar_for("Makefile") is None and grammar_for("x.py.txt") is None


def test_each_thread_has_its_own_parser_of_a_grammar() -> None:
    here = parser("rust")
    assert parser("rust") is here and parser("go") is not here
    there: list[object] = []
    worker = threading.Thread(target=lambda: there.append(parser("rust")))
    worker.start()
    worker.join(timeout=10)
    assert len(there) == 1 and there[0] is not here
