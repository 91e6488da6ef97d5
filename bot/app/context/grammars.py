"""Which tree-sitter grammar parses a file, by its extension, and one parser per grammar.

Two readers of source code share it: a suggestion is checked to still parse
(reviews/suggestion_check.py), and a changed hunk is widened to its enclosing function or class
(context/focus.py). Each grammar is a maintained package that ships its compiled parser (no build step);
a grammar is imported the first time a file of its language is read, so a review of Go files never
loads the Rust grammar.
"""

from __future__ import annotations

import functools
import importlib
import posixpath
import threading

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


# grammar -> (the package that ships it, the function in it that returns the compiled language)
_LANGUAGES: dict[str, tuple[str, str]] = {
    "python": ("tree_sitter_python", "language"),
    "javascript": ("tree_sitter_javascript", "language"),
    "typescript": ("tree_sitter_typescript", "language_typescript"),
    "tsx": ("tree_sitter_typescript", "language_tsx"),
    "go": ("tree_sitter_go", "language"),
    "rust": ("tree_sitter_rust", "language"),
}
GRAMMARS = frozenset(_LANGUAGES)


def grammar_for(path: str) -> str | None:
    """The grammar of a file by its extension (case does not matter), or None when none is known."""
    return GRAMMAR_BY_EXTENSION.get(posixpath.splitext(path)[1].lower())


@functools.cache
def language(grammar: str) -> Language:
    """The compiled grammar `grammar` (a name in `GRAMMARS`), loaded once per process."""
    package, function = _LANGUAGES[grammar]
    return Language(getattr(importlib.import_module(package), function)())


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
