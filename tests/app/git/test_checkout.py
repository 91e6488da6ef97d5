"""Tests of `bot.app.git.checkout` against real repositories served by `git http-backend` over HTTP."""

from __future__ import annotations

import base64
import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import pygit2
import pytest

from bot.app.git.checkout import RUNS_PREFIX, CheckoutError, Checkouts, RunTree
from tests.support.git_http import GitHttpServer

TOKEN = "ghs_CheckoutTestToken0123456789abcdef"
REPO = "octo/widget"
PR_REFS = ["refs/pull/7/head:refs/pull/7/head", "refs/heads/main:refs/heads/main"]


@dataclass
class World:
    server: GitHttpServer
    checkouts: Checkouts
    url: str
    base: str
    head: str
    other: str


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    with GitHttpServer(tmp_path / "srv", token=TOKEN) as server:
        base = server.seed(REPO, {"README.md": "# widget\n", "src/app.py": "print('v1')\n"})
        head = server.commit(REPO, {"src/app.py": "print('v2')\n", "docs/x.md": "x\n"}, branch="feature")
        server.create_pull_ref(REPO, 7, head)
        other = server.commit(REPO, {"secret-branch.txt": "nope\n"}, branch="other", parent=base)
        server.create_pull_ref(REPO, 8, other)
        checkouts = Checkouts(tmp_path / "work", tmp_path / "runs")
        yield World(server, checkouts, server.repo_url(REPO), base, head, other)


def mirror_refs(world: World) -> dict[str, str]:
    repo = pygit2.Repository(str(world.checkouts.mirror_path(REPO)))
    return {name: str(repo.references[name].target) for name in repo.references}


def object_files(git_dir: Path) -> set[str]:
    objects = git_dir / "objects"
    return {
        str(p.relative_to(objects)) for p in objects.rglob("*") if p.is_file() and p.parent.name != "info"
    }


def commit_in_tree(path: Path, files: dict[str, str], message: str = "bot change") -> str:
    repo = pygit2.Repository(str(path))
    for name, content in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(content)
        repo.index.add(name)
    repo.index.write()
    sig = pygit2.Signature("beam-bot", "bot@example.com")
    return str(repo.create_commit("HEAD", sig, sig, message, repo.index.write_tree(), [repo.head.target]))


async def fresh_tree(world: World, run_id: str = "run1") -> RunTree:
    await world.checkouts.update_mirror(REPO, world.url, TOKEN, PR_REFS)
    return await world.checkouts.create_run_tree(REPO, run_id, world.head, f"beam/pr-7/author-{run_id}")


def all_bytes_under(*roots: Path) -> Iterator[tuple[Path, bytes]]:
    for root in roots:
        for path in root.rglob("*"):
            if path.is_file() and not path.is_symlink():
                yield path, path.read_bytes()


@pytest.mark.anyio
async def test_mirror_is_created_with_only_the_requested_refs(world: World) -> None:
    await world.checkouts.update_mirror(REPO, world.url, TOKEN, PR_REFS)
    mirror = world.checkouts.mirror_path(REPO)
    assert mirror == world.checkouts.work_dir / "mirrors" / "octo" / "widget.git"
    assert mirror_refs(world) == {"refs/pull/7/head": world.head, "refs/heads/main": world.base}
    repo = pygit2.Repository(str(mirror))
    assert repo.is_bare
    assert world.other not in repo  # the unrequested PR's objects never came
    assert repo.config["remote.origin.url"] == world.url
    assert world.server.requests and all(r.authorized for r in world.server.requests)
    assert not (mirror / "FETCH_HEAD").exists()


