"""Issue 12 end to end: follow-ups on the bot's own pull request, "address the review", `/beam update`.

Real `beam-bot serve`, real git over HTTP, the fake GitHub and a scripted model.
"""

from __future__ import annotations

import pygit2

from tests.e2e.author_support import (
    REPO,
    branch_refs,
    held_push,
    push_state,
    receive_packs,
    rows,
    script_author,
    send_command,
    stays,
    tracking_final,
)
from tests.e2e.followup_support import (
    approved_bot_pull,
    new_held_push,
    prompts,
    reply_containing,
    script_commit,
    stored_context,
)
from tests.support.bot_process import BotProcess, wait_for
from tests.support.fake_github_state import PullFile


def commit_at(bot: BotProcess, sha: str) -> pygit2.Commit:
    commit = bot.git.repository(REPO)[sha]
    assert isinstance(commit, pygit2.Commit)
    return commit


def test_a_follow_up_commits_on_top_of_the_bot_branch(bot: BotProcess) -> None:
    first = approved_bot_pull(bot)
    script_commit(bot, "README.md", "Hello, world!\n", "Add a comma")
    send_command(bot, "/beam author also add a comma", number=first.number)
    push_id, commit, comment_id, body = new_held_push(bot, first.number, set())
    # The approval comment shows the diff against the branch's tip, not against the base.
    assert "-Hello world" in body and "+Hello, world!" in body and "Helo" not in body
    assert f"to branch `{first.branch}`" in body
    assert stored_context(bot, push_id)["expected_tip"] == first.tip
    assert bot.git.ref_sha(REPO, f"refs/heads/{first.branch}") == first.tip  # held: nothing moved

    bot.fake.add_reaction(comment_id, "maintainer", "+1")
    wait_for(lambda: push_state(bot, push_id) == "pushed", what="the follow-up push")
    assert bot.git.ref_sha(REPO, f"refs/heads/{first.branch}") == commit
    second = commit_at(bot, commit)
    assert [str(p.id) for p in second.parents] == [first.tip]
    assert (second.tree / "README.md").data == b"Hello, world!\n"
    # The same pull request carries it: no second one is opened.
    assert len([p for p in bot.fake.pulls_of(REPO) if p.head_ref == first.branch]) == 1
    edited = wait_for(
        lambda: "Approved by" in bot.fake.comments[comment_id].body and bot.fake.comments[comment_id].body,
        what="the edited approval comment",
    )
    assert "this pull request's branch" in edited
    assert receive_packs(bot) == 2


def test_a_follow_up_is_refused_when_someone_pushed_to_the_branch_in_between(bot: BotProcess) -> None:
    first = approved_bot_pull(bot)
    script_commit(bot, "README.md", "Hello, world!\n", "Add a comma")
    send_command(bot, "/beam author also add a comma", number=first.number)
    push_id, commit, comment_id, _ = new_held_push(bot, first.number, set())
    human = bot.git.commit(REPO, {"NOTES.md": "mine\n"}, branch=first.branch, message="A human's commit")

    bot.fake.add_reaction(comment_id, "maintainer", "+1")
    wait_for(lambda: push_state(bot, push_id) == "failed", what="the refused push")
    body = wait_for(
        lambda: "push failed" in bot.fake.comments[comment_id].body and bot.fake.comments[comment_id].body,
        what="the failure on the approval comment",
    )
    assert "moved since the run started" in body and f"/beam approve {push_id}" in body
    assert bot.git.ref_sha(REPO, f"refs/heads/{first.branch}") == human  # nothing moved
    stays(lambda: bot.git.ref_sha(REPO, f"refs/heads/{first.branch}") == human, 1.0)

    # Once the branch is back where the run started, the same push can be retried.
    bot.git.set_ref(REPO, f"refs/heads/{first.branch}", first.tip)
    send_command(bot, f"/beam approve {push_id}", number=first.number)
    wait_for(lambda: push_state(bot, push_id) == "pushed", what="the retried push")
    assert bot.git.ref_sha(REPO, f"refs/heads/{first.branch}") == commit


