"""Partial mirrors (issue 43): blobs fetched as a review reads them, counted against the run's cap
(`BlobBudget`, BEM-357), a repository over the disk budget refused (BEM-358), and a reading run's tree
that holds no file of the repository. Real repositories behind `git http-backend` on loopback."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import pygit2
import pytest

from bot.app.git.blob_budget import BlobBudget
from bot.app.git.checkout import CheckoutError, Checkouts
from bot.beam.commit_tree import CommitTree
from bot.beam.errors import BeamError
from bot.beam.sandbox import SandboxRoot
from tests.support.git_http import GitHttpServer

pytestmark = pytest.mark.anyio
TOKEN = "ghs_BlobBudgetTestToken0123456789abcdef"
REPO = "octo/mono"
REFS = ["refs/heads/main:refs/heads/main"]
FILES = {f"pkg{n}/mod{n}.py": f"VALUE_{n} = {n}\n" * 50 for n in range(30)}


@dataclass
class World:
    server: GitHttpServer
    checkouts: Checkouts
    url: str
    head: str


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    with GitHttpServer(tmp_path / "srv", token=TOKEN) as server:
        head = server.seed(REPO, {**FILES, "big.bin": b"\0" * 300_000, "README.md": "# mono\n"})
        checkouts = Checkouts(tmp_path / "work", tmp_path / "runs")
        yield World(server, checkouts, server.repo_url(REPO), head)


def blobs_held(mirror: Path) -> int:
    repo = pygit2.Repository(str(mirror))
    return sum(1 for oid in repo.odb if isinstance(repo.get(oid), pygit2.Blob))


def upload_packs(world: World) -> int:
    return sum(1 for r in world.server.requests if r.path.endswith("git-upload-pack") and r.method == "POST")


async def test_the_mirror_holds_no_blob_until_one_is_read(world: World) -> None:
    await world.checkouts.update_mirror(REPO, world.url, TOKEN, REFS)
    mirror = world.checkouts.mirror_path(REPO)
    assert blobs_held(mirror) == 0  # commits and trees only
    budget = BlobBudget(world.checkouts.mirrors, REPO, limit=1 << 20)
    view = CommitTree(mirror, world.head, fetch=budget)
    before = upload_packs(world)
    assert await anyio.to_thread.run_sync(view.read_file, "pkg3/mod3.py") == FILES["pkg3/mod3.py"]
    assert blobs_held(mirror) == 1 and budget.fetched == 1
    assert budget.fetched_bytes == len(FILES["pkg3/mod3.py"])
    # Read again: it is in the mirror now, nothing more is fetched or counted.
    assert await anyio.to_thread.run_sync(view.read_file, "pkg3/mod3.py") == FILES["pkg3/mod3.py"]
    assert upload_packs(world) == before + 1 and budget.fetched == 1
    # A listing is read from the trees alone.
    assert len(await anyio.to_thread.run_sync(view.list_files, "")) == len(FILES) + 2
    assert blobs_held(mirror) == 1


async def test_the_fetch_cap_refuses_with_bem_357_and_names_the_file(world: World) -> None:
    await world.checkouts.update_mirror(REPO, world.url, TOKEN, REFS)
    mirror = world.checkouts.mirror_path(REPO)
    budget = BlobBudget(world.checkouts.mirrors, REPO, limit=len(FILES["pkg1/mod1.py"]) + 10)
    view = CommitTree(mirror, world.head, fetch=budget)
    await anyio.to_thread.run_sync(view.read_file, "pkg1/mod1.py")
    with pytest.raises(BeamError) as exc:
        await anyio.to_thread.run_sync(view.read_file, "pkg2/mod2.py")  # this fetch passes the cap
    assert exc.value.code == "BEM-357"
    assert "pkg2/mod2.py" in str(exc.value) and "BEAM_MAX_FETCH_BYTES" in str(exc.value)
    with pytest.raises(BeamError) as exc:
        await anyio.to_thread.run_sync(view.read_file, "pkg4/mod4.py")  # refused before any fetch
    assert exc.value.code == "BEM-357"
    assert view.refused == ["pkg2/mod2.py", "pkg4/mod4.py"]
    assert blobs_held(mirror) == 2  # nothing was fetched past the cap but the one request that met it


async def test_a_repository_over_the_disk_budget_is_refused_and_removed(world: World, tmp_path: Path) -> None:
    small = Checkouts(tmp_path / "small", tmp_path / "small-runs", max_repo_bytes=2_000)
    with pytest.raises(CheckoutError) as exc:
        await small.update_mirror(REPO, world.url, TOKEN, REFS)
    assert "BEM-358" in exc.value.message and "BEAM_MAX_REPO_BYTES" in exc.value.message
    assert not small.mirror_path(REPO).exists()  # nothing of it stays on the disk


async def test_a_reading_run_tree_holds_the_change_and_nothing_else(world: World, tmp_path: Path) -> None:
    await world.checkouts.update_mirror(REPO, world.url, TOKEN, REFS)
    tree = await world.checkouts.create_run_tree(
        REPO, "read1", world.head, "beam/pr-1/review", checkout=False
    )
    try:
        budget = BlobBudget(world.checkouts.mirrors, REPO, limit=1 << 20)
        view = CommitTree(
            world.checkouts.mirror_path(REPO), world.head, fetch=budget, scratch=SandboxRoot(tree.path)
        )
        written = await anyio.to_thread.run_sync(
            view.materialise, ["pkg7/mod7.py", "missing.py", ".gitattributes"]
        )
        assert written == ["pkg7/mod7.py"]
        on_disk = sorted(
            str(p.relative_to(tree.path))
            for p in tree.path.rglob("*")
            if p.is_file() and ".git" not in p.parts
        )
        assert on_disk == ["pkg7/mod7.py"]
        assert budget.fetched == 1
        # The run tree is still a repository at the head (the findings' line maps read it).
        assert str(pygit2.Repository(str(tree.path)).head.target) == world.head
    finally:
        await tree.remove()


async def test_a_whole_checkout_fetches_its_blobs_first(world: World) -> None:
    await world.checkouts.update_mirror(REPO, world.url, TOKEN, REFS)
    tree = await world.checkouts.create_run_tree(REPO, "write1", world.head, "beam/pr-1/author")
    try:
        assert (tree.path / "pkg9" / "mod9.py").read_text() == FILES["pkg9/mod9.py"]
        assert blobs_held(world.checkouts.mirror_path(REPO)) == len(FILES) + 2
    finally:
        await tree.remove()


async def test_a_search_fetches_in_batches_and_stops_at_the_cap(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    await world.checkouts.update_mirror(REPO, world.url, TOKEN, REFS)
    mirror = world.checkouts.mirror_path(REPO)
    monkeypatch.setattr("bot.beam.commit_tree.SEARCH_FETCH_BATCH", 5)
    # The first batch holds README.md, big.bin (300 kB) and three modules; the second passes the cap.
    budget = BlobBudget(world.checkouts.mirrors, REPO, limit=300_000 + len(FILES["pkg1/mod1.py"]) * 6)
    view = CommitTree(mirror, world.head, fetch=budget)
    found = await anyio.to_thread.run_sync(view.search, "", "value_")
    # Two batches of five: the second passed the cap, so the rest were neither fetched nor searched.
    assert budget.fetched == 10 and blobs_held(mirror) == 10
    assert view.refused == [". (search)"]
    assert 0 < len({m["path"] for m in found["matches"]}) <= 10