@pytest.mark.anyio
async def test_second_fetch_brings_one_new_commit_and_follows_force_pushes(world: World) -> None:
    await world.checkouts.update_mirror(REPO, world.url, TOKEN, PR_REFS)
    newer = world.server.commit(REPO, {"src/app.py": "print('v3')\n"}, branch="feature")
    world.server.create_pull_ref(REPO, 7, newer)
    await world.checkouts.update_mirror(REPO, world.url, TOKEN, PR_REFS[:1])
    assert mirror_refs(world)["refs/pull/7/head"] == newer
    # A force-push replaces the PR head with an unrelated commit; the mirror follows it.
    rewritten = world.server.commit(REPO, {"z": "z\n"}, branch="rewrite", parent=world.base)
    world.server.create_pull_ref(REPO, 7, rewritten)
    await world.checkouts.update_mirror(REPO, world.url, TOKEN, PR_REFS[:1])
    assert mirror_refs(world)["refs/pull/7/head"] == rewritten


@pytest.mark.anyio
async def test_run_tree_is_at_the_pr_head_on_the_bot_branch(world: World) -> None:
    tree = await fresh_tree(world)
    assert tree.path == world.checkouts.runs_dir / "octo" / "widget" / "run1"
    assert (tree.repo_full_name, tree.branch, tree.base_commit) == (REPO, "beam/pr-7/author-run1", world.head)
    assert (tree.path / "src" / "app.py").read_text() == "print('v2')\n"
    assert (tree.path / "docs" / "x.md").read_text() == "x\n"
    assert (tree.path / "README.md").read_text() == "# widget\n"
    assert sorted(p.name for p in tree.path.iterdir()) == [".git", "README.md", "docs", "src"]
    repo = pygit2.Repository(str(tree.path))
    assert repo.head.name == "refs/heads/beam/pr-7/author-run1"
    assert str(repo.head.target) == world.head
    assert repo.status() == {}
    assert repo.remotes["origin"].url == world.url
    alternates = (tree.path / ".git" / "objects" / "info" / "alternates").read_text().strip()
    assert Path(alternates) == (world.checkouts.mirror_path(REPO) / "objects").resolve()
    assert object_files(tree.path / ".git") == set()  # everything is borrowed, nothing copied
    assert mirror_refs(world)[RUNS_PREFIX + "run1"] == world.head  # held against mirror gc


@pytest.mark.anyio
async def test_commits_in_the_run_tree_stay_out_of_the_mirror(world: World) -> None:
    tree = await fresh_tree(world)
    mirror = world.checkouts.mirror_path(REPO)
    before = object_files(mirror)
    sha = commit_in_tree(tree.path, {"src/app.py": "print('fixed')\n"})
    assert object_files(mirror) == before
    assert sha not in pygit2.Repository(str(mirror))
    assert sha in pygit2.Repository(str(tree.path))
    assert object_files(tree.path / ".git")


@pytest.mark.anyio
async def test_concurrent_updates_of_one_mirror_both_land(world: World, tmp_path: Path) -> None:
    second = Checkouts(world.checkouts.work_dir, tmp_path / "runs")  # another worker: only the file lock
    async with anyio.create_task_group() as tg:
        tg.start_soon(world.checkouts.update_mirror, REPO, world.url, TOKEN, PR_REFS[:1])
        tg.start_soon(world.checkouts.update_mirror, REPO, world.url, TOKEN, PR_REFS[1:])
        tg.start_soon(second.update_mirror, REPO, world.url, TOKEN, ["refs/pull/8/head:refs/pull/8/head"])
    assert mirror_refs(world) == {
        "refs/pull/7/head": world.head,
        "refs/heads/main": world.base,
        "refs/pull/8/head": world.other,
    }
    fsck = subprocess.run(
        ["git", "fsck", "--no-progress"], cwd=world.checkouts.mirror_path(REPO), capture_output=True
    )
    assert fsck.returncode == 0, fsck.stderr
    assert not list(world.checkouts.mirror_path(REPO).parent.glob("*.tmp-*"))


