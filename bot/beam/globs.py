"""Path globs: the one translator every path rule uses, and the two ways a rule reads a path.

One translator (`translate`) serves the sandbox's blocked and allowed paths, the repository's
`blocked_paths`, `review.path_instructions`, `auto_review.paths` and `ignore_paths`, `docs.paths`, and
the `.gitattributes` rules of a review's prompt. It follows git's wildmatch with `WM_PATHNAME` (the
rules of `.gitignore` and `--glob-pathspecs`, tested against rows of git's t/t3070-wildmatch.sh):

- `*` and `?` never match `/`; `*` matches a leading dot, as git's does;
- `**` is special only as a whole path component: `**/x` (x at any depth, the root included),
  `a/**/b` (`a/b` too), `a/**` (everything inside `a`); anywhere else it is a plain `*`;
- `[...]` with ranges, `!` or `^` to negate, `]` first as a literal, POSIX classes (`[:digit:]`);
  a class never matches `/`;
- `\\x` is the character `x`.

Two readers sit on top (`PathGlobs`): a *rule* (blocked paths and every repository rule) is anchored at
the root, ignores a leading `/` or `./`, and also covers everything below a path it matches, so
`secrets/`, `secrets`, `secrets/**` all block `secrets/key.pem`; an *allow list* (`docs.paths`) covers
below a path only when the pattern says so (`dir/` or `dir/**`). Before this module there were three
translators, and the two that read `blocked_paths` disagreed on `[...]` (issue 28).
"""

from __future__ import annotations

import functools
import posixpath
import re
from collections.abc import Iterable

_POSIX_CLASSES = {
    "alnum": "a-zA-Z0-9",
    "alpha": "a-zA-Z",
    "blank": " \\t",
    "cntrl": "\\x00-\\x1f\\x7f",
    "digit": "0-9",
    "graph": "!-~",
    "lower": "a-z",
    "print": " -~",
    "punct": "!-/:-@\\[-`{-~",
    "space": " \\t\\n\\r\\f\\v",
    "upper": "A-Z",
    "xdigit": "0-9A-Fa-f",
}
_NEVER = "(?!)"


class GlobError(ValueError):
    """A pattern git would refuse (an unclosed `[`, an unknown `[:class:]`, a trailing `\\`)."""


def _class_char(char: str) -> str:
    # Every ASCII punctuation escaped: `&&`, `--`, `||`, `~~` in a class are set operations to come.
    return "\\" + char if char.isascii() and not char.isalnum() else char


def _bracket(pattern: str, start: int) -> tuple[str, int]:
    """The regex of the class at `pattern[start] == "["` and the index after its `]`.

    Follows git's wildmatch.c: `!` or `^` negates, a `]` right after the opening (or the negation) is
    literal, `\\` escapes, `a-z` is a range (an inverted range matches nothing), `[:name:]` is a POSIX
    class and `[:` without a closing `:]` is a literal `[`. Raises GlobError when there is no `]`.
    """
    i = start + 1
    n = len(pattern)
    negate = i < n and pattern[i] in "!^"
    if negate:
        i += 1
    members: list[str] = []
    first = True
    while True:
        if i >= n:
            raise GlobError("an unclosed `[`")
        char = pattern[i]
        if char == "]" and not first:
            break
        first = False
        if char == "\\":
            i += 1
            if i >= n:
                raise GlobError("an unclosed `[`")
            char = pattern[i]
        elif char == "[" and pattern.startswith("[:", i):
            close = pattern.find("]", i + 2)
            if close == -1:
                raise GlobError("an unclosed `[`")
            if close - 1 >= i + 2 and pattern[close - 1] == ":":
                name = pattern[i + 2 : close - 1]
                if name not in _POSIX_CLASSES:
                    raise GlobError(f"an unknown class `[:{name}:]`")
                members.append(_POSIX_CLASSES[name])
                i = close + 1
                continue
            # `[:` without `:]`: a plain `[`, as git reads it
        if i + 2 < n and pattern[i + 1] == "-" and pattern[i + 2] != "]":
            end_at = i + 2
            high = pattern[end_at]
            if high == "\\":
                end_at += 1
                if end_at >= n:
                    raise GlobError("an unclosed `[`")
                high = pattern[end_at]
            if char <= high:
                members.append(f"{_class_char(char)}-{_class_char(high)}")
            i = end_at + 1
            continue
        members.append(_class_char(char))
        i += 1
    body = "".join(members)
    if negate:
        return f"[^/{body}]", i + 1
    return (f"(?!/)[{body}]" if body else _NEVER), i + 1


