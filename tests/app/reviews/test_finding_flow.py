"""The findings flow in process, on the fake GitHub, a real database and a real git repository: fixed
findings answered once and their threads resolved, also when the old head is gone from the tree."""

from __future__ import annotations

import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from bot.app.effects.journal import Journal
from bot.app.effects.writer import GitHubEffects
from bot.app.github.client import InstallationClient
from bot.app.jobs.store import Store
from bot.app.reviews.finding_flow import FindingFlow
from bot.app.reviews.ledger import FindingsLedger, Posted
from tests.support.fake_github import FakeGitHub, checked_fake_github, installation_client
from tests.support.fake_github_state import PullFile

REPO = "octo/ff"
INSTALLATION = 79
pytestmark = pytest.mark.anyio
LINES = [f"value_{n} = {n}\n" for n in range(1, 21)]


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, timeout=30
    ).stdout.strip()


def _commit(repo: Path, lines: list[str]) -> str:
    (repo / "m.py").write_text("".join(lines), encoding="utf-8")
    _git(repo, "add", "m.py")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "c")
    return _git(repo, "rev-parse", "HEAD")


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    with checked_fake_github() as fake:
        fake.add_repo(REPO, installation_id=INSTALLATION)
        fake.add_pull(
            REPO, number=9, head_sha="a" * 40, files=[PullFile("m.py", patch="@@ -1 +1 @@\n-a\n+b\n")]
        )
        fake.add_collaborator(REPO, "maintainer", "write")
        yield fake


@pytest.fixture
async def gh(fake: FakeGitHub) -> AsyncIterator[InstallationClient]:
    async with installation_client(fake, INSTALLATION) as client:
        yield client


def flow(store: Store, gh: InstallationClient) -> FindingFlow:
    return FindingFlow(store, gh, GitHubEffects(gh, Journal(store)), REPO, 9)


async def test_a_changed_line_not_reported_again_is_fixed_once(
    fake: FakeGitHub, gh: InstallationClient, store: Store, tmp_path: Path
) -> None:
    _git(tmp_path, "init", "-q")
    old = _commit(tmp_path, LINES)
    changed = list(LINES)
    changed[4] = "value_5 = 50\n"  # finding A's line is edited
    new = _commit(tmp_path, changed)
    a = fake.add_review_comment(REPO, 9, "A", user="beam-bot[bot]", path="m.py", line=5)
    b = fake.add_review_comment(REPO, 9, "B", user="beam-bot[bot]", path="m.py", line=12)
    c = fake.add_review_comment(REPO, 9, "C", user="beam-bot[bot]", path="m.py", line=5)
    ledger = FindingsLedger(store)
    await ledger.record(
        REPO,
        9,
        [
            Posted(a.id, "m.py", 5, "value_5 = 5", "`value_5` is 5", "minor", old),
            Posted(b.id, "m.py", 12, "value_12 = 12", "twelve", "minor", old),  # its line is untouched
            Posted(c.id, "m.py", 5, "value_5 = 5", "value_5 shadows a builtin", "major", old),
        ],
    )
    # The re-review repeats C (with the new value), so only A is fixed.
    reported = [{"path": "m.py", "line": 5, "body": "x", "finding": "value_5 shadows a builtin!"}]
    assert await flow(store, gh).settle_fixed(reported, tmp_path, new) == 1
    assert await flow(store, gh).settle_fixed(reported, tmp_path, new) == 0  # once
    replies = [x for x in fake.comments.values() if x.in_reply_to is not None]
    assert [(x.in_reply_to, x.body.split("\n")[0]) for x in replies] == [(a.id, f"Fixed in `{new[:7]}`.")]
    assert fake.resolved_threads == {a.id}
    states = {f.comment_id: (f.state, f.reason) for f in await ledger.of_pull(REPO, 9)}
    assert states == {a.id: ("fixed", new), b.id: ("open", None), c.id: ("open", None)}


async def test_without_the_old_head_the_anchored_code_decides(
    fake: FakeGitHub, gh: InstallationClient, store: Store, tmp_path: Path
) -> None:
    _git(tmp_path, "init", "-q")
    new = _commit(tmp_path, ["# moved\n", *LINES[:10]])  # value_15 is gone, value_3 moved down
    gone = "f" * 40  # a head this tree never had (a force-push, and the mirror lost it)
    kept = fake.add_review_comment(REPO, 9, "K", user="beam-bot[bot]", path="m.py", line=3)
    lost = fake.add_review_comment(REPO, 9, "L", user="beam-bot[bot]", path="m.py", line=15)
    await FindingsLedger(store).record(
        REPO,
        9,
        [
            Posted(kept.id, "m.py", 3, "value_3 = 3", "three", "minor", gone),
            Posted(lost.id, "m.py", 15, "value_15 = 15", "fifteen", "minor", gone),
        ],
    )
    assert await flow(store, gh).settle_fixed([], tmp_path, new) == 1
    assert fake.resolved_threads == {lost.id}
    # A 👎 from a maintainer dismisses the one left open; the reactions are read conditionally.
    fake.add_reaction(kept.id, "maintainer", "-1")
    assert await flow(store, gh).read_reactions() == 1
    assert await flow(store, gh).read_reactions() == 0
    [finding] = [f for f in await FindingsLedger(store).of_pull(REPO, 9) if f.comment_id == kept.id]
    assert (finding.state, finding.reason, finding.by) == ("dismissed", "reaction", "maintainer")
