"""Tests of `GitHttpServer`: real clone, fetch and push over HTTP with the git CLI and with pygit2."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pygit2
import pytest

from tests.support.git_http import GitHttpServer, basic_auth_header, isolated_git_env

TOKEN = "ghs_fakeTokenForTests0123456789"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[GitHttpServer]:
    with GitHttpServer(tmp_path / "srv", token=TOKEN) as srv:
        yield srv


def git(*args: str, cwd: Path | None = None, token: str | None = None) -> subprocess.CompletedProcess[str]:
    env = isolated_git_env()
    env.update(
        GIT_TERMINAL_PROMPT="0",
        GIT_ASKPASS="",
        GIT_AUTHOR_NAME="T",
        GIT_AUTHOR_EMAIL="t@example.com",
        GIT_COMMITTER_NAME="T",
        GIT_COMMITTER_EMAIL="t@example.com",
    )
    if token is not None:
        env.update(
            GIT_CONFIG_COUNT="1",
            GIT_CONFIG_KEY_0="http.extraHeader",
            GIT_CONFIG_VALUE_0=f"Authorization: {basic_auth_header(token)}",
        )
    return subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True)


def test_cli_clone_with_token_gets_the_files(server: GitHttpServer, tmp_path: Path) -> None:
    sha = server.seed("octo/hello", {"README.md": "hi\n", "src/a.py": "x = 1\n"})
    result = git("clone", "--quiet", server.repo_url("octo/hello"), str(tmp_path / "c"), token=TOKEN)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "c" / "src" / "a.py").read_text() == "x = 1\n"
    assert git("rev-parse", "HEAD", cwd=tmp_path / "c").stdout.strip() == sha
    assert server.requests and all(r.authorized for r in server.requests)
    assert server.requests[0].path == "/octo/hello.git/info/refs"
    assert server.requests[0].query == "service=git-upload-pack"
    assert server.requests[0].user == "x-access-token"


def test_cli_clone_without_or_with_a_wrong_token_gets_401(server: GitHttpServer, tmp_path: Path) -> None:
    server.seed("octo/hello", {"a": "1"})
    for token in (None, "wrong"):
        result = git("clone", server.repo_url("octo/hello"), str(tmp_path / f"c{token}"), token=token)
        assert result.returncode != 0
        assert (
            "401" in result.stderr
            or "Authentication failed" in result.stderr
            or "could not read" in (result.stderr)
        )
    assert server.requests and not any(r.authorized for r in server.requests)


def test_any_user_name_passes_with_the_token_and_rotation_revokes_the_old_one(
    server: GitHttpServer, tmp_path: Path
) -> None:
    server.seed("o/r", {"a": "1"})
    url = server.repo_url("o/r").replace("http://", f"http://someone:{TOKEN}@")
    assert git("ls-remote", url).returncode == 0
    assert server.requests[-1].user == "someone"
    server.set_token("new-token")
    assert git("ls-remote", server.repo_url("o/r"), token=TOKEN).returncode != 0
    assert git("ls-remote", server.repo_url("o/r"), token="new-token").returncode == 0


def test_server_without_token_needs_no_auth(tmp_path: Path) -> None:
    with GitHttpServer(tmp_path / "open", token=None) as srv:
        srv.seed("o/r", {"a": "1"})
        assert git("ls-remote", srv.repo_url("o/r")).returncode == 0
        assert srv.requests[0].authorized and srv.requests[0].user is None


def test_pull_refs_and_new_commits_are_fetched(server: GitHttpServer, tmp_path: Path) -> None:
    base = server.seed("o/r", {"a.txt": "1\n"})
    head = server.commit("o/r", {"b.txt": "2\n"}, branch="feature")
    server.create_pull_ref("o/r", 7, head)
    assert server.refs("o/r") == {
        "refs/heads/main": base,
        "refs/heads/feature": head,
        "refs/pull/7/head": head,
    }
    clone = tmp_path / "c"
    assert git("clone", "-q", server.repo_url("o/r"), str(clone), token=TOKEN).returncode == 0
    result = git("fetch", "-q", "origin", "refs/pull/7/head:refs/remotes/pr/7", cwd=clone, token=TOKEN)
    assert result.returncode == 0, result.stderr
    assert git("rev-parse", "refs/remotes/pr/7", cwd=clone).stdout.strip() == head
    newer = server.commit("o/r", {"c.txt": "3\n", "a.txt": None})
    assert git("pull", "-q", "--ff-only", cwd=clone, token=TOKEN).returncode == 0
    assert git("rev-parse", "HEAD", cwd=clone).stdout.strip() == newer
    assert (clone / "c.txt").read_text() == "3\n"
    assert not (clone / "a.txt").exists()


def test_fetch_of_many_refs_sends_gzip_and_works(server: GitHttpServer, tmp_path: Path) -> None:
    base = server.seed("o/r", {"a": "0"})
    clone = tmp_path / "c"
    assert git("clone", "-q", server.repo_url("o/r"), str(clone), token=TOKEN).returncode == 0
    # Forty "want" lines make a request body over 1 KiB, which git sends gzipped.
    tips = {f"b{i}": server.commit("o/r", {"a": str(i)}, branch=f"b{i}", parent=base) for i in range(40)}
    result = git("fetch", "-q", "origin", "+refs/heads/*:refs/remotes/origin/*", cwd=clone, token=TOKEN)
    assert result.returncode == 0, result.stderr
    for name, sha in tips.items():
        assert git("rev-parse", f"refs/remotes/origin/{name}", cwd=clone).stdout.strip() == sha
    assert any(r.content_encoding == "gzip" for r in server.requests)


def test_cli_push_small_and_large_chunked(server: GitHttpServer, tmp_path: Path) -> None:
    server.seed("o/r", {"a": "0"})
    clone = tmp_path / "c"
    assert git("clone", "-q", server.repo_url("o/r"), str(clone), token=TOKEN).returncode == 0
    (clone / "small").write_text("s")
    git("add", ".", cwd=clone)
    git("commit", "-q", "-m", "small", cwd=clone)
    result = git("push", "-q", "origin", "HEAD:refs/heads/beam/small", cwd=clone, token=TOKEN)
    assert result.returncode == 0, result.stderr
    small = git("rev-parse", "HEAD", cwd=clone).stdout.strip()
    assert server.ref_sha("o/r", "refs/heads/beam/small") == small
    # Incompressible data above http.postBuffer (1 MiB) makes git stream the pack chunked.
    (clone / "big.bin").write_bytes(os.urandom(3 * 1024 * 1024))
    git("add", ".", cwd=clone)
    git("commit", "-q", "-m", "big", cwd=clone)
    result = git("push", "-q", "origin", "HEAD:refs/heads/beam/big", cwd=clone, token=TOKEN)
    assert result.returncode == 0, result.stderr
    big = git("rev-parse", "HEAD", cwd=clone).stdout.strip()
    assert server.ref_sha("o/r", "refs/heads/beam/big") == big
    assert any(r.chunked and r.query == "" and r.path.endswith("git-receive-pack") for r in server.requests)
    blob = server.repository("o/r").revparse_single("refs/heads/beam/big:big.bin")
    assert blob.data == (clone / "big.bin").read_bytes()


def test_cli_push_without_token_is_refused(server: GitHttpServer, tmp_path: Path) -> None:
    server.seed("o/r", {"a": "0"})
    clone = tmp_path / "c"
    assert git("clone", "-q", server.repo_url("o/r"), str(clone), token=TOKEN).returncode == 0
    result = git("push", "origin", "HEAD:refs/heads/x", cwd=clone)
    assert result.returncode != 0
    assert server.ref_sha("o/r", "refs/heads/x") is None


def test_pygit2_clone_fetch_and_push(server: GitHttpServer, tmp_path: Path) -> None:
    base = server.seed("o/r", {"dir/file.txt": "hello\n"})
    callbacks = pygit2.RemoteCallbacks(credentials=pygit2.UserPass("x-access-token", TOKEN))
    repo = pygit2.clone_repository(server.repo_url("o/r"), str(tmp_path / "c"), callbacks=callbacks)
    assert str(repo.head.target) == base
    assert (tmp_path / "c" / "dir" / "file.txt").read_text() == "hello\n"

    head = server.commit("o/r", {"new.txt": "n\n"}, branch="feature")
    server.create_pull_ref("o/r", 3, head)
    remote = repo.remotes["origin"]
    remote.fetch(["+refs/pull/3/head:refs/pr/3"], callbacks=callbacks)
    assert str(repo.references["refs/pr/3"].target) == head

    sig = pygit2.Signature("T", "t@example.com")
    blob = repo.create_blob(b"pushed\n")
    builder = repo.TreeBuilder(repo.head.peel(pygit2.Commit).tree)
    builder.insert("pushed.txt", blob, pygit2.enums.FileMode.BLOB)
    commit = repo.create_commit(None, sig, sig, "push me", builder.write(), [repo.head.target])
    repo.references.create("refs/heads/beam/p", commit)
    remote.push(["refs/heads/beam/p:refs/heads/beam/p"], callbacks=callbacks)
    assert server.ref_sha("o/r", "refs/heads/beam/p") == str(commit)


def test_pygit2_without_credentials_fails(server: GitHttpServer, tmp_path: Path) -> None:
    server.seed("o/r", {"a": "1"})
    with pytest.raises(pygit2.GitError):
        pygit2.clone_repository(server.repo_url("o/r"), str(tmp_path / "c"))
    wrong = pygit2.RemoteCallbacks(credentials=pygit2.UserPass("x-access-token", "nope"))
    with pytest.raises(pygit2.GitError):
        pygit2.clone_repository(server.repo_url("o/r"), str(tmp_path / "d"), callbacks=wrong)
    assert server.requests and not any(r.authorized for r in server.requests)


def test_unknown_repository_is_404(server: GitHttpServer) -> None:
    result = git("ls-remote", server.repo_url("nobody/none"), token=TOKEN)
    assert result.returncode != 0
    assert "not found" in result.stderr.lower() or "404" in result.stderr
