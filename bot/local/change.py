"""A local change as the GitHub path sees a pull request: its files as the pulls/files API lists them,
the pull request, and the command's event, so the one prompt builder (`bot.app.context.prompt`) and the
one tool builder (`bot.app.runs.skill_agent`) serve `beam-bot run` and `/beam` alike.

A patch is written as GitHub writes one: hunks only (no file header), three lines of context, and
`\\ No newline at end of file` where a side ends without one; binary files have no patch. The change
is the diff from the merge base to the head (GitHub's `base...head`).
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pygit2

from bot.app.github.models import Account, PullFile, PullRef, PullRequest, RepoRef
from bot.app.github.payloads import Comment, CommentEvent, Issue, IssuePullLink, Repository
from bot.local.git import EMPTY_TREE, Base, UsageError, check_stopped, try_git

# What a local change's objects carry where GitHub's have a number (the models require one); the
# prompt never shows it (`LocalChange.local`).
LOCAL_NUMBER = 0
_STATUS = {"A": "added", "D": "removed", "R": "renamed", "C": "copied", "T": "changed"}
# The "\ No newline" line of a unified diff: pygit2's origins for a side that ends without a newline.
_NO_NEWLINE = "\\ No newline at end of file"
_REMOTE = re.compile(r"[:/](?P<owner>[^/:]+)/(?P<name>[^/]+?)(?:\.git)?/?$")


def _patch_text(patch: pygit2.Patch) -> str:
    out: list[str] = []
    for hunk in patch.hunks:
        out.append(hunk.header.rstrip("\n"))
        for line in hunk.lines:
            if line.origin in "+- ":
                out.append(line.origin + line.content.rstrip("\n"))
            else:
                out.append(_NO_NEWLINE)
    return "\n".join(out)


def diff_files(repo_path: Path, base_sha: str, head_sha: str) -> list[PullFile]:
    """The files of `base_sha..head_sha` as GitHub's pulls/files lists them, in path order.

    git names the changed files (`diff-tree` skips every subtree both sides share), and libgit2 makes
    each one's patch from its two blobs: libgit2's own tree diff walks both trees whole, 0.3 s at
    100,000 files where git takes the time of one small process, and it grew with the repository
    while the change did not. A change with a submodule in it takes that whole diff, as before."""
    repo = pygit2.Repository(str(repo_path))
    entries = _changed(repo_path, base_sha, head_sha)
    if entries is None:
        return _tree_diff_files(repo, base_sha, head_sha)
    files: list[PullFile] = []
    for status, old, new in entries:
        # Named, not passed as temporaries: the patch points into these bytes until it is read.
        before, after = _blob(repo, old.sha), _blob(repo, new.sha)
        patch = pygit2.Patch.create_from(
            before,
            after,
            old_as_path=old.path,
            new_as_path=new.path,
            context_lines=3,
        )
        files.append(_pull_file(patch, status, new.path or old.path, old.path))
        del patch, before, after
    return sorted(files, key=lambda file: file.filename)


@dataclass(frozen=True, slots=True)
class _Side:
    sha: str
    path: str


_NO_OBJECT = "0" * 40
_SUBMODULE = "160000"


def _blob(repo: pygit2.Repository, sha: str) -> bytes | None:
    """The blob's bytes, not the Blob: a patch of two Blobs looks up their paths' attributes, and its
    first one loads the checkout's index (0.2 s at 100,000 files). So binary is told by content, as
    GitHub's pulls/files tells it, not by a `.gitattributes` line."""
    return None if sha == _NO_OBJECT else repo[sha].peel(pygit2.Blob).data


def _changed(repo: Path, base_sha: str, head_sha: str) -> list[tuple[str, _Side, _Side]] | None:
    """`git diff-tree -r -M` of the two commits: (status letter, old side, new side) per changed
    file, renames found as libgit2's `find_similar` found them (50% alike); None where one side is
    a submodule (no blob to diff)."""
    done = subprocess.run(
        ["git", "-C", str(repo), "diff-tree", "-r", "-z", "-M", "--no-commit-id", base_sha, head_sha],
        capture_output=True,
        check=False,
        timeout=120,
    )
    check_stopped(done.returncode)
    if done.returncode != 0:
        raise UsageError(done.stderr.decode("utf-8", "replace").strip() or "git diff-tree failed")
    fields = done.stdout.decode("utf-8", "replace").split("\0")
    out: list[tuple[str, _Side, _Side]] = []
    i = 0
    while i + 1 < len(fields) and fields[i].startswith(":"):
        old_mode, new_mode, old_sha, new_sha, status = fields[i][1:].split(" ")
        if _SUBMODULE in (old_mode, new_mode):
            return None
        letter = status[0]
        old_path = new_path = fields[i + 1]
        i += 2
        if letter in "RC":
            new_path = fields[i]
            i += 1
        out.append((letter, _Side(old_sha, old_path), _Side(new_sha, new_path)))
    return out


