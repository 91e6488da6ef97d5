"""Pure decisions of the sandbox: which refs are protected, which paths are blocked, what `.git` is.

They live apart from the I/O so that every caller (checkout, push, write, stage, commit, and the
app's approval code) asks the same question the same way, and so they can be tested without a disk.
"""

from __future__ import annotations

from collections.abc import Iterable
from fnmatch import fnmatchcase

from bot.beam.globs import PathGlobs

_HEADS = "refs/heads/"
_GLOB_CHARS = frozenset("*?[")
# Characters HFS+ ignores in names and NTFS's trailing dots and spaces: git itself refuses `.git`
# spelled with them (core.protectHFS / core.protectNTFS), so we refuse them too.
_IGNORABLE = dict.fromkeys(
    [0x200C, 0x200D, 0x200E, 0x200F, 0x202A, 0x202B, 0x202C, 0x202D, 0x202E, 0xFEFF, *range(0x206A, 0x2070)]
)


def is_git_name(name: str) -> bool:
    """Whether a path component names a git directory or gitfile, in any spelling a filesystem folds."""
    if name.isascii():  # the common case, kept cheap: listings call this for every entry
        return name[:4].lower() == ".git" and not name[4:].strip(" .")
    return name.translate(_IGNORABLE).rstrip(" .").casefold() == ".git"


def strip_heads(name: str) -> str:
    """`refs/heads/x` → `x` (repeatedly, so `refs/heads/refs/heads/main` cannot hide `main`)."""
    while name.startswith(_HEADS):
        name = name[len(_HEADS) :]
    return name


def ref_branch_names(ref: str) -> list[str]:
    """Every branch name a ref spelling could touch: both sides of a refspec, without `+` or `refs/heads/`.

    `HEAD:main` → `["HEAD", "main"]`, `+refs/heads/main` → `["main"]`, `:main` → `["", "main"]`.
    """
    text = ref.strip()
    return [strip_heads(side.strip().lstrip("+").strip()) for side in text.split(":")]


def push_branch_name(ref: str) -> str:
    """The branch a push spelling names as its target (the right side of a refspec), for messages."""
    names = ref_branch_names(ref)
    return names[-1] or ref


def is_protected(ref: str, protected_refs: Iterable[str]) -> bool:
    """Whether `ref`, in any spelling, names a protected branch.

    Case-insensitive (`Main` is `main`: on a case-insensitive filesystem or server they collide),
    `refs/heads/` removed on both sides, every side of a refspec checked, and protected entries may
    be globs (`release/*`): branch names cannot contain glob characters, so no name is mistaken for one.
    """
    names = {name.casefold() for name in ref_branch_names(ref) if name}
    if not names:
        return False
    for entry in protected_refs:
        wanted = strip_heads(entry.strip()).casefold()
        if not wanted:
            continue
        if _GLOB_CHARS.isdisjoint(wanted):
            if wanted in names:
                return True
        elif any(fnmatchcase(name, wanted) for name in names):
            return True
    return False


class BlockedPaths:
    """Repository-configured globs (for example `.github/workflows/**`) that tools may not change.

    Read as a rule by the one path matcher (bot/beam/globs.py): a pattern matches the whole path
    relative to the root, or any directory above it, so `.github/workflows` and `.github/workflows/**`
    both block every file under that directory. Matching ignores case: over-blocking a path is safe,
    missing one because of its case is not.
    """

    def __init__(self, patterns: Iterable[str] = ()) -> None:
        self._globs = PathGlobs(patterns)
        self.patterns = self._globs.patterns

    def __bool__(self) -> bool:
        return bool(self._globs)

    def matches(self, rel_path: str) -> bool:
        """Whether a root-relative path with `/` separators is blocked."""
        return self._globs.matches(rel_path)

    def first_match(self, rel_paths: Iterable[str]) -> str | None:
        """The first blocked path among several, or None."""
        for path in rel_paths:
            if self.matches(path):
                return path
        return None


class AllowedPaths:
    """The complement of `BlockedPaths`: when set, tools may change only paths these globs match.

    Unlike a blocked pattern, an allowed one does not cover what lies below a path it matches
    (`**/*.md` must not open a directory named `notes.md/`); only a pattern ending in `/**` or `/`
    covers a whole directory. No patterns means no restriction.
    """

    def __init__(self, patterns: Iterable[str] | None = None) -> None:
        self._globs = PathGlobs(patterns or (), below=False)
        self.patterns = self._globs.patterns

    def __bool__(self) -> bool:
        return bool(self._globs)

    def permits(self, rel_path: str) -> bool:
        """Whether a root-relative path with `/` separators may be changed."""
        return not self._globs or self._globs.matches_all_readings(rel_path)

    def first_refused(self, rel_paths: Iterable[str]) -> str | None:
        """The first path among several that may not be changed, or None."""
        for path in rel_paths:
            if not self.permits(path):
                return path
        return None
