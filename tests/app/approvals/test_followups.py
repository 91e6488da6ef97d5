"""Follow-ups without a server: the comments a commit addresses, the prompt, the merge of `/beam update`."""

from __future__ import annotations

from pathlib import Path

import pygit2
import pytest

from bot.app.approvals.followup import addressed
from bot.app.approvals.update import Conflicts, Merged, UpToDate, merge_base
from bot.app.context.prompt import ReviewNote, build_prompt
from bot.app.github.payloads import CommentEvent
from bot.app.repo_config import RepoConfig
from bot.beam.errors import BeamError
from tests.support.webhooks import issue_comment_payload

NOTES = (
    ReviewNote(11, "README.md", 1, "Use a comma", "boss", "https://x/1"),
    ReviewNote(12, "src/app.py", 3, "Rename this", "maintainer", "https://x/2"),
    ReviewNote(13, "README.md", 4, "Typo ```here```", "contributor", "https://x/3"),
)


def test_the_commit_message_names_what_it_addresses() -> None:
    message = "Fix things\n\nAddresses: 12, 13\n\nCo-authored-by: a <b>"
    assert [n.id for n in addressed(NOTES, message, ["README.md"])] == [12, 13]
    assert [n.id for n in addressed(NOTES, "Fix\n\naddressed 11", [])] == [11]


def test_without_names_the_comments_on_changed_files_count() -> None:
    assert [n.id for n in addressed(NOTES, "Fix things", ["README.md"])] == [11, 13]
    assert addressed(NOTES, "Fix things\n\nAddresses: 99", ["docs/x.md"]) == []


def test_review_comments_reach_the_prompt_as_data() -> None:
    payload = issue_comment_payload("/beam author address the review", on_pull_request=True)
    event = CommentEvent.model_validate(payload)
    text, _ = build_prompt(event, "author", "address the review", None, [], 0, notes=NOTES)
    data = text.split("untrusted", 1)[1]
    assert "id 11, README.md line 1, by @boss: Use a comma" in data
    assert "id 12, src/app.py line 3, by @maintainer: Rename this" in data
    assert "Addresses: <id>, <id>" in text.split("untrusted", 1)[0]
    plain, _ = build_prompt(event, "author", "do it", None, [], 0)
    assert "review comments" not in plain


def _repo(tmp_path: Path) -> tuple[pygit2.Repository, dict[str, str]]:
    repo = pygit2.init_repository(str(tmp_path / "r"))
    sig = pygit2.Signature("t", "t@example.com")

    def commit(files: dict[str, str], parents: list[str], ref: str | None = None) -> str:
        index = pygit2.Index()
        if parents:
            index.read_tree(repo[parents[0]].peel(pygit2.Tree))
        for path, body in files.items():
            index.add(pygit2.IndexEntry(path, repo.create_blob(body.encode()), pygit2.enums.FileMode.BLOB))
        return str(repo.create_commit(ref, sig, sig, "c", index.write_tree(repo), parents))

    root = commit({"a.txt": "a\n", "b.txt": "b\n", ".github/workflows/ci.yml": "on: push\n"}, [])
    tip = commit({"a.txt": "bot\n"}, [root])
    repo.references.create("refs/heads/beam/x", tip)
    repo.set_head("refs/heads/beam/x")
    shas = {
        "root": root,
        "tip": tip,
        "clean": commit({"b.txt": "base\n", ".github/workflows/ci.yml": "on: pr\n"}, [root]),
        "conflict": commit({"a.txt": "base\n"}, [root]),
    }
    return repo, shas


def blocked(path: str) -> bool:
    return path.startswith(".github/workflows")


def test_merge_base_clean_conflicting_and_up_to_date(tmp_path: Path) -> None:
    repo, shas = _repo(tmp_path)
    path, ident = str(tmp_path / "r"), ("bot", "bot@example.com")
    assert isinstance(merge_base(path, shas["tip"], shas["root"], "m", ident, blocked), UpToDate)
    conflict = merge_base(path, shas["tip"], shas["conflict"], "m", ident, blocked)
    assert conflict == Conflicts(["a.txt"])
    assert str(repo.head.target) == shas["tip"]
    merged = merge_base(path, shas["tip"], shas["clean"], "Merge", ident, blocked)
    assert isinstance(merged, Merged)
    commit = repo[merged.sha]
    assert isinstance(commit, pygit2.Commit)
    assert [str(p) for p in commit.parent_ids] == [shas["tip"], shas["clean"]]
    # A blocked file may take the base's version: the merge brings nothing the base does not have.
    assert (commit.tree / ".github/workflows/ci.yml").data == b"on: pr\n"
    assert (commit.tree / "a.txt").data == b"bot\n" and (commit.tree / "b.txt").data == b"base\n"
    assert str(repo.head.target) == merged.sha


def test_merge_base_refuses_a_new_version_of_a_blocked_file(tmp_path: Path) -> None:
    repo, shas = _repo(tmp_path)
    sig = pygit2.Signature("t", "t@example.com")
    index = pygit2.Index()
    index.read_tree(repo[shas["tip"]].peel(pygit2.Tree))
    index.add(
        pygit2.IndexEntry(
            ".github/workflows/ci.yml", repo.create_blob(b"x\non: push\n"), pygit2.enums.FileMode.BLOB
        )
    )
    tip = str(repo.create_commit("refs/heads/beam/x", sig, sig, "c", index.write_tree(repo), [shas["tip"]]))
    base_index = pygit2.Index()
    base_index.read_tree(repo[shas["root"]].peel(pygit2.Tree))
    base_index.add(
        pygit2.IndexEntry(
            ".github/workflows/ci.yml", repo.create_blob(b"on: push\ny\n"), pygit2.enums.FileMode.BLOB
        )
    )
    base = str(repo.create_commit(None, sig, sig, "c", base_index.write_tree(repo), [shas["root"]]))
    with pytest.raises(BeamError) as err:
        merge_base(str(tmp_path / "r"), tip, base, "m", ("b", "b@e"), blocked)
    assert err.value.code == "BEM-334"
    assert str(repo.head.target) == tip


def test_merge_base_reads_blocked_paths_with_the_one_path_matcher(tmp_path: Path) -> None:
    """Issue 28: `/beam update` checks the merge with the config's `blocked` alone, which missed
    `secret[12].txt` (a character class) while the worktree blocked it. A merge that makes a new
    version of `secret1.txt` is now refused as the worktree would refuse the write."""
    repo, shas = _repo(tmp_path)
    sig = pygit2.Signature("t", "t@example.com")

    def commit(parent: str, body: bytes, ref: str | None) -> str:
        index = pygit2.Index()
        index.read_tree(repo[parent].peel(pygit2.Tree))
        index.add(pygit2.IndexEntry("secret1.txt", repo.create_blob(body), pygit2.enums.FileMode.BLOB))
        return str(repo.create_commit(ref, sig, sig, "c", index.write_tree(repo), [parent]))

    common = commit(shas["tip"], b"one\ntwo\nthree\n", "refs/heads/beam/x")
    tip = commit(common, b"ONE\ntwo\nthree\n", "refs/heads/beam/x")
    base = commit(common, b"one\ntwo\nTHREE\n", None)  # the merge makes a third version
    config = RepoConfig(blocked_paths=["secret[12].txt"])
    with pytest.raises(BeamError) as err:
        merge_base(str(tmp_path / "r"), tip, base, "m", ("b", "b@e"), config.blocked)
    assert err.value.code == "BEM-334" and "secret1.txt" in str(err.value.data)
    assert str(repo.head.target) == tip