def _tree_diff_files(repo: pygit2.Repository, base_sha: str, head_sha: str) -> list[PullFile]:
    head = repo.revparse_single(head_sha).peel(pygit2.Tree)
    if base_sha == EMPTY_TREE:  # the empty tree on the old side: every file is added
        diff = head.diff_to_tree(context_lines=3, swap=True)
    else:
        diff = repo.revparse_single(base_sha).peel(pygit2.Tree).diff_to_tree(head, context_lines=3)
    diff.find_similar()
    files: list[PullFile] = []
    for patch in diff:
        if patch is None:  # pygit2 gives None for a delta it could not make a patch of
            continue
        delta = patch.delta
        files.append(_pull_file(patch, delta.status_char(), delta.new_file.path, delta.old_file.path))
    return files


def _pull_file(patch: pygit2.Patch, letter: str, path: str, old_path: str) -> PullFile:
    _, additions, deletions = patch.line_stats
    status = _STATUS.get(letter, "modified")
    return PullFile(
        filename=path,
        status=status,
        additions=additions,
        deletions=deletions,
        changes=additions + deletions,
        patch=None if patch.delta.is_binary else _patch_text(patch),
        previous_filename=old_path if status == "renamed" else None,
    )


def repository_name(repo: Path) -> str:
    """`owner/name` from the origin's URL (as GitHub names it), else `local/<directory>`."""
    url = try_git(repo, "remote", "get-url", "origin") or ""
    match = _REMOTE.search(url)
    if match:
        return f"{match.group('owner')}/{match.group('name')}"
    return f"local/{repo.name}"


def requester(repo: Path) -> str:
    """Who asks: git's `user.name` for the checkout (the prompt's `Request from @…`)."""
    return try_git(repo, "config", "user.name") or "you"


@dataclass(frozen=True, slots=True)
class LocalChange:
    """`base...head` of a local checkout, and what the prompt says about it."""

    repository: str
    default_branch: str
    requester: str
    base: Base
    head_ref: str
    head_sha: str
    title: str
    body: str | None
    files: list[PullFile]
    # The pull request's number on GitHub when the change is one (`beam-bot review <URL>`); None for
    # a change on a checkout, which has none.
    number: int | None = None
    # The pull request's author (`review <URL>`): data about the change, never who asked. None: the
    # change on a checkout, whose pull request stand-in is the requester's.
    author: str | None = None
    # Who asked, as the prompt says it, where `requester` is no login of theirs (`review <URL>`:
    # the temporary repository's git user is no person); None: `@requester`.
    asked_by: str | None = None

    @property
    def local(self) -> bool:
        """A change on a checkout, not a pull request: the prompt names it so, with no number."""
        return self.number is None

    @classmethod
    def read(cls, repo: Path, base: Base, head_ref: str, head_sha: str, default_branch: str) -> LocalChange:
        """One commit: its subject and body, as GitHub titles a pull request of one commit; several:
        the branch, and their subjects as the description."""
        span = head_sha if base.sha == EMPTY_TREE else f"{base.sha}..{head_sha}"
        subjects = (try_git(repo, "log", "--format=%s", span) or "").splitlines()
        if len(subjects) == 1:
            title = subjects[0]
            body = try_git(repo, "log", "-1", "--format=%b", head_sha) or None
        else:
            title = head_ref
            body = "\n".join(f"- {s}" for s in reversed(subjects)) or None
        return cls(
            repository=repository_name(repo),
            default_branch=default_branch,
            requester=requester(repo),
            base=base,
            head_ref=head_ref,
            head_sha=head_sha,
            title=title,
            body=body,
            files=diff_files(repo, base.sha, head_sha),
        )

    @property
    def additions(self) -> int:
        return sum(f.additions for f in self.files)

    @property
    def deletions(self) -> int:
        return sum(f.deletions for f in self.files)

    def pull_request(self) -> PullRequest:
        ref = RepoRef(full_name=self.repository)
        return PullRequest(
            number=LOCAL_NUMBER if self.number is None else self.number,
            title=self.title,
            body=self.body,
            state="open",
            html_url="",
            user=Account(login=self.author or self.requester),
            head=PullRef(ref=self.head_ref, sha=self.head_sha, repo=ref),
            base=PullRef(ref=self.base.label, sha=self.base.sha, repo=ref),
            changed_files=len(self.files),
        )

    def event(self, instructions: str) -> CommentEvent:
        """The command as a comment on the pull request, the shape `/beam` arrives in."""
        owner, _, name = self.repository.partition("/")
        user = Account(login=self.requester)
        return CommentEvent(
            action="created",
            comment=Comment(id=0, body=instructions, user=user),
            repository=Repository(
                full_name=self.repository,
                name=name,
                owner=Account(login=owner),
                default_branch=self.default_branch,
            ),
            sender=user,
            issue=Issue(
                number=LOCAL_NUMBER if self.number is None else self.number,
                title=self.title,
                body=self.body,
                user=user,
                pull_request=IssuePullLink(),
            ),
        )