@pytest.mark.anyio
async def test_pin_survives_removal_and_push_sends_exactly_the_pinned_commit(world: World) -> None:
    tree = await fresh_tree(world)
    pinned = commit_in_tree(tree.path, {"src/app.py": "print('fixed')\n", "new/deep/file.txt": "n\n"})
    ref = await world.checkouts.pin(REPO, tree, pinned, "p1")
    assert ref == "refs/beam/pending/p1"
    later = commit_in_tree(tree.path, {"src/app.py": "print('not shown')\n"})  # never pinned
    await tree.remove()
    await tree.remove()  # idempotent
    assert not tree.path.exists()
    assert RUNS_PREFIX + "run1" not in mirror_refs(world)
    assert mirror_refs(world)[ref] == pinned
    mirror = world.checkouts.mirror_path(REPO)
    fsck = subprocess.run(["git", "fsck", "--no-progress"], cwd=mirror, capture_output=True)
    assert fsck.returncode == 0, fsck.stderr

    await world.checkouts.push_from_mirror(
        REPO, world.url, TOKEN, ref, "beam/pr-7/author-run1", expected_sha=pinned
    )
    assert world.server.ref_sha(REPO, "refs/heads/beam/pr-7/author-run1") == pinned
    assert later not in world.server.repository(REPO)
    blob = world.server.repository(REPO).revparse_single(f"{pinned}:new/deep/file.txt")
    assert blob.data == b"n\n"
    await world.checkouts.drop_pin(REPO, "p1")
    assert ref not in mirror_refs(world)


@pytest.mark.anyio
async def test_pin_is_idempotent_and_refuses_a_different_commit_under_the_same_id(world: World) -> None:
    tree = await fresh_tree(world)
    first = commit_in_tree(tree.path, {"a.txt": "1\n"})
    second = commit_in_tree(tree.path, {"a.txt": "2\n"})
    await world.checkouts.pin(REPO, tree, first, "refs/beam/pending/p2")
    await world.checkouts.pin(REPO, tree, first, "p2")
    with pytest.raises(CheckoutError, match="another commit"):
        await world.checkouts.pin(REPO, tree, second, "p2")
    with pytest.raises(CheckoutError, match="not in the run"):
        await world.checkouts.pin(REPO, tree, "0" * 40, "p3")
    with pytest.raises(CheckoutError, match="Invalid pending ref"):
        await world.checkouts.pin(REPO, tree, first, "refs/heads/main")
    await tree.remove()


@pytest.mark.anyio
async def test_push_refuses_wrong_commit_or_branch_and_reports_rejection(world: World) -> None:
    tree = await fresh_tree(world)
    sha = commit_in_tree(tree.path, {"a.txt": "1\n"})
    ref = await world.checkouts.pin(REPO, tree, sha, "p1")
    await tree.remove()
    with pytest.raises(CheckoutError, match="not the approved"):
        await world.checkouts.push_from_mirror(REPO, world.url, TOKEN, ref, "beam/x", expected_sha=world.base)
    for branch in ("main", "feature", "refs/heads/beam/x", "-f"):
        with pytest.raises(CheckoutError):
            await world.checkouts.push_from_mirror(REPO, world.url, TOKEN, ref, branch)
    assert world.server.ref_sha(REPO, "refs/heads/main") == world.base
    # Someone else already moved the bot branch elsewhere: no force, a clear rejection.
    world.server.set_ref(REPO, "refs/heads/beam/x", world.other)
    with pytest.raises(CheckoutError) as caught:
        await world.checkouts.push_from_mirror(REPO, world.url, TOKEN, ref, "beam/x")
    assert "rejected" in caught.value.message
    assert TOKEN not in caught.value.message
    assert world.server.ref_sha(REPO, "refs/heads/beam/x") == world.other


