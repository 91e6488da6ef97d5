"""Held commits in the database (issue 23): bundled at hold time on one host, restored and pushed from a
mirror on another, checked by digest and by sha; real git over HTTP, real SQLite and PostgreSQL."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pygit2
import pytest
from sqlalchemy import delete, inspect, select, text, update

from bot.app.approvals.held_commits import commit_bases, pack_held_commit, restore_held_commit
from bot.app.approvals.pushes import HeldCommit, HeldPush, PushAction, PushContext, Pushes
from bot.app.git.bundles import bundle_header
from bot.app.git.checkout import Checkouts, RunTree
from bot.app.jobs.migrations import SCHEMA_VERSION
from bot.app.jobs.retention import prune
from bot.app.jobs.schema import held_commits, schema_version
from bot.app.jobs.store import Store, pending_pushes
from bot.beam.errors import BeamError
from tests.app.git.test_checkout import commit_in_tree
from tests.support.git_http import GitHttpServer

pytestmark = pytest.mark.anyio

TOKEN = "ghs_HeldCommitTestToken0123456789abcdef"
REPO = "octo/widget"
REFS = ["refs/pull/7/head:refs/pull/7/head", "refs/heads/main:refs/heads/main"]
BRANCH = "beam/pr-7/author-run1"


@dataclass
class World:
    server: GitHttpServer
    url: str
    head: str
    holder: Checkouts  # the host that ran the author skill
    pusher: Checkouts  # another host, its work directory empty
    root: Path


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    with GitHttpServer(tmp_path / "srv", token=TOKEN) as server:
        server.seed(REPO, {"README.md": "# widget\n", "src/app.py": "print('v1')\n"})
        head = server.commit(REPO, {"src/app.py": "print('v2')\n"}, branch="feature")
        server.create_pull_ref(REPO, 7, head)
        holder = Checkouts(tmp_path / "a" / "work", tmp_path / "a" / "runs")
        pusher = Checkouts(tmp_path / "b" / "work", tmp_path / "b" / "runs")
        yield World(server, server.repo_url(REPO), head, holder, pusher, tmp_path)


def a_push(world: World, push_id: str, commit: str) -> HeldPush:
    now = time.time()
    return HeldPush(
        id=push_id,
        run_id=None,
        repo=REPO,
        number=7,
        base_sha=None,
        head_sha=world.head,
        commit_sha=commit,
        branch=BRANCH,
        requester="maint",
        created_at=now,
        expires_at=now + 600,
        state="approved",
        action=PushAction(action_id="a1", args={"ref": BRANCH}, session_id="s", interaction_id="i"),
        context=PushContext(
            installation_id=1,
            clone_url=world.url,
            html_url="https://github.com/octo/widget",
            default_branch="main",
            on_pull_request=True,
        ),
    )


async def hold(world: World, push_id: str, files: dict[str, str], max_bytes: int = 10**7) -> HeldCommit:
    """What `Approvals.hold_commit` does on the holding host: bases, pin, bundle."""
    tree = await run_tree(world, f"run-{push_id}")
    commit = commit_in_tree(tree.path, files)
    bases = await commit_bases(world.holder, REPO, tree, commit)
    ref = await world.holder.pin(REPO, tree, commit, push_id)
    return await pack_held_commit(world.holder, REPO, push_id, ref, tree, commit, bases, max_bytes)


async def run_tree(world: World, run_id: str) -> RunTree:
    await world.holder.update_mirror(REPO, world.url, TOKEN, REFS)
    return await world.holder.create_run_tree(REPO, run_id, world.head, BRANCH)


def pinned(checkouts: Checkouts, ref: str) -> str | None:
    mirror = checkouts.mirror_path(REPO)
    if not mirror.exists():
        return None
    repo = pygit2.Repository(str(mirror))
    return str(repo.references[ref].target) if ref in repo.references else None


async def test_a_held_commit_is_restored_and_pushed_by_a_host_that_never_saw_it(
    world: World, store: Store
) -> None:
    held = await hold(world, "p1", {"src/app.py": "print('fixed')\n", "new/deep/file.txt": "n\n"})
    assert held.prerequisites == (world.head,) and held.base_sha == world.head
    assert bundle_header(held.pack) == ([world.head], {"refs/beam/pending/p1": held.commit_sha})
    pushes = Pushes(store)
    push = a_push(world, "p1", held.commit_sha)
    await pushes.create(push, held)
    assert await pushes.held_commit("p1") == held

    assert not world.pusher.mirror_path(REPO).exists()
    assert await restore_held_commit(world.pusher, pushes, push, TOKEN) is True
    assert pinned(world.pusher, push.pending_ref) == held.commit_sha
    await world.pusher.push_from_mirror(
        REPO, world.url, TOKEN, push.pending_ref, BRANCH, expected_sha=held.commit_sha
    )
    assert world.server.ref_sha(REPO, f"refs/heads/{BRANCH}") == held.commit_sha
    blob = world.server.repository(REPO).revparse_single(f"{held.commit_sha}:new/deep/file.txt")
    assert isinstance(blob, pygit2.Blob) and blob.data == b"n\n"
    # The pin is a cache: a second push on this host, or one on the holding host, reads no bundle.
    assert await restore_held_commit(world.pusher, pushes, push, TOKEN) is False
    assert await restore_held_commit(world.holder, pushes, push, TOKEN) is False


async def test_only_the_new_objects_are_bundled(world: World, store: Store) -> None:
    big = "".join(f"{i:08x}" for i in range(40_000))  # 320 kB that compress poorly
    world.head = world.server.commit(REPO, {"big.txt": big}, branch="feature")
    world.server.create_pull_ref(REPO, 7, world.head)
    held = await hold(world, "p2", {"small.txt": "s\n"})
    assert held.prerequisites == (world.head,)
    assert held.size < 2_000  # the base's files are GitHub's, not the bundle's


async def test_a_damaged_copy_is_refused_by_its_digest_and_nothing_is_pushed(
    world: World, store: Store
) -> None:
    held = await hold(world, "p3", {"src/app.py": "print('fixed')\n"})
    pushes = Pushes(store)
    push = a_push(world, "p3", held.commit_sha)
    await pushes.create(push, held)
    damaged = held.pack[:-30] + bytes(30)
    async with store.write() as conn:
        await conn.execute(update(held_commits).where(held_commits.c.push_id == "p3").values(pack=damaged))
    with pytest.raises(BeamError) as refused:
        await restore_held_commit(world.pusher, pushes, push, TOKEN)
    assert refused.value.code == "BEM-371" and "p3" in str(refused.value)
    assert pinned(world.pusher, push.pending_ref) is None


async def test_a_copy_of_another_commit_is_refused_by_its_sha(world: World, store: Store) -> None:
    approved = await hold(world, "p4", {"src/app.py": "print('approved')\n"})
    other = await hold(world, "p5", {"src/app.py": "print('something else')\n"})
    pushes = Pushes(store)
    push = a_push(world, "p4", approved.commit_sha)
    # A consistent row (its digest matches) whose bundle holds another commit than the approved one.
    swapped = HeldCommit.of(approved.commit_sha, approved.base_sha, list(other.prerequisites), other.pack)
    await pushes.create(push, swapped)
    with pytest.raises(BeamError) as refused:
        await restore_held_commit(world.pusher, pushes, push, TOKEN)
    assert refused.value.code == "BEM-372" and other.commit_sha in str(refused.value)
    assert pinned(world.pusher, push.pending_ref) is None
    assert world.server.ref_sha(REPO, f"refs/heads/{BRANCH}") is None


async def test_a_commit_over_the_cap_is_refused_and_nothing_is_held(world: World) -> None:
    tree = await run_tree(world, "run-big")
    commit = commit_in_tree(tree.path, {"big.bin": "".join(f"{i:08x}" for i in range(40_000))})
    bases = await commit_bases(world.holder, REPO, tree, commit)
    ref = await world.holder.pin(REPO, tree, commit, "p6")
    with pytest.raises(BeamError) as refused:
        await pack_held_commit(world.holder, REPO, "p6", ref, tree, commit, bases, max_bytes=64 * 1024)
    assert refused.value.code == "BEM-370"
    assert "BEAM_MAX_HELD_PUSH_BYTES" in str(refused.value) and "65,536" in str(refused.value)
    assert pinned(world.holder, ref) is None


async def test_a_push_with_neither_a_pin_nor_a_stored_copy_says_so(world: World, store: Store) -> None:
    pushes = Pushes(store)
    push = a_push(world, "p7", "c" * 40)
    await pushes.create(push)
    with pytest.raises(BeamError) as refused:
        await restore_held_commit(world.pusher, pushes, push, TOKEN)
    assert refused.value.code == "BEM-374"


async def test_a_base_gone_from_github_is_a_clear_error(world: World, store: Store) -> None:
    held = await hold(world, "p8", {"src/app.py": "print('fixed')\n"})
    pushes = Pushes(store)
    push = a_push(world, "p8", held.commit_sha)
    await pushes.create(push, held)
    # The pull request was force-pushed and GitHub collected the old head.
    world.server.remove(REPO)
    world.server.seed(REPO, {"README.md": "# rewritten\n"})
    world.server.create_pull_ref(REPO, 7, world.server.ref_sha(REPO, "refs/heads/main") or "")
    with pytest.raises(BeamError) as refused:
        await restore_held_commit(world.pusher, pushes, push, TOKEN)
    assert refused.value.code == "BEM-373" and world.head[:12] in str(refused.value)


async def test_the_copy_lives_as_long_as_its_push_row(world: World, store: Store) -> None:
    held = await hold(world, "p9", {"src/app.py": "print('fixed')\n"})
    pushes = Pushes(store)
    await pushes.create(a_push(world, "p9", held.commit_sha), held)
    assert (await prune(store, 0.000001)).total >= 0  # retention keeps push rows, and so their copies
    assert await pushes.held_commit("p9") == held
    async with store.write() as conn:
        await conn.execute(delete(pending_pushes).where(pending_pushes.c.id == "p9"))
    async with store.read() as conn:
        assert (await conn.execute(select(held_commits.c.push_id))).all() == []


async def test_a_version_7_database_gains_the_table_and_keeps_its_pushes(world: World, db_url: str) -> None:
    store = await Store.open(db_url)
    try:
        pushes = Pushes(store)
        tree = await run_tree(world, "run-old")
        commit = commit_in_tree(tree.path, {"src/app.py": "print('held by v7')\n"})
        await world.holder.pin(REPO, tree, commit, "old1")  # a push held before v8: only its pin
        await pushes.create(a_push(world, "old1", commit))
        async with store.write() as conn:
            await conn.execute(text("DROP TABLE held_commits"))
            await conn.execute(schema_version.update().values(version=7))
    finally:
        await store.close()
    store = await Store.open(db_url)
    try:
        async with store.read() as conn:
            assert (await conn.execute(select(schema_version.c.version))).scalar() == SCHEMA_VERSION >= 8
            assert "held_commits" in await conn.run_sync(lambda c: inspect(c).get_table_names())
        pushes = Pushes(store)
        push = await pushes.get("old1")
        assert push is not None and await pushes.held_commit("old1") is None
        # Its own host still pushes it from the pin; any other host says why it cannot.
        assert await restore_held_commit(world.holder, pushes, push, TOKEN) is False
        with pytest.raises(BeamError) as refused:
            await restore_held_commit(world.pusher, pushes, push, TOKEN)
        assert refused.value.code == "BEM-374"
    finally:
        await store.close()


async def test_a_merge_is_bundled_over_both_of_its_parents(world: World, store: Store) -> None:
    """`/beam update` holds a merge of the base branch into the bot's branch: two prerequisites."""
    main = world.server.commit(REPO, {"docs/new.md": "from main\n"}, branch="main")
    tree = await run_tree(world, "run-merge")
    # As `/beam update` does on a partial mirror: what changed on both sides is fetched first.
    ancestor = await world.holder.merge_base(REPO, world.head, main)
    assert ancestor is not None
    for side in (world.head, main):
        await world.holder.mirrors.fetch_diff_blobs(REPO, ancestor, side)
    repo = pygit2.Repository(str(tree.path))
    index = repo.merge_commits(world.head, main)
    sig = pygit2.Signature("beam-bot", "bot@example.com")
    merge = str(
        repo.create_commit("HEAD", sig, sig, "Merge main", index.write_tree(repo), [world.head, main])
    )
    bases = await commit_bases(world.holder, REPO, tree, merge)
    assert bases == sorted([world.head, main])
    ref = await world.holder.pin(REPO, tree, merge, "m1")
    held = await pack_held_commit(world.holder, REPO, "m1", ref, tree, merge, bases)
    assert sorted(bundle_header(held.pack)[0]) == bases
    pushes = Pushes(store)
    push = a_push(world, "m1", merge)
    await pushes.create(push, held)
    assert await restore_held_commit(world.pusher, pushes, push, TOKEN) is True
    await world.pusher.push_from_mirror(REPO, world.url, TOKEN, push.pending_ref, BRANCH, expected_sha=merge)
    assert world.server.ref_sha(REPO, f"refs/heads/{BRANCH}") == merge


