"""Whether a file still parses once a suggestion is applied: a committable suggestion that breaks the
file's syntax is worse than none, since one click commits it.

Python is parsed with `ast`; JavaScript, TypeScript (and TSX) and Go with tree-sitter's maintained
grammar packages. Any other language has no parser here, so its suggestions are not checked (and
still offered). What counts is a change: a file that did not parse before the suggestion does not
make the suggestion wrong.
"""

from __future__ import annotations

import ast
import functools
import posixpath
import warnings
from collections.abc import Callable

from tree_sitter import Language, Parser

Check = Callable[[str], bool]


def _python(text: str) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # SyntaxWarning for odd escapes is not a failure
            ast.parse(text)
    except (SyntaxError, ValueError):
        return False
    return True


@functools.cache
def _parser(grammar: str) -> Parser:
    if grammar == "javascript":
        import tree_sitter_javascript as module

        return Parser(Language(module.language()))
    if grammar == "go":
        import tree_sitter_go as go

        return Parser(Language(go.language()))
    import tree_sitter_typescript as ts

    return Parser(Language(ts.language_tsx() if grammar == "tsx" else ts.language_typescript()))


def _tree_sitter(grammar: str) -> Check:
    def check(text: str) -> bool:
        tree = _parser(grammar).parse(text.encode("utf-8", "surrogatepass"))
        return not tree.root_node.has_error

    return check


_BY_EXTENSION: dict[str, Check] = {
    ".py": _python,
    ".pyi": _python,
    ".js": _tree_sitter("javascript"),
    ".mjs": _tree_sitter("javascript"),
    ".cjs": _tree_sitter("javascript"),
    ".jsx": _tree_sitter("javascript"),
    ".ts": _tree_sitter("typescript"),
    ".mts": _tree_sitter("typescript"),
    ".cts": _tree_sitter("typescript"),
    ".tsx": _tree_sitter("tsx"),
    ".go": _tree_sitter("go"),
}


def parser_for(path: str) -> Check | None:
    return _BY_EXTENSION.get(posixpath.splitext(path)[1].lower())


def breaks_parse(path: str, before: str, after: str) -> bool:
    """True when the file parsed before and does not after; False also when no parser is known."""
    check = parser_for(path)
    return check is not None and check(before) and not check(after)
