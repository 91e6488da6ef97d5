"""Which files of a pull request a review's model reads, in which call, within a token budget; decided
without I/O.

Files go by importance (source, then tests, then other files, then docs); lock files, generated and
vendored files are never read, and are named. Files are packed into at most `max_calls` calls of
`tokens_per_call` each; what still does not fit is named too, so the summary can say it was not read.

Tokens are a calibrated estimate, not a tokenizer: the server may run any model, and no tokenizer of
every model works offline. `CHARS_PER_TOKEN` was measured with Qwen2.5-Coder's tokenizer (llama.cpp's
`POST /tokenize`): 3.35 to 3.50 characters a token on numbered Python diffs, 3.96 on Markdown, 4.16
on JSON (tests/data/token_calibration.json); 3.0 errs on the high side. A character outside ASCII
counts as a whole token (CJK text is about one token a character).
"""

from __future__ import annotations

import math
import posixpath
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from bot.app.github.models import PullFile
from bot.beam.globs import GlobError, translate

CHARS_PER_TOKEN = 3.0

Rank = Literal["source", "tests", "other", "docs"]
RANKS: tuple[Rank, ...] = ("source", "tests", "other", "docs")

_SOURCE = """.py .pyi .js .jsx .mjs .cjs .ts .tsx .go .rs .java .kt .kts .scala .c .h .cc .cpp .cxx
.hpp .cs .rb .php .swift .m .mm .sh .bash .zsh .lua .pl .r .jl .ex .exs .erl .hs .ml .clj .dart .vue .svelte
.sql .zig .nim .groovy .ps1"""
SOURCE_EXTENSIONS = frozenset(_SOURCE.split())
DOC_EXTENSIONS = frozenset({".md", ".markdown", ".rst", ".txt", ".adoc", ".asciidoc", ".org", ".tex"})
DOC_NAMES = frozenset({"license", "licence", "copying", "authors", "changelog", "changes", "notice"})

LOCK_NAMES = frozenset(
    {
        "package-lock.json",
        "npm-shrinkwrap.json",
        "pnpm-lock.yaml",
        "bun.lockb",
        "go.sum",
        "packages.lock.json",
        "gemfile.lock",
        "pipfile.lock",
    }
)
_GENERATED = re.compile(
    r"(\.min\.(js|css)|\.js\.map|\.css\.map|_pb2(_grpc)?\.pyi?|\.pb\.(go|cc|h)|\.pb\.gw\.go"
    r"|\.generated\.\w+|\.g\.dart|\.designer\.cs|_generated\.go)$",
    re.IGNORECASE,
)
_VENDORED_DIRS = frozenset({"vendor", "node_modules", "third_party", "bower_components", ".yarn"})


def estimate_tokens(text: str) -> int:
    ascii_chars = len(text.encode("ascii", "ignore"))
    return math.ceil(ascii_chars / CHARS_PER_TOKEN) + (len(text) - ascii_chars)


# -- .gitattributes -----------------------------------------------------------------------------


@dataclass(frozen=True)
class AttrRule:
    pattern: re.Pattern[str]
    attrs: dict[str, bool | None]  # True: set, False: unset (`-attr`, `attr=false`), None: `!attr`


def _glob(pattern: str) -> re.Pattern[str]:
    """A gitattributes pattern (gitignore's rules, without negation) as a regex on the whole path,
    by the one path translator (bot/beam/globs.py). As git does, a pattern without a `/` matches a
    name at any depth, and a pattern naming a directory (`dir/`) matches no file inside it: `dir/**`
    does. A pattern git refuses matches nothing."""
    if pattern.endswith("/"):
        return re.compile(r"(?!)")
    anchored = "/" in pattern
    try:
        body = translate(pattern.lstrip("/"))
    except GlobError:
        return re.compile(r"(?!)")
    return re.compile(("" if anchored else "(?:.*/)?") + body + "$", re.DOTALL)


def parse_gitattributes(text: str | None) -> list[AttrRule]:
    """The linguist rules of a repository's top `.gitattributes` (other attributes are ignored)."""
    rules: list[AttrRule] = []
    for raw in (text or "").splitlines()[:5000]:
        line = raw.strip()
        if not line or line.startswith("#") or line.startswith("[attr]"):
            continue
        pattern, *tokens = line.split()
        attrs: dict[str, bool | None] = {}
        for token in tokens:
            name, _, value = token.partition("=")
            if name.startswith("-"):
                attrs[name[1:]] = False
            elif name.startswith("!"):
                attrs[name[1:]] = None
            else:
                attrs[name] = value.lower() not in {"false", "0"} if value else True
        if any(key.startswith("linguist-") for key in attrs):
            rules.append(AttrRule(_glob(pattern), attrs))
    return rules


