"""Git plumbing for `checkout.py`: the one-process environment that carries the token, error wording
fit for a pull-request comment, input checks, locks, and the object copy that pins a run's commit.
"""

from __future__ import annotations

import base64
import fcntl
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from urllib.parse import urlsplit

import pygit2

from bot.app.git.hygiene import hide_paths

RUNS_PREFIX = "refs/beam/runs/"
_PART = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
_SHA = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")
_REFSPEC = re.compile(r"\+?(refs/[A-Za-z0-9_./-]+):(refs/[A-Za-z0-9_./-]+)")
_STDERR_LIMIT = 600


class CheckoutError(Exception):
    """What the checkout could not do, worded for a pull-request comment; it never holds a token."""

    def __init__(self, message: str, *, auth: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.auth = auth  # GitHub refused the token: a fresh one may succeed (issue 8)


def run_git(
    git: str, timeout: float, args: list[str], *, cwd: Path, token: str | None, local: bool = False
) -> subprocess.CompletedProcess[str]:
    """Run git; `local` commands (no network) also ignore the user's and system's git config."""
    env = git_env(token)
    if local:
        # e.g. a global git-lfs smudge filter or core.fsmonitor must not run on a PR's files.
        env.update(GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1")
    try:
        return subprocess.run(
            [git, *args],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise CheckoutError(f"git {args[0]} did not finish within {timeout:.0f} s.") from None
    except FileNotFoundError:
        raise CheckoutError("git is not installed on the worker.") from None


class TooBig(CheckoutError):
    """A fetch that would pass the disk budget, stopped before it did (BEM-358)."""


def run_git_within(
    git: str, timeout: float, args: list[str], *, cwd: Path, token: str | None, watch: Path, max_bytes: int
) -> subprocess.CompletedProcess[str]:
    """`run_git` for a fetch into `cwd`, stopped the moment what `watch` holds passes `max_bytes`:
    a repository too big for the disk is refused, never a full disk. git writes a fetch's pack into
    `watch` (objects/pack) as it arrives, so its size is checked while the fetch runs."""
    out_path = cwd / f".beam-fetch-{os.getpid()}.out"
    try:
        with open(out_path, "w+") as out, open(f"{out_path}.err", "w+") as err:
            try:
                process = subprocess.Popen(
                    [git, *args], cwd=cwd, env=git_env(token), stdout=out, stderr=err, text=True
                )
            except FileNotFoundError:
                raise CheckoutError("git is not installed on the worker.") from None
            deadline = time.monotonic() + timeout
            used = 0
            while True:
                try:
                    code = process.wait(timeout=0.1)
                    break
                except subprocess.TimeoutExpired:
                    pass
                used = dir_bytes(watch)
                if used > max_bytes or time.monotonic() > deadline:
                    process.kill()
                    process.wait(timeout=30)
                    if used > max_bytes:
                        raise TooBig(f"over {max_bytes} bytes")
                    raise CheckoutError(f"git {args[0]} did not finish within {timeout:.0f} s.")
            if dir_bytes(watch) > max_bytes:
                raise TooBig(f"over {max_bytes} bytes")
            out.seek(0)
            err.seek(0)
            return subprocess.CompletedProcess([git, *args], code, out.read(), err.read())
    finally:
        for path in (out_path, Path(f"{out_path}.err")):
            with suppress(FileNotFoundError):
                path.unlink()


def dir_bytes(path: Path) -> int:
    """The bytes of the files under `path` (a mirror's objects: a few packs, or loose objects)."""
    total = 0
    for dirpath, _, filenames in os.walk(path):
        for name in filenames:
            with suppress(OSError):
                total += os.lstat(os.path.join(dirpath, name)).st_size
    return total


def git_env(token: str | None) -> dict[str, str]:
    """The environment of one git process: the token as an in-memory header, no prompts, no hooks.

    Inherited `GIT_*` variables are dropped so that, e.g., `GIT_TRACE_CURL` cannot print the header.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    pairs = [("core.hooksPath", os.devnull), ("credential.helper", "")]
    if token is not None:
        pairs.insert(0, ("http.extraHeader", f"Authorization: {basic_auth(token)}"))
    env["GIT_CONFIG_COUNT"] = str(len(pairs))
    for i, (key, value) in enumerate(pairs):
        env[f"GIT_CONFIG_KEY_{i}"] = key
        env[f"GIT_CONFIG_VALUE_{i}"] = value
    env.update(GIT_TERMINAL_PROMPT="0", GIT_ASKPASS="", SSH_ASKPASS="", LC_ALL="C", LANGUAGE="C")
    return env


def basic_auth(token: str) -> str:
    """How GitHub takes an installation token over HTTP: Basic `x-access-token:<token>`."""
    return "Basic " + base64.b64encode(f"x-access-token:{token}".encode()).decode("ascii")


def scrub(text: str, token: str | None) -> str:
    """Text without the token, its header form, credentials in any URL, or the server's paths."""
    if token:
        text = text.replace(basic_auth(token).removeprefix("Basic "), "***").replace(token, "***")
    text = re.sub(r"(?i)authorization:[^\n]*", "Authorization: ***", text)
    return hide_paths(re.sub(r"://[^/@\s]+@", "://***@", text))


def auth_refused(result: subprocess.CompletedProcess[str]) -> bool:
    """Whether git failed because the server refused the credentials (401/403)."""
    low = ((result.stderr or "") + (result.stdout or "")).lower()
    return bool(re.search(r"\b40[13]\b|authentication failed|could not read username", low))


def explain(action: str, what: str, result: subprocess.CompletedProcess[str], token: str | None) -> str:
    detail = scrub((result.stderr or "") + (result.stdout or ""), token).strip()
    low = detail.lower()
    if re.search(r"\b40[13]\b|authentication failed|could not read username", low):
        lead = (
            f"GitHub refused the bot's credentials for git {action} of {what} (the token may have expired)."
        )
    elif action == "push" and ("rejected" in low or "non-fast-forward" in low or "fetch first" in low):
        lead = f"GitHub rejected the push of {what}: the branch has commits the bot's commit lacks."
    elif "couldn't find remote ref" in low:
        lead = f"git {action} of {what} failed: a ref the run needs is not on GitHub."
    elif re.search(r"\b404\b|not found", low):
        lead = f"git {action} of {what} failed: the repository was not found."
    else:
        lead = f"git {action} of {what} failed."
    if len(detail) > _STDERR_LIMIT:
        detail = "..." + detail[-_STDERR_LIMIT:]
    return f"{lead}\ngit said: {detail}" if detail else lead


def remote_ref(git: str, timeout: float, cwd: Path, url: str, token: str, ref: str) -> str | None:
    """The sha `ref` holds on the remote (`git ls-remote`), or None when it has no such ref."""
    result = run_git(git, timeout, ["ls-remote", "--", url, ref], cwd=cwd, token=token)
    if result.returncode != 0:
        raise CheckoutError(explain("ls-remote", ref, result, token), auth=auth_refused(result))
    for line in result.stdout.splitlines():
        sha, _, name = line.partition("\t")
        if name.strip() == ref:
            return sha.strip()
    return None


def split_repo(full_name: str) -> tuple[str, str]:
    owner, sep, repo = full_name.partition("/")
    if not sep or not _PART.fullmatch(owner) or not _PART.fullmatch(repo) or repo.endswith((".git", ".lock")):
        raise CheckoutError(f"Invalid repository name {full_name!r}.")
    return owner, repo


def check_url(url: str) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("https", "http", "file") or "@" in parts.netloc or url.startswith("-"):
        raise CheckoutError("The clone URL must be http(s) or file, without credentials.")


def check_sha(sha: str) -> None:
    if not _SHA.fullmatch(sha):
        raise CheckoutError(f"Invalid commit id {sha[:80]!r}.")


def check_branch(branch: str) -> None:
    if branch.startswith("-") or not pygit2.reference_is_valid_name(f"refs/heads/{branch}"):
        raise CheckoutError(f"Invalid branch name {branch[:120]!r}.")


def fetch_refspec(spec: str) -> str:
    match = _REFSPEC.fullmatch(spec)
    if not match or not pygit2.reference_is_valid_name(match[2]) or match[2].startswith("refs/beam/"):
        raise CheckoutError(f"Invalid ref to fetch {spec[:120]!r}.")
    # Pull request heads are force-pushed; the mirror follows them.
    return spec if spec.startswith("+") else "+" + spec


def hold_commit(mirror: Path, run_id: str, sha: str) -> str | None:
    """Pin the run's base commit so mirror gc keeps what the run tree borrows; return origin URL."""
    repo = pygit2.Repository(str(mirror))
    if not isinstance(repo.get(sha), pygit2.Commit):
        raise CheckoutError(f"Commit {sha[:12]} is not in the mirror; was the pull request force-pushed?")
    repo.references.create(RUNS_PREFIX + run_id, sha, force=True)
    return origin_url(repo)


def origin_url(repo: pygit2.Repository) -> str | None:
    return str(repo.config["remote.origin.url"]) if "remote.origin.url" in repo.config else None


def copy_missing(source: pygit2.Repository, target: pygit2.Repository, tip: pygit2.Oid) -> None:
    """Write into `target` each object reachable from `tip` that it lacks.

    Children are written before their parents, so an interrupted copy never leaves a tree or
    commit in `target` whose objects are missing (presence of a tree means its subtree is there).
    """
    src, dst = source.odb, target.odb

    def copy(oid: pygit2.Oid) -> None:
        kind, data = src.read(oid)
        dst.write(kind, data)

    def copy_tree(oid: pygit2.Oid) -> None:
        if dst.exists(oid):
            return
        for entry in source[oid].peel(pygit2.Tree):
            if entry.type_str == "tree":
                copy_tree(entry.id)
            elif entry.type_str == "blob" and not dst.exists(entry.id):
                copy(entry.id)
        copy(oid)

    todo, seen = [tip], set()
    walker = source.walk(tip, pygit2.enums.SortMode.TOPOLOGICAL | pygit2.enums.SortMode.REVERSE)
    while todo:
        oid = todo.pop()
        if oid in seen:
            continue
        if dst.exists(oid):
            walker.hide(oid)
            continue
        seen.add(oid)
        commit = source[oid].peel(pygit2.Commit)
        todo.extend(commit.parent_ids)
        copy_tree(commit.tree_id)
    # Commits last, parents first: a commit present in `target` implies its history is.
    for commit in walker:
        copy(commit.id)


def delete_ref(mirror: Path, ref: str) -> None:
    repo = pygit2.Repository(str(mirror))
    if ref in repo.references:
        repo.references.delete(ref)


def make_run_dir(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.mkdir()


def remove_dir(path: Path) -> None:
    if path.is_symlink():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path, ignore_errors=True)


def rmdir_if_empty(path: Path) -> None:
    with suppress(OSError):
        path.rmdir()


def children(root: Path, depth: int) -> list[Path]:
    level = [root] if root.is_dir() else []
    for _ in range(depth):
        level = [c for p in level if p.is_dir() and not p.is_symlink() for c in p.iterdir() if c.is_dir()]
    return level


def mirror_dirs(mirrors: Path) -> list[Path]:
    return [p for p in children(mirrors, 2) if p.name.endswith(".git")]


@contextmanager
def file_lock(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
