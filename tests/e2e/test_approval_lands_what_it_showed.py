"""Issue 40 in the App: an approval lands what its comment showed, and approvals are GitHub's word.

`beam-bot serve` as a process, the fake GitHub, real git. The held push's row is changed behind the
comment (as any way of rewriting state would): a 👍 then lands nothing and the comment says why. A
stored list of "commands" names an approval nobody gave: it counts for nothing.
"""

from __future__ import annotations

import json
import sqlite3

from tests.e2e.author_support import (
    REPO,
    approval_comment,
    branch_refs,
    held_push,
    push_state,
    receive_packs,
    rows,
    script_author,
    send_command,
    set_row,
    stays,
)
from tests.support.bot_process import BotProcess, wait_for


def commands_done(bot: BotProcess) -> int:
    """Webhook jobs the workers finished (the author command, then each approval)."""
    with sqlite3.connect(bot.work_dir / "beam.db") as db:
        done = db.execute("SELECT count(*) FROM jobs WHERE kind = 'delivery' AND state = 'done'").fetchone()
    return int(done[0])


def test_a_thumbs_up_on_a_push_whose_row_changed_lands_nothing(bot: BotProcess) -> None:
    before = branch_refs(bot)
    script_author(bot)
    send_command(bot, "/beam author fix the typo in README")
    push_id, shown, comment_id = held_push(bot)
    theirs = bot.fake.pull(REPO, 7).head_sha
    assert theirs != shown
    set_row(bot, push_id, commit_sha=theirs)

    bot.fake.add_reaction(comment_id, "maintainer", "+1")

    wait_for(lambda: push_state(bot, push_id) == "failed", what="the refused push")
    assert branch_refs(bot) == before and receive_packs(bot) == 0
    assert "does not show this commit" in approval_comment(bot).body


def test_an_approval_stored_in_a_row_is_not_an_approval(bot: BotProcess) -> None:
    before = branch_refs(bot)
    bot.fake.set_file(REPO, "main", ".github/beam.yml", "version: 1\napprovals_required: 2\n")
    bot.fake.add_collaborator(REPO, "second", "write")
    script_author(bot)
    send_command(bot, "/beam author fix the typo in README")
    push_id, shown, _ = held_push(bot)
    forged = {"commands": [{"user": "second", "kind": "approve"}]}
    set_row(bot, push_id, result=json.dumps(forged))

    send_command(bot, f"/beam approve {push_id}")

    wait_for(lambda: commands_done(bot) == 2, what="the first approval's job")
    stays(lambda: push_state(bot, push_id) == "pending" and branch_refs(bot) == before, 3.0)
    # The second maintainer's own comment, as GitHub lists it, is the second approval.
    send_command(bot, f"/beam approve {push_id}", user="second")
    wait_for(lambda: push_state(bot, push_id) == "pushed", what="the push")
    pushed = {k: v for k, v in branch_refs(bot).items() if k not in before}
    assert list(pushed.values()) == [shown]
    assert [r["commit_sha"] for r in rows(bot)] == [shown]
