"""The one path matcher (bot/beam/globs.py): one table for the translator, and its two readers.

The rows marked `git` are taken from git's own wildmatch tests, t/t3070-wildmatch.sh
(https://github.com/git/git/blob/master/t/t3070-wildmatch.sh), first column (case-sensitive
`wildmatch` with `WM_PATHNAME`, the rules of `.gitignore` and `--glob-pathspecs`): the pattern, the
text, and git's answer. The others are ours: what a repository rule adds on top (anchoring, a trailing
`/`, what lies below a matched directory, case) and the issue 28 attack (`secret[12].txt`).
"""

from __future__ import annotations

import pytest

from bot.beam.globs import PathGlobs, compile_glob, glob_problem

# (pattern, text, matches) from git's t3070-wildmatch.sh
WILDMATCH = [
    ("???", "foo", True),
    ("??", "foo", False),
    ("*f", "foo", False),
    ("*ob*a*r*", "foobar", True),
    ("foo\\*", "foo*", True),  # `\*` is a literal star
    ("foo\\*bar", "foobar", False),
    ("*[al]?", "ball", True),
    ("[ten]", "ten", False),
    ("**[!te]", "ten", True),
    ("t[a-g]n", "ten", True),
    ("t[!a-g]n", "ten", False),
    ("t[!a-g]n", "ton", True),
    ("t[^a-g]n", "ton", True),
    ("a[]]b", "a]b", True),
    ("a[]-]b", "a-b", True),
    ("a[]-]b", "aab", False),
    ("foo*bar", "foo/baz/bar", False),  # `*` does not cross `/`
    ("foo**bar", "foo/baz/bar", False),  # `**` inside a component is a `*`
    ("foo**bar", "foobazbar", True),
    ("foo/**/bar", "foo/baz/bar", True),
    ("foo/**/bar", "foo/bar", True),  # `a/**/b` matches `a/b`
    ("foo/**/**/bar", "foo/b/a/z/bar", True),
    ("foo?bar", "foo/bar", False),
    ("foo[/]bar", "foo/bar", False),  # a class never matches `/`
    ("foo[^a-z]bar", "foo/bar", False),
    ("**/foo", "foo", True),  # `**/` at the start matches the root too
    ("**/foo", "bar/baz/foo", True),
    ("*/foo", "bar/baz/foo", False),
    ("**/bar*", "foo/bar/baz", False),
    ("**/bar/*", "deep/foo/bar/baz", True),
    ("**/bar/**", "deep/foo/bar/baz/", True),  # `/**` at the end: anything inside
    ("**/bar/*", "deep/foo/bar", False),
    ("*/bar/**", "foo/bar/baz/x", True),
    ("*/bar/**", "deep/foo/bar/baz/x", False),
    ("a[c-c]rt", "acrt", True),
    ("[!]-]", "]", False),
    ("\\[ab]", "[ab]", True),
    ("[[]ab]", "[ab]", True),
    ("[[:]ab]", "[ab]", True),
    ("[[:digit]ab]", "[ab]", True),
    ("\\??\\?b", "?a?b", True),
    ("**/t[o]", "foo/bar/baz/to", True),
    ("[[:alpha:]][[:digit:]][[:upper:]]", "a1B", True),
    ("[[:digit:][:upper:][:space:]]", "a", False),
    ("[[:digit:][:punct:][:space:]]", ".", True),
    ("[a-c[:digit:]x-z]", "q", False),
    ("[\\\\-^]", "]", True),
    ("[\\]]", "]", True),
    ("[--A]", "5", True),
    ("[a-e-n]", "-", True),
    ("[]-a]", "^", True),
    ("[!]-a]", "^", False),
    ("[Z-y]", "Z", True),
    ("[B-a]", "A", False),
    ("[\\1-\\3]", "4", False),
    ("[[-\\]]", "-", False),
    ("**/*a*b*g*n*t", "abcd/abcdefg/abcdefghijk/abcdefghijklmnop.txtz", False),
    ("*/*/*", "foo/bb/aa/rr", False),
    ("**/**/**", "foo/bb/aa/rr", True),
    ("*X*i", "ab/cXd/efXg/hi", False),
    ("**/*X*/**/*i", "ab/cXd/efXg/hi", True),
    ("foo/*", "foo/bba/arr", False),
    ("foo/**", "foo/bba/arr", True),
    ("foo**", "foo/bba/arr", False),
    ("foo/**arr", "foo/bba/arr", False),
]

# Ours: dot-files, and what git's table has no row for.
OURS = [
    ("*", ".env", True),  # a leading dot is matched by `*`, as git does
    ("*.yml", ".github/workflows/ci.yml", False),
    ("**/*.yml", ".github/workflows/ci.yml", True),
    ("secret[12].txt", "secret1.txt", True),
    ("secret[12].txt", "secret3.txt", False),
    ("secret[12].txt", "secret[12].txt", False),
]


@pytest.mark.parametrize(("pattern", "text", "expected"), WILDMATCH + OURS)
def test_the_translator_agrees_with_git(pattern: str, text: str, expected: bool) -> None:
    assert (compile_glob(pattern).fullmatch(text) is not None) is expected


# (patterns, path, blocked?) as a rule reads them: blocked_paths, path instructions, ignored paths.
RULES = [
    (["secret[12].txt"], "secret1.txt", True),  # the attack of issue 28
    (["secrets/"], "secrets/deploy/key.pem", True),  # a trailing `/`: everything under it
    (["secrets"], "secrets/key.pem", True),  # a directory covers what is below it
    (["secrets/**"], "secrets", True),  # and `dir/**` the directory's own name too
    (["/config/*.yml"], "config/prod.yml", True),  # a leading `/` anchors at the root, as it is
    (["config/*.yml"], "app/config/prod.yml", False),  # anchored: not at any depth
    (["./setup.py"], "setup.py", True),
    ([".github/workflows/**"], ".GitHub/Workflows/ci.yml", True),  # case-insensitive on purpose
    (["*.pem"], "keys/a.pem", False),
    (["**/*.pem"], "keys/a.pem", True),
    (["docs/**"], "docs/../setup.py", False),  # `..` is resolved before matching
    (["src/*"], "src\\evil.py", True),  # a backslash is read as Windows reads it too
]


@pytest.mark.parametrize(("patterns", "path", "expected"), RULES)
def test_a_rule_reads_the_path_as_the_repository_means_it(
    patterns: list[str], path: str, expected: bool
) -> None:
    assert PathGlobs(patterns).matches(path) is expected


def test_an_allow_list_covers_a_directory_only_when_it_says_so() -> None:
    allowed = PathGlobs(["docs/**", "**/*.md", "conf/"], below=False)
    assert allowed.matches_all_readings("docs/a/b.txt") and allowed.matches_all_readings("conf/x")
    assert allowed.matches_all_readings("README.md")
    assert not allowed.matches_all_readings("notes.md/evil.py")
    assert not allowed.matches_all_readings("docs\\..\\setup.py")  # both readings must be allowed


@pytest.mark.parametrize(
    ("pattern", "problem"),
    [("ab[", "unclosed"), ("[[:spaci:]]", "unknown class"), ("a\\", "trailing"), ("  ", "empty")],
)
def test_patterns_git_refuses_are_config_errors(pattern: str, problem: str) -> None:
    found = glob_problem(pattern)
    assert found is not None and problem in found
    assert not PathGlobs([pattern]).matches("ab[")  # and they match nothing meanwhile
