"""The findings ledger on a real database, and when a new finding is one it already has: claims
normalised, lines mapped with real git between two heads (an edit, an insertion, a force-push)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from bot.app.jobs.store import Store
from bot.app.reviews.ledger import FindingsLedger, Posted
from bot.app.reviews.matching import Anchor, LineMaps, claim_key, line_maps, same_finding

REPO = "o/r"


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, timeout=30
    ).stdout.strip()


def _commit(repo: Path, text: str, message: str) -> str:
    (repo / "a.py").write_text(text, encoding="utf-8")
    _git(repo, "add", "a.py")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", message)
    return _git(repo, "rev-parse", "HEAD")


LINES = [f"line{n} = {n}\n" for n in range(1, 31)]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    _git(tmp_path, "init", "-q", "-b", "main")
    return tmp_path


@pytest.mark.anyio
async def test_a_finding_leaves_open_once(store: Store) -> None:
    ledger = FindingsLedger(store)
    posted = Posted(101, "a.py", 5, "x = 1", "`x` is never used", "minor", "a" * 40)
    await ledger.record(REPO, 1, [posted, Posted(102, "a.py", 9, "y", "y", "major", "a" * 40)])
    await ledger.record(REPO, 1, [posted])  # a retry records nothing twice
    found = await ledger.of_pull(REPO, 1)
    assert [(f.comment_id, f.state) for f in found] == [(101, "open"), (102, "open")]
    first = await ledger.by_comment(REPO, 1, 101)
    assert first is not None
    assert await ledger.dismiss(first.id, "reaction", "maintainer")
    assert not await ledger.dismiss(first.id, "reply", "other")  # compare-and-set: once
    assert not await ledger.fix(first.id, "b" * 40)
    assert await ledger.fix(found[1].id, "b" * 40)
    assert await ledger.counts(REPO, 1) == {"open": 0, "fixed": 1, "dismissed": 1}
    assert await ledger.counts(REPO, 2) == {"open": 0, "fixed": 0, "dismissed": 0}
    dismissed = await ledger.by_comment(REPO, 1, 101)
    assert dismissed is not None and (dismissed.reason, dismissed.by) == ("reaction", "maintainer")


def test_claims_ignore_case_punctuation_numbers_and_quoted_code() -> None:
    assert claim_key("The timeout `timeout=10` is 10 s: too SHORT!") == claim_key(
        "the timeout `timeout = 30` is 30 s, too short."
    )
    assert claim_key('Use "utf-8" here') == claim_key("use 'latin-1' here")
    assert claim_key("This can be None") != claim_key("This can be empty")


def test_an_edited_line_maps_to_its_hunk_and_later_lines_shift(repo: Path) -> None:
    old = _commit(repo, "".join(LINES), "one")
    edited = list(LINES)
    edited[9] = "line10 = 100\n"  # the anchored line itself is edited
    edited[1:1] = ["inserted = 0\n", "inserted = 1\n"]  # and two lines come before it
    new = _commit(repo, "".join(edited), "two")
    maps = line_maps(repo, old, new)
    assert maps.map("a.py", 1) == ("a.py", 1, False)
    assert maps.map("a.py", 10) == ("a.py", 12, True)
    assert maps.map("a.py", 20) == ("a.py", 22, False)
    assert maps.map("other.py", 4) == ("other.py", 4, False)  # unchanged files keep their lines
    anchor = Anchor("a.py", 10, "line10 = 10", "`line10` is set to 10, twice", "a" * 40)
    assert same_finding(anchor, "a.py", 12, "`line10` is set to 100, twice", maps)
    assert same_finding(anchor, "a.py", 16, "`line10` is set to 100, twice", maps)  # within 5
    assert not same_finding(anchor, "a.py", 18, "`line10` is set to 100, twice", maps)
    assert not same_finding(anchor, "b.py", 12, "`line10` is set to 100, twice", maps)
    assert not same_finding(anchor, "a.py", 12, "`line10` is unused", maps)


def test_a_force_push_maps_between_heads_that_share_no_history(repo: Path) -> None:
    old = _commit(repo, "".join(LINES), "one")
    _git(repo, "checkout", "-q", "--orphan", "rewritten")
    rewritten = ["# header\n", *LINES]
    rewritten[6] = "line6 = 'six'\n"
    new = _commit(repo, "".join(rewritten), "rewritten")
    assert (
        subprocess.run(["git", "-C", str(repo), "merge-base", old, new], capture_output=True).returncode != 0
    )
    maps = line_maps(repo, old, new)
    assert maps.known
    assert maps.map("a.py", 6) == ("a.py", 7, True)
    assert maps.map("a.py", 12) == ("a.py", 13, False)


def test_when_the_old_head_is_gone_the_anchor_code_is_looked_for(repo: Path) -> None:
    new = _commit(repo, "".join(LINES), "one")
    maps = line_maps(repo, "f" * 40, new)
    assert not maps.known
    anchor = Anchor("a.py", 3, "line20 = 20", "magic number", "f" * 40)
    lines = [line.rstrip("\n") for line in LINES]
    assert same_finding(anchor, "a.py", 21, "Magic number!", maps, lines)
    assert not same_finding(anchor, "a.py", 3, "Magic number!", maps, lines)
    assert same_finding(anchor, "a.py", 3, "Magic number!", LineMaps(None))  # nothing to look in
