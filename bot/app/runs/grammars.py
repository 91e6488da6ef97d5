"""Which tree-sitter grammar parses a file, by its extension, and one parser per grammar.

Two readers of source code share it: a suggestion is checked to still parse
(reviews/suggestion_check.py), and a changed hunk is widened to its enclosing function or class
(runs/focus.py). Each grammar is a maintained package that ships its compiled parser (no build step);
a grammar is imported the first time a file of its language is read, so a review of Go files never
loads the Rust grammar.
"""

from __future__ import annotations

import functools
import posixpath
import threading
from collections.abc import Callable
from typing import Any

from tree_sitter import Language, Parser, Tree

GRAMMAR_BY_EXTENSION: dict[str, str] = {
    ".py": "python",
    ".pyi": "python",
    ".js": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".jsx": "javascript",
    ".ts": "typescript",
    ".mts": "typescript",
    ".cts": "typescript",
    ".tsx": "tsx",
    ".go": "go",
    ".rs": "rust",
}


def _python() -> Any:
    import tree_sitter_python

    return tree_sitter_python.language()


def _javascript() -> Any:
    import tree_sitter_javascript

    return tree_sitter_javascript.language()


def _typescript() -> Any:
    import tree_sitter_typescript

    return tree_sitter_typescript.language_typescript()


def _tsx() -> Any:
    import tree_sitter_typescript

    return tree_sitter_typescript.language_tsx()


def _go() -> Any:
    import tree_sitter_go

    return tree_sitter_go.language()


def _rust() -> Any:
    import tree_sitter_rust

    return tree_sitter_rust.language()


_LANGUAGES: dict[str, Callable[[], Any]] = {
    "python": _python,
    "javascript": _javascript,
    "typescript": _typescript,
    "tsx": _tsx,
    "go": _go,
    "rust": _rust,
}
GRAMMARS = frozenset(_LANGUAGES)


def grammar_for(path: str) -> str | None:
    """The grammar of a file by its extension (case does not matter), or None when none is known."""
    return GRAMMAR_BY_EXTENSION.get(posixpath.splitext(path)[1].lower())


@functools.cache
def language(grammar: str) -> Language:
    """The compiled grammar `grammar` (a name in `GRAMMARS`), loaded once per process."""
    return Language(_LANGUAGES[grammar]())


_local = threading.local()


def parser(grammar: str) -> Parser:
    """A parser of `grammar`, one per thread and grammar: callers parse in worker threads
    (`anyio.to_thread`), and one tree-sitter parser must not run two parses at once."""
    parsers: dict[str, Parser] = _local.__dict__.setdefault("parsers", {})
    if grammar not in parsers:
        parsers[grammar] = Parser(language(grammar))
    return parsers[grammar]


def parse_tree(grammar: str, text: str) -> Tree:
    """`text` parsed by `grammar`; the tree's rows are the text's lines, from 0."""
    return parser(grammar).parse(text.encode("utf-8", "surrogatepass"))