@pytest.mark.anyio
async def test_token_is_never_written_to_disk(world: World) -> None:
    tree = await fresh_tree(world)
    sha = commit_in_tree(tree.path, {"a.txt": "1\n"})
    ref = await world.checkouts.pin(REPO, tree, sha, "p1")
    await world.checkouts.push_from_mirror(REPO, world.url, TOKEN, ref, "beam/pr-7/author-run1")
    assert world.server.ref_sha(REPO, "refs/heads/beam/pr-7/author-run1") == sha
    assert any(r.authorized and r.query == "service=git-receive-pack" for r in world.server.requests)
    encoded = base64.b64encode(f"x-access-token:{TOKEN}".encode())
    scanned = set()
    for path, data in all_bytes_under(world.checkouts.work_dir, world.checkouts.runs_dir):
        scanned.add(path.name)
        assert TOKEN.encode() not in data, path
        assert encoded not in data, path
    assert {"config", "HEAD", "alternates"} <= scanned
    assert (tree.path / ".git" / "logs" / "HEAD").exists()
    await tree.remove()


@pytest.mark.anyio
async def test_auth_failures_give_a_clear_message_without_the_token(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A trace variable in the worker's environment must not leak the header into the message.
    monkeypatch.setenv("GIT_TRACE_CURL", "1")
    monkeypatch.setenv("GIT_TRACE_REDACT", "0")
    wrong = "ghs_WrongTokenThatMustNotLeak42"
    with pytest.raises(CheckoutError) as caught:
        await world.checkouts.update_mirror(REPO, world.url, wrong, PR_REFS)
    message = caught.value.message
    assert "credentials" in message
    assert (
        wrong not in message and base64.b64encode(f"x-access-token:{wrong}".encode()).decode() not in message
    )
    assert str(caught.value) == message

    tree = await fresh_tree(world)
    sha = commit_in_tree(tree.path, {"a.txt": "1\n"})
    ref = await world.checkouts.pin(REPO, tree, sha, "p1")
    world.server.set_token("rotated")
    with pytest.raises(CheckoutError) as pushed:
        await world.checkouts.push_from_mirror(REPO, world.url, TOKEN, ref, "beam/y")
    assert "credentials" in pushed.value.message and TOKEN not in pushed.value.message
    assert world.server.ref_sha(REPO, "refs/heads/beam/y") is None
    await tree.remove()


@pytest.mark.anyio
async def test_missing_ref_or_commit_is_reported(world: World) -> None:
    with pytest.raises(CheckoutError, match="not on GitHub"):
        await world.checkouts.update_mirror(REPO, world.url, TOKEN, ["refs/pull/99/head:refs/pull/99/head"])
    await world.checkouts.update_mirror(REPO, world.url, TOKEN, PR_REFS)
    with pytest.raises(CheckoutError, match="not in the mirror"):
        await world.checkouts.create_run_tree(REPO, "r2", world.other, "beam/b")
    assert not world.checkouts.run_path(REPO, "r2").exists()
    assert RUNS_PREFIX + "r2" not in mirror_refs(world)
    with pytest.raises(CheckoutError, match="no mirror"):
        await world.checkouts.create_run_tree("octo/unknown", "r3", world.head, "beam/b")
    tree = await world.checkouts.create_run_tree(REPO, "r4", world.head, "beam/b")
    with pytest.raises(CheckoutError, match="already has"):
        await world.checkouts.create_run_tree(REPO, "r4", world.head, "beam/b")
    assert (tree.path / "README.md").exists()
    await tree.remove()


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("name", "url", "refs"),
    [
        ("../etc", None, PR_REFS),
        ("octo/widget/extra", None, PR_REFS),
        ("octo/.hidden", None, PR_REFS),
        (REPO, f"http://x-access-token:{TOKEN}@127.0.0.1/octo/widget.git", PR_REFS),
        (REPO, "--upload-pack=touch /tmp/pwned", PR_REFS),
        (REPO, None, ["--upload-pack=touch /tmp/pwned"]),
        (REPO, None, ["refs/heads/main:refs/beam/pending/x"]),
        (REPO, None, ["refs/heads/main:refs/heads/a..b"]),
        (REPO, None, []),
    ],
)
async def test_bad_inputs_are_refused_before_git_runs(
    world: World, name: str, url: str | None, refs: list[str]
) -> None:
    with pytest.raises(CheckoutError) as caught:
        await world.checkouts.update_mirror(name, url or world.url, TOKEN, refs)
    assert TOKEN not in caught.value.message
    assert world.server.requests == []