def glob_problem(pattern: str) -> str | None:
    """Why a pattern is not a path glob (for the repository config's errors), or None."""
    if not pattern.strip() or "\x00" in pattern:
        return "an empty pattern" if "\x00" not in pattern else "a NUL character"
    try:
        translate(pattern)
    except GlobError as error:
        return str(error)
    return None


@functools.lru_cache(maxsize=1024)
def translate(pattern: str) -> str:
    """A regex (for `fullmatch`) of a wildmatch pattern with `WM_PATHNAME`; raises GlobError."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        char = pattern[i]
        if char == "*":
            j = i
            while j < n and pattern[j] == "*":
                j += 1
            whole = (i == 0 or pattern[i - 1] == "/") and (j == n or pattern[j] == "/")
            if j - i >= 2 and whole:
                if j < n:  # `**/`: any number of directories, none included
                    out.append("(?:.*/)?")
                    j += 1
                else:  # a final `**`: anything, inside the directory before it
                    out.append(".*")
            else:
                out.append("[^/]*")
            i = j
        elif char == "?":
            out.append("[^/]")
            i += 1
        elif char == "[":
            regex, i = _bracket(pattern, i)
            out.append(regex)
        elif char == "\\":
            if i + 1 >= n:
                raise GlobError("a trailing `\\`")
            out.append(re.escape(pattern[i + 1]))
            i += 2
        else:
            out.append(re.escape(char))
            i += 1
    return "".join(out)


def compile_glob(pattern: str, *, ignore_case: bool = False) -> re.Pattern[str]:
    """`translate`, compiled: `compile_glob(p).fullmatch(path)` is git's wildmatch of `path`."""
    return re.compile(translate(pattern), (re.IGNORECASE if ignore_case else 0) | re.DOTALL)


def _safe(pattern: str) -> str:
    """`translate`, or a regex that matches nothing for a pattern the config check refused."""
    try:
        return translate(pattern)
    except GlobError:
        return _NEVER


def normalize_path(path: str) -> str:
    """A repository path as the rules read it: `/`-separated, no `.`, `..` resolved, no leading `/`."""
    clean = posixpath.normpath("/" + path)
    return clean.lstrip("/")


class PathGlobs:
    """A set of repository path globs, anchored at the root (a leading `/` or `./` is ignored).

    `below=True` (a rule: blocked paths, path instructions, ignored paths): a pattern also covers
    everything below a path it matches. `below=False` (an allow list): only a pattern ending in `/`
    or `/**` covers a directory's contents; `**/*.md` does not open a directory named `notes.md/`.
    Case-insensitive by default: blocking `.GitHub/...` too is safe, missing it on a case-insensitive
    checkout is not. A path with a backslash is also read with `/` in its place (`a\\b` is `a/b` on
    Windows): a rule matches when either reading matches, an allow list needs both to.
    """

    def __init__(self, patterns: Iterable[str], *, below: bool = True, ignore_case: bool = True) -> None:
        self.patterns = tuple(p for p in patterns if p.strip().strip("/"))
        self.below = below
        parts = [self._regex(p) for p in self.patterns]
        flags = (re.IGNORECASE if ignore_case else 0) | re.DOTALL
        self._regex_all = re.compile("|".join(f"(?:{part})" for part in parts), flags) if parts else None

    def _regex(self, pattern: str) -> str:
        text = pattern.strip()
        while text.startswith("./"):
            text = text[2:]
        text = text.lstrip("/")
        directory = text.endswith("/") or text.endswith("/**")
        while text.endswith("/") or text.endswith("/**"):
            text = text.removesuffix("/").removesuffix("/**")
        if self.below:  # the path itself, and what is below it
            return f"{_safe(text)}(?:/.*)?"
        return f"{_safe(text)}/.+" if directory else _safe(text)

    def __bool__(self) -> bool:
        return self._regex_all is not None

    def _one(self, path: str) -> bool:
        clean = normalize_path(path)
        return bool(clean) and self._regex_all is not None and self._regex_all.fullmatch(clean) is not None

    def matches(self, path: str) -> bool:
        """Whether a root-relative path matches one of the globs (as a rule: either reading)."""
        if self._regex_all is None:
            return False
        return self._one(path) or ("\\" in path and self._one(path.replace("\\", "/")))

    def matches_all_readings(self, path: str) -> bool:
        """Whether the path matches however it is read (as an allow list: both readings)."""
        if self._regex_all is None:
            return False
        return self._one(path) and ("\\" not in path or self._one(path.replace("\\", "/")))
