"""Issue 8: stale git locks, corrupt mirrors, server paths in messages, and a fresh token after a 401,
against real repositories served by `git http-backend`."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pygit2
import pytest

from bot.app.git.checkout import CheckoutError, Checkouts
from bot.app.git.hygiene import clear_stale_locks, hide_paths, live_git_pids
from tests.support.git_http import GitHttpServer, isolated_git_env

TOKEN = "ghs_HygieneTestToken0123456789abcdef"
REPO = "octo/widget"
REFS = ["refs/heads/main:refs/heads/main"]

pytestmark = pytest.mark.anyio


@pytest.fixture
def server(tmp_path: Path) -> Iterator[GitHttpServer]:
    with GitHttpServer(tmp_path / "srv", token=TOKEN) as server:
        server.seed(REPO, {"README.md": "# widget\n"})
        yield server


@pytest.fixture
def checkouts(tmp_path: Path) -> Checkouts:
    return Checkouts(tmp_path / "work", tmp_path / "runs")


def mirror_main(checkouts: Checkouts) -> str:
    return str(pygit2.Repository(str(checkouts.mirror_path(REPO))).references["refs/heads/main"].target)


async def test_a_stale_lock_left_by_a_killed_git_is_removed(
    server: GitHttpServer, checkouts: Checkouts
) -> None:
    await checkouts.update_mirror(REPO, server.repo_url(REPO), TOKEN, REFS)
    mirror = checkouts.mirror_path(REPO)
    locks = [mirror / "refs/heads/main.lock", mirror / "packed-refs.lock"]
    for lock in locks:
        lock.write_text("")
    new = server.commit(REPO, {"README.md": "# widget 2\n"})
    await checkouts.update_mirror(REPO, server.repo_url(REPO), TOKEN, REFS)
    assert mirror_main(checkouts) == new
    assert not any(lock.exists() for lock in locks)


async def test_a_lock_a_live_git_holds_is_kept_and_the_error_shows_no_server_path(
    server: GitHttpServer, checkouts: Checkouts, tmp_path: Path
) -> None:
    await checkouts.update_mirror(REPO, server.repo_url(REPO), TOKEN, REFS)
    mirror = checkouts.mirror_path(REPO)
    lock = mirror / "refs/heads/main.lock"
    lock.write_text("")
    # A live git working in the mirror (it waits on stdin), as another command would be.
    holder = subprocess.Popen(
        ["git", "cat-file", "--batch"], cwd=mirror, stdin=subprocess.PIPE, env=isolated_git_env()
    )
    try:
        # Until it has exec'd git in the mirror, the child is a Python fork that holds nothing.
        deadline = time.monotonic() + 10
        while holder.pid not in (live_git_pids(mirror) or []):
            assert time.monotonic() < deadline, "the git holding the mirror never started"
            await anyio.sleep(0.01)
        assert clear_stale_locks(mirror) == []
        server.commit(REPO, {"README.md": "# widget 2\n"})
        with pytest.raises(CheckoutError) as failed:
            await checkouts.update_mirror(REPO, server.repo_url(REPO), TOKEN, REFS)
        assert lock.exists()
        message = failed.value.message
        assert "refs/heads/main.lock" in message
        assert str(tmp_path) not in message and TOKEN not in message
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(10)
    assert clear_stale_locks(mirror) == [lock]  # nobody holds it now


async def test_a_corrupt_mirror_is_rebuilt(server: GitHttpServer, checkouts: Checkouts) -> None:
    await checkouts.update_mirror(REPO, server.repo_url(REPO), TOKEN, REFS)
    mirror = checkouts.mirror_path(REPO)
    (mirror / "HEAD").write_text("garbage\n")
    for ref in (mirror / "refs").rglob("*"):
        if ref.is_file():
            ref.write_text("not a sha\n")
    new = server.commit(REPO, {"README.md": "# widget 2\n"})
    await checkouts.update_mirror(REPO, server.repo_url(REPO), TOKEN, REFS)
    assert mirror_main(checkouts) == new


async def test_git_gets_a_fresh_token_after_a_401(server: GitHttpServer, checkouts: Checkouts) -> None:
    asked: list[str] = []

    async def refresh() -> str:
        asked.append("fresh")
        return TOKEN

    with pytest.raises(CheckoutError) as refused:
        await checkouts.update_mirror(REPO, server.repo_url(REPO), "ghs_expired", REFS)
    assert refused.value.auth and "ghs_expired" not in refused.value.message
    await checkouts.update_mirror(REPO, server.repo_url(REPO), "ghs_expired", REFS, refresh=refresh)
    assert asked == ["fresh"]
    assert mirror_main(checkouts) == server.ref_sha(REPO, "refs/heads/main")


def test_server_paths_are_hidden_but_urls_and_repository_paths_stay() -> None:
    text = (
        "fatal: Unable to create '/srv/beam/mirrors/octo/w.git/refs/heads/main.lock': File exists.\n"
        "error: could not open /srv/beam/runs/x/y\n"
        "fatal: unable to access 'https://github.com/octo/w.git/': 401"
    )
    hidden = hide_paths(text)
    assert "/srv/beam" not in hidden
    assert "'refs/heads/main.lock'" in hidden and "open <path>" in hidden
    assert "https://github.com/octo/w.git/" in hidden


async def test_a_push_gets_a_fresh_token_after_a_401_and_its_tip_is_read_back(
    server: GitHttpServer, checkouts: Checkouts
) -> None:
    await checkouts.update_mirror(REPO, server.repo_url(REPO), TOKEN, REFS)
    main = mirror_main(checkouts)
    url = server.repo_url(REPO)
    assert await checkouts.remote_tip(REPO, url, TOKEN, "beam/pr-1/author-x") is None

    async def refresh() -> str:
        return TOKEN

    with pytest.raises(CheckoutError) as refused:
        await checkouts.push_from_mirror(REPO, url, "ghs_expired", "refs/heads/main", "beam/pr-1/author-x")
    assert refused.value.auth
    await checkouts.push_from_mirror(
        REPO, url, "ghs_expired", "refs/heads/main", "beam/pr-1/author-x", refresh=refresh
    )
    assert await checkouts.remote_tip(REPO, url, TOKEN, "beam/pr-1/author-x") == main
