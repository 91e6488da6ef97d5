"""Whether a file still parses once a suggestion is applied: a committable suggestion that breaks the
file's syntax is worse than none, since one click commits it.

Python is parsed with `ast`; JavaScript, TypeScript (and TSX) and Go with tree-sitter's maintained
grammar packages (loaded by context/grammars.py). Any other language has no parser here, so its
suggestions are not checked (and still offered). What counts is a change: a file that did not parse
before the suggestion does not make the suggestion wrong.
"""

from __future__ import annotations

import ast
import posixpath
import warnings
from collections.abc import Callable

from bot.app.context.grammars import GRAMMAR_BY_EXTENSION, parse_tree

Check = Callable[[str], bool]


def _python(text: str) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # SyntaxWarning for odd escapes is not a failure
            ast.parse(text)
    except (SyntaxError, ValueError):
        return False
    return True


def _tree_sitter(grammar: str) -> Check:
    def check(text: str) -> bool:
        return not parse_tree(grammar, text).root_node.has_error

    return check


# Python is left to `ast` (what the interpreter accepts, not a grammar's approximation of it). Rust's
# grammar came for focused passes (context/focus.py); its suggestions stay unchecked until tests cover them.
_TREE_SITTER = ("javascript", "typescript", "tsx", "go")
_BY_EXTENSION: dict[str, Check] = {
    ext: _python if grammar == "python" else _tree_sitter(grammar)
    for ext, grammar in GRAMMAR_BY_EXTENSION.items()
    if grammar == "python" or grammar in _TREE_SITTER
}


def parser_for(path: str) -> Check | None:
    return _BY_EXTENSION.get(posixpath.splitext(path)[1].lower())


def breaks_parse(path: str, before: str, after: str) -> bool:
    """True when the file parsed before and does not after; False also when no parser is known."""
    check = parser_for(path)
    return check is not None and check(before) and not check(after)