def test_address_the_review_gets_the_review_comments(bot: BotProcess) -> None:
    first = approved_bot_pull(bot)
    wanted = bot.fake.add_review_comment(
        REPO, first.number, "Say hello with a comma", user="boss", path="README.md", line=1
    )
    other = bot.fake.add_review_comment(
        REPO, first.number, "Rename this module", user="maintainer", path="src/app.py", line=1
    )
    script_commit(bot, "README.md", "Hello, world!\n", f"Add a comma\n\nAddresses: {wanted.id}")
    send_command(bot, "/beam author address the review", number=first.number)
    push_id, _, _, _ = new_held_push(bot, first.number, set())

    prompt = next(p for p in prompts(bot) if "address the review" in p)
    for note, author in ((wanted, "boss"), (other, "maintainer")):
        assert f"id {note.id}, {note.path} line 1, by @{author}: {note.body}" in prompt
    final = wait_for(lambda: tracking_final(bot, first.number), what="the follow-up's answer")
    assert f"held push `{push_id}`" in final
    listed = final.split("Review comments this commit addresses", 1)[1]
    assert "Say hello with a comma" in listed and "@boss" in listed and f"discussion_r{wanted.id}" in listed
    assert "Rename this module" not in listed


def test_update_merges_the_base_into_the_bot_branch(bot: BotProcess) -> None:
    first = approved_bot_pull(bot)
    base_tip = bot.git.commit(REPO, {"src/app.py": "print(2)\n"}, branch="feature", message="Base moves")
    asked = len(bot.llm.requests)
    send_command(bot, "/beam update", number=first.number)
    push_id, commit, comment_id, body = new_held_push(bot, first.number, set())
    assert "+print(2)" in body and "-print(1)" in body and "README" not in body
    assert len(bot.llm.requests) == asked  # no model
    assert bot.git.ref_sha(REPO, f"refs/heads/{first.branch}") == first.tip

    send_command(bot, f"/beam approve {push_id}", number=first.number)
    wait_for(lambda: push_state(bot, push_id) == "pushed", what="the merge push")
    merge = commit_at(bot, commit)
    assert bot.git.ref_sha(REPO, f"refs/heads/{first.branch}") == commit
    assert [str(p.id) for p in merge.parents] == [first.tip, base_tip]
    assert (merge.tree / "src/app.py").data == b"print(2)\n" and (
        merge.tree / "README.md"
    ).data == b"Hello world\n"
    assert "Merge branch 'feature'" in merge.message and "Co-authored-by: maintainer <" in merge.message
    assert f"held push `{push_id}`" in reply_containing(bot, first.number, "Prepared commit")
    assert comment_id


def test_update_with_a_conflict_pushes_nothing_and_lists_the_files(bot: BotProcess) -> None:
    first = approved_bot_pull(bot)
    bot.git.commit(REPO, {"README.md": "Hi world\n"}, branch="feature", message="Base edits README")
    before = branch_refs(bot)
    send_command(bot, "/beam update", number=first.number)
    reply = reply_containing(bot, first.number, "conflicts in these files")
    assert "- `README.md`" in reply and "nothing was pushed" in reply
    assert len(rows(bot)) == 1 and branch_refs(bot) == before and receive_packs(bot) == 1


def test_a_beam_named_branch_the_bot_did_not_push_gets_a_new_branch(bot: BotProcess) -> None:
    impostor = bot.git.commit(REPO, {"src/app.py": "print(3)\n"}, branch="beam/pr-11/author-12345678")
    bot.git.create_pull_ref(REPO, 11, impostor)
    bot.fake.add_pull(
        REPO,
        number=11,
        title="Looks like the bot's",
        user="contributor",
        head_ref="beam/pr-11/author-12345678",
        head_sha=impostor,
        base_sha=bot.git.ref_sha(REPO, "refs/heads/main") or "",
        files=[PullFile("src/app.py", patch="@@ -1 +1 @@\n-print(0)\n+print(3)\n")],
    )
    send_command(bot, "/beam update", number=11)
    assert "only on a pull request whose branch the bot made" in reply_containing(bot, 11, "/beam update")

    script_author(bot)
    send_command(bot, "/beam author fix the typo in README", number=11)
    push_id, commit, comment_id = held_push(bot, 11)
    branch = rows(bot)[0]["branch"]
    assert branch.startswith("beam/pr-11/author-") and branch != "beam/pr-11/author-12345678"
    assert stored_context(bot, push_id)["expected_tip"] is None
    bot.fake.add_reaction(comment_id, "boss", "+1")
    wait_for(lambda: push_state(bot, push_id) == "pushed", what="the push")
    assert bot.git.ref_sha(REPO, "refs/heads/beam/pr-11/author-12345678") == impostor
    assert commit_at(bot, commit).parents[0].id == pygit2.Oid(hex=impostor)
    pulls = wait_for(lambda: [p for p in bot.fake.pulls_of(REPO) if p.head_ref == branch], what="the PR")
    assert pulls[0].base_ref == "beam/pr-11/author-12345678"