def linguist(path: str, rules: Sequence[AttrRule], attr: str) -> bool | None:
    """The last rule that names `attr` for `path` wins, as in git; None when none does."""
    value: bool | None = None
    for rule in rules:
        if attr in rule.attrs and rule.pattern.match(path):
            value = rule.attrs[attr]
    return value


# -- what a file is -------------------------------------------------------------------------------


def skip_reason(path: str, rules: Sequence[AttrRule] = ()) -> str | None:
    """Why a file is never put in the prompt (a lock, generated or vendored file), or None."""
    name = posixpath.basename(path).lower()
    generated, vendored = (
        linguist(path, rules, "linguist-generated"),
        linguist(path, rules, "linguist-vendored"),
    )
    if generated:
        return "generated"
    if vendored:
        return "vendored"
    if name in LOCK_NAMES or name.endswith(".lock"):
        return "lock file"
    if generated is None and _GENERATED.search(name):
        return "generated"
    if vendored is None and any(part in _VENDORED_DIRS for part in path.split("/")[:-1]):
        return "vendored"
    return None


def rank_of(path: str, rules: Sequence[AttrRule] = ()) -> Rank:
    lower = path.lower()
    name = posixpath.basename(lower)
    stem, ext = posixpath.splitext(name)
    parts = lower.split("/")[:-1]
    if linguist(path, rules, "linguist-documentation") or ext in DOC_EXTENSIONS or stem in DOC_NAMES:
        return "docs"
    if parts and parts[0] in {"docs", "doc", "documentation"}:
        return "docs"
    if (
        any(part in {"test", "tests", "spec", "specs", "__tests__", "testdata"} for part in parts)
        or stem.startswith("test_")
        or stem.endswith(("_test", ".test", ".spec", "_spec"))
        or name == "conftest.py"
    ):
        return "tests"
    return "source" if ext in SOURCE_EXTENSIONS else "other"


# -- the plan -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Section:
    """One file's text in the prompt and its cost."""

    item: PullFile
    text: str
    tokens: int
    cut: bool = False  # only its first hunks fit
    part: int = 0  # which part of a file whose hunks were split across calls (1, 2, ...); 0: whole


@dataclass
class BudgetPlan:
    """The calls of one review: each a list of file sections; and what none of them reads, why."""

    chunks: list[list[Section]] = field(default_factory=list)
    left_out: list[tuple[str, str]] = field(default_factory=list)  # (path, reason)
    deleted: list[str] = field(default_factory=list)

    @property
    def cut(self) -> list[str]:
        return [s.item.filename for chunk in self.chunks for s in chunk if s.cut]


def ordered(files: Iterable[PullFile], rules: Sequence[AttrRule]) -> list[PullFile]:
    """Most important first; GitHub's order within a rank."""
    return sorted(files, key=lambda f: RANKS.index(rank_of(f.filename, rules)))


def _cut(section: Section, room: int, format_hunks: list[str]) -> Section | None:
    """The file's heading and as many whole hunks as fit in `room` tokens; None if not even one."""
    kept = [format_hunks[0]]
    for block in format_hunks[1:]:
        if estimate_tokens("\n".join([*kept, block, "(the rest of this file is not shown)"])) > room:
            break
        kept.append(block)
    if len(kept) == 1:
        return None
    text = "\n".join([*kept, "(the rest of this file is not shown)"])
    return replace(section, text=text, tokens=estimate_tokens(text), cut=True)


def plan_budget(
    sections: Sequence[tuple[Section, list[str]]],
    *,
    room: int,
    max_calls: int,
    skipped: Iterable[tuple[str, str]] = (),
    deleted: Iterable[str] = (),
) -> BudgetPlan:
    """Pack `sections` (in order: most important first) into at most `max_calls` chunks of `room`
    tokens each, first fit. `sections` pairs each file's section with its blocks (the heading, then
    one block per hunk), so a file larger than a whole call is read in part rather than not at all."""
    plan = BudgetPlan(left_out=list(skipped), deleted=list(deleted))
    loads: list[int] = []
    for section, blocks in sections:
        target = next((i for i, used in enumerate(loads) if used + section.tokens <= room), None)
        if target is None and len(loads) < max_calls:
            plan.chunks.append([])
            loads.append(0)
            target = len(loads) - 1 if section.tokens <= room else None
        if target is None:
            free = max(range(len(loads)), key=lambda i: room - loads[i], default=None)
            part = _cut(section, room - loads[free], blocks) if free is not None else None
            if part is None or free is None:
                plan.left_out.append((section.item.filename, "over the token budget"))
                continue
            section, target = part, free
        plan.chunks[target].append(section)
        loads[target] += section.tokens
    plan.chunks = [chunk for chunk in plan.chunks if chunk]
    return plan
