"""Where the Action keeps what one workflow run leaves for the next: a git ref in the base repository.

`refs/beam/state/pr-<number>` points at a commit whose tree holds one file, the carried rows as
JSON (carry.py). Only a token with `contents: write` on the base repository moves a ref there: a
model's answer, a pull request's text, a comment, an edit or a fork cannot. (Hidden markers in the
bot's own comments could, since those comments quote text that others wrote: issue 40.)

The ref is the clock. The state is the commit the ref holds now, never a date written inside it,
and a run writes its state only over the commit it started from (git's lease), so a concurrent run
is noticed, never overwritten. Each state commit has no parent: a fetch brings one small commit,
however many runs came before.

The URL is built from the run's own environment (`GITHUB_SERVER_URL`, `GITHUB_REPOSITORY`) by the
caller, never from anything carried, so the token goes nowhere else.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import pygit2

from bot.app.git.plumbing import CheckoutError, auth_refused, check_url, explain, run_git

STATE_FILE = "state.json"
_SIGNATURE = ("beam-bot", "beam-bot@users.noreply.github.com")


def state_ref(number: int) -> str:
    return f"refs/beam/state/pr-{int(number)}"


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The state on GitHub: the commit the ref held when read (None: there was none) and its file."""

    commit: str | None = None
    data: bytes | None = None


class StateRef:
    """Reads and writes one repository's state refs through a small bare repository of its own."""

    def __init__(
        self, directory: Path, clone_url: str, token: str, *, git: str = "git", timeout: float = 120.0
    ):
        check_url(clone_url)
        self.directory = Path(directory)
        self.clone_url = clone_url
        self._token = token
        self.git = git
        self.timeout = timeout

    def _repo(self) -> pygit2.Repository:
        if not (self.directory / "HEAD").exists():
            self.directory.mkdir(parents=True, exist_ok=True)
            pygit2.init_repository(str(self.directory), bare=True)
            shutil.rmtree(self.directory / "hooks", ignore_errors=True)
        return pygit2.Repository(str(self.directory))

    def read(self, number: int) -> Snapshot:
        """The state of pull request `number`, or an empty snapshot when it has none yet."""
        repo, ref = self._repo(), state_ref(number)
        local = "refs/carried/" + ref.removeprefix("refs/")
        result = run_git(
            self.git,
            self.timeout,
            [
                "fetch",
                "--quiet",
                "--no-tags",
                "--no-write-fetch-head",
                "--",
                self.clone_url,
                f"+{ref}:{local}",
            ],
            cwd=self.directory,
            token=self._token,
        )
        if result.returncode != 0:
            if "couldn't find remote ref" in (result.stderr or "").lower():
                return Snapshot()
            raise CheckoutError(explain("fetch", ref, result, self._token), auth=auth_refused(result))
        commit = repo.revparse_single(local).peel(pygit2.Commit)
        try:
            blob = commit.tree[STATE_FILE]
        except KeyError:
            return Snapshot(str(commit.id), None)
        data = blob.data if isinstance(blob, pygit2.Blob) else None
        return Snapshot(str(commit.id), data)

    def write(self, number: int, data: bytes, over: str | None) -> bool:
        """Moves the ref to a new commit holding `data`, only while it still holds `over` (None: while
        there is no ref). False when another run moved it first; raises on any other failure."""
        repo, ref = self._repo(), state_ref(number)
        builder = repo.TreeBuilder()
        builder.insert(STATE_FILE, repo.create_blob(data), pygit2.GIT_FILEMODE_BLOB)
        signature = pygit2.Signature(*_SIGNATURE)
        commit = repo.create_commit(
            None, signature, signature, f"beam-bot: state of pull request #{number}\n", builder.write(), []
        )
        lease = f"--force-with-lease={ref}:{over or ''}"
        result = run_git(
            self.git,
            self.timeout,
            ["push", "--quiet", "--no-verify", lease, "--", self.clone_url, f"{commit}:{ref}"],
            cwd=self.directory,
            token=self._token,
        )
        if result.returncode == 0:
            return True
        said = (result.stderr or "").lower()
        if re.search(r"stale info|\[rejected\]|fetch first|already exists", said):
            return False
        raise CheckoutError(explain("push", ref, result, self._token), auth=auth_refused(result))