async def test_a_restore_fetches_the_base_without_its_files_and_the_push_still_carries_them(
    world: World, store: Store
) -> None:
    """The base is fetched partially, as every mirror fetch is: the pusher's mirror holds the base's
    commits and trees, no file it did not change; GitHub has those, and the push sends what it lacks.
    Here the server advertises no ref the pusher holds (GitHub hides refs/pull/* from pushes, and the
    branch is gone), so the push walks the base's history and git fetches the blobs it passes."""
    held = await hold(world, "p2", {"src/app.py": "print('fixed')\n"})
    pushes = Pushes(store)
    push = a_push(world, "p2", held.commit_sha)
    await pushes.create(push, held)
    server_repo = world.server.repository(REPO)
    readme = str(server_repo.revparse_single(f"{world.head}:README.md").id)
    server_repo.config["receive.hideRefs"] = "refs/pull"
    server_repo.references.delete("refs/heads/feature")

    assert await restore_held_commit(world.pusher, pushes, push, TOKEN) is True
    mirror = pygit2.Repository(str(world.pusher.mirror_path(REPO)))
    assert world.head in mirror and readme not in mirror.odb
    await world.pusher.push_from_mirror(
        REPO, world.url, TOKEN, push.pending_ref, BRANCH, expected_sha=held.commit_sha
    )
    assert world.server.ref_sha(REPO, f"refs/heads/{BRANCH}") == held.commit_sha
    landed = world.server.repository(REPO)
    assert landed.revparse_single(f"{held.commit_sha}:src/app.py").data == b"print('fixed')\n"
    assert landed.revparse_single(f"{held.commit_sha}:README.md").data == b"# widget\n"