@pytest.mark.anyio
async def test_cleanup_stale_removes_old_trees_and_releases_their_refs(world: World) -> None:
    old = await fresh_tree(world, "old")
    new = await world.checkouts.create_run_tree(REPO, "new", world.head, "beam/new")
    past = time.time() - 3600
    os.utime(old.path, (past, past))
    stale_mirror = world.checkouts.mirror_path(REPO).with_name("widget.git.tmp-deadbeef")
    stale_mirror.mkdir()
    os.utime(stale_mirror, (past, past))
    removed = await world.checkouts.cleanup_stale(600)
    assert set(removed) == {old.path, stale_mirror}
    assert not old.path.exists() and new.path.exists()
    refs = mirror_refs(world)
    assert RUNS_PREFIX + "old" not in refs and refs[RUNS_PREFIX + "new"] == world.head
    await new.remove()
    assert await world.checkouts.cleanup_stale(600) == []
    assert not (world.checkouts.runs_dir / "octo").exists()


@pytest.mark.anyio
async def test_checkout_ignores_filters_from_the_workers_global_git_config(
    world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A PR's .gitattributes can name a filter; only config we wrote may define what it runs.
    home = tmp_path / "home"
    home.mkdir()
    marker = tmp_path / "smudged"
    (home / ".gitconfig").write_text(f'[filter "evil"]\n\tsmudge = touch {marker}; cat\n')
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    sha = world.server.commit(REPO, {".gitattributes": "* filter=evil\n"}, branch="feature")
    world.server.create_pull_ref(REPO, 7, sha)
    await world.checkouts.update_mirror(REPO, world.url, TOKEN, PR_REFS[:1])
    tree = await world.checkouts.create_run_tree(REPO, "r", sha, "beam/r")
    assert (tree.path / "src" / "app.py").read_text() == "print('v2')\n"
    assert not marker.exists()
    await tree.remove()


@pytest.mark.anyio
async def test_a_follow_up_push_is_fast_forward_only_from_the_tip_it_started_at(world: World) -> None:
    world.server.set_ref(REPO, "refs/heads/beam/pr-7/author-run1", world.head)  # the bot's branch
    tree = await fresh_tree(world)
    sha = commit_in_tree(tree.path, {"a.txt": "1\n"})
    ref = await world.checkouts.pin(REPO, tree, sha, "p1")
    branch = "beam/pr-7/author-run1"
    # A commit that does not build on the expected tip is refused before anything is sent.
    with pytest.raises(CheckoutError, match="does not build on"):
        await world.checkouts.push_from_mirror(
            REPO, world.url, TOKEN, ref, branch, expected_sha=sha, expected_remote=world.other
        )
    # Someone pushed to the branch since the run started: refused, the branch stays where they put it.
    moved = world.server.commit(REPO, {"theirs.txt": "t\n"}, branch=branch)
    with pytest.raises(CheckoutError, match="moved since the run started"):
        await world.checkouts.push_from_mirror(
            REPO, world.url, TOKEN, ref, branch, expected_sha=sha, expected_remote=world.head
        )
    assert world.server.ref_sha(REPO, f"refs/heads/{branch}") == moved
    # Back at the tip the run started from: it goes through, and a repeat is a no-op.
    world.server.set_ref(REPO, f"refs/heads/{branch}", world.head)
    for _ in range(2):
        await world.checkouts.push_from_mirror(
            REPO, world.url, TOKEN, ref, branch, expected_sha=sha, expected_remote=world.head
        )
    assert world.server.ref_sha(REPO, f"refs/heads/{branch}") == sha
    await tree.remove()
