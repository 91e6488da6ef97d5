"""Every relative link and `#anchor` in README.md, docs/*.md and bench/*.md lands on a real file and heading.

The reference moved out of the README into docs/ pages that link to each other; a renamed heading or
page would otherwise leave a newcomer at a dead link. Anchors follow GitHub's rule for heading ids.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"

FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.M | re.S)
CODE_SPAN = re.compile(r"(`+)(?!`).*?(?<!`)\1(?!`)", re.S)
# [text](target) and ![alt](target), text may hold one level of brackets; an optional "title".
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_LINK = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+\"[^\"]*\")?\s*$", re.M)
HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$", re.M)
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted(DOCS.glob("*.md")), *sorted((ROOT / "bench").glob("*.md"))]


def prose(text: str) -> str:
    """The text outside fenced code blocks: a `# comment` in a YAML example is not a heading."""
    return FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)


def slug(heading: str) -> str:
    """GitHub's heading id: the rendered text, lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = text.replace("`", "")
    text = re.sub(r"(\*\*|__|\*)(.+?)\1", r"\2", text)
    text = re.sub(r"<[^>]+>", "", text).strip().lower()
    text = "".join(c for c in text if c.isalnum() or c in " -_")
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading id of a Markdown file, repeated headings numbered -1, -2 as GitHub does."""
    seen: dict[str, int] = {}
    found = set()
    for match in HEADING.finditer(prose(path.read_text(encoding="utf-8"))):
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(path: Path) -> list[str]:
    text = CODE_SPAN.sub("", prose(path.read_text(encoding="utf-8")))
    return [m.group(1) for m in (*INLINE_LINK.finditer(text), *REFERENCE_LINK.finditer(text))]


def broken_links(path: Path, root: Path) -> list[str]:
    """What is wrong with the relative links of one page: a missing file, or an anchor with no heading."""
    problems = []
    root, path = root.resolve(), path.resolve()
    for target in links(path):
        if SCHEME.match(target) or target.startswith("//"):
            continue  # an absolute URL: not ours to check offline
        file_part, _, anchor = target.partition("#")
        destination = (path.parent / file_part).resolve() if file_part else path
        where = f"{path.relative_to(root)}: {target}"
        if root not in destination.parents and destination != root:
            problems.append(f"{where} leaves the repository")
        elif not destination.exists():
            problems.append(f"{where}: no file {file_part}")
        elif anchor and destination.suffix == ".md" and anchor not in anchors(destination):
            problems.append(f"{where}: no heading #{anchor} in {destination.relative_to(root)}")
    return problems


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_and_anchor_resolves(page: Path) -> None:
    assert links(page), f"{page.name} links nowhere"
    assert broken_links(page, ROOT) == []


def test_the_readme_links_every_docs_page() -> None:
    readme = {Path(t.partition("#")[0]) for t in links(ROOT / "README.md")}
    listed = {Path("docs") / page.name for page in DOCS.glob("*.md")}
    assert listed, "no docs/ pages"
    assert sorted(map(str, listed - readme)) == []


def test_every_docs_page_links_back_to_the_readme() -> None:
    for page in DOCS.glob("*.md"):
        assert "../README.md" in {t.partition("#")[0] for t in links(page)}, page.name


@pytest.mark.parametrize(
    ("heading", "expected"),
    [
        ("Per-repository config (`.github/beam.yml`)", "per-repository-config-githubbeamyml"),
        ("`beam-bot run`: a skill on a local checkout", "beam-bot-run-a-skill-on-a-local-checkout"),
        ("Logs, metrics, health", "logs-metrics-health"),
        ("The framework (`bot.beam`)", "the-framework-botbeam"),
        ("Held pushes (`/beam author`, `docs`, `update`)", "held-pushes-beam-author-docs-update"),
        ("See [the guide](guide.md) **now**", "see-the-guide-now"),
        ("snake_case stays", "snake_case-stays"),
    ],
)
def test_slugs_follow_github(heading: str, expected: str) -> None:
    assert slug(heading) == expected


def test_the_checker_finds_a_missing_file_a_missing_anchor_and_ignores_code(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A page\n\n## Same\n\n## Same\n", encoding="utf-8")
    page = tmp_path / "README.md"
    page.write_text(
        "# Top\n\n"
        "[ok](docs/a.md#a-page) [twice](docs/a.md#same-1) [self](#top) [web](https://example.org/x#y)\n"
        "[gone](docs/missing.md) [no anchor](docs/a.md#nope) [no local](#nowhere) [up](../outside.md)\n"
        "`[in code](docs/nothing.md)`\n\n"
        "```markdown\n[in a block](docs/nothing.md)\n# not a heading\n```\n\n"
        "[ref]: docs/a.md#same\n[bad ref]: docs/b.md\n",
        encoding="utf-8",
    )
    assert broken_links(page, tmp_path) == [
        "README.md: docs/missing.md: no file docs/missing.md",
        "README.md: docs/a.md#nope: no heading #nope in docs/a.md",
        "README.md: #nowhere: no heading #nowhere in README.md",
        "README.md: ../outside.md leaves the repository",
        "README.md: docs/b.md: no file docs/b.md",
    ]
    assert "not-a-heading" not in anchors(page)
