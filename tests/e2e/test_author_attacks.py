"""Issue 4: tests that try to break held pushes, checked on the git server's refs and the fake GitHub."""

from __future__ import annotations

import sqlite3
import threading
import time

import pytest

from tests.e2e.author_support import (
    NUMBER,
    REPO,
    approval_comment,
    bot_comments,
    branch_refs,
    held_push,
    push_state,
    receive_packs,
    rows,
    script_author,
    send_command,
    set_row,
    stays,
    tracking_final,
    watch_jobs,
)
from tests.support.bot_process import BotProcess, deliveries_done, replay_finished_deliveries, wait_for


def permission_checks(bot: BotProcess, user: str) -> list[object]:
    calls = bot.fake.calls_to("repos/get-collaborator-permission-level")
    return [c for c in calls if c.path.endswith(f"/collaborators/{user}/permission")]


def hold(bot: BotProcess, user: str = "maintainer") -> tuple[str, str, int]:
    script_author(bot)
    send_command(bot, "/beam author fix the typo in README", user=user)
    return held_push(bot)


@pytest.mark.parametrize(
    ("ref", "code"),
    [
        ("main", "BEM-328"),
        ("refs/heads/main", "BEM-328"),
        ("HEAD:main", "BEM-328"),
        ("+main", "BEM-328"),
        (":main", "BEM-328"),
        ("Main", "BEM-328"),
        ("feature", "BEM-328"),
        ("beam/pr-7/author-deadbeef", "BEM-335"),
        ("https://evil.example/octo/demo.git", "BEM-335"),
    ],
)
def test_push_targets_other_than_the_run_branch_are_refused(bot: BotProcess, ref: str, code: str) -> None:
    before = branch_refs(bot)
    script_author(bot, {"ref": ref})
    send_command(bot, "/beam author fix the typo")
    final = wait_for(lambda: tracking_final(bot), what="the final comment")
    assert f"failed ({code})" in final and "Nothing was pushed" in final
    assert rows(bot) == [] and approval_comment(bot) is None
    assert branch_refs(bot) == before and receive_packs(bot) == 0


@pytest.mark.parametrize(
    ("path", "code"),
    [
        (".git/config", "BEM-337"),
        (".github/workflows/ci.yml", "BEM-334"),
        ("docs/workflows/evil.yml", "BEM-334"),
    ],
)
def test_writes_outside_the_allowed_paths_are_refused(bot: BotProcess, path: str, code: str) -> None:
    before = branch_refs(bot)
    script_author(bot, path=path)
    send_command(bot, "/beam author edit the workflow")
    final = wait_for(lambda: tracking_final(bot), what="the final comment")
    assert f"failed ({code})" in final
    assert rows(bot) == [] and branch_refs(bot) == before and receive_packs(bot) == 0


def test_answers_that_do_not_count_push_nothing(bot: BotProcess) -> None:
    push_id, _, comment_id = hold(bot)
    command_comment = bot.fake.comments_on(REPO, NUMBER)[0].id
    bot.fake.add_reaction(comment_id, "contributor", "+1")  # the PR author, read permission
    bot.fake.add_reaction(comment_id, "ci-bot[bot]", "+1")  # a bot
    bot.fake.add_reaction(command_comment, "boss", "+1")  # an admin, on another comment
    bot.fake.add_reaction(comment_id, "boss", "heart")  # a reaction that is no answer
    stays(lambda: push_state(bot, push_id) == "pending", 2.5)
    assert receive_packs(bot) == 0
    assert bot.fake.not_modified > 2  # unchanged reactions were polled with ETags (304s)...
    assert watch_jobs(bot) == 1  # ...by one job row that re-arms itself
    bot.fake.add_reaction(comment_id, "boss", "+1")
    wait_for(lambda: push_state(bot, push_id) == "pushed", what="the push")
    assert receive_packs(bot) == 1


def test_permission_is_checked_at_decision_time(bot: BotProcess) -> None:
    push_id, _, comment_id = hold(bot, user="maintainer")
    bot.fake.add_collaborator(REPO, "maintainer", "read")  # removed after the request
    asked_before = len(permission_checks(bot, "maintainer"))
    bot.fake.add_reaction(comment_id, "maintainer", "+1")
    # The poller saw the 👍 and asked GitHub for the permission now, not the one at request time.
    wait_for(
        lambda: len(permission_checks(bot, "maintainer")) > asked_before, what="a fresh permission check"
    )
    stays(lambda: push_state(bot, push_id) == "pending", 1.5)
    send_command(bot, f"/beam approve {push_id}", user="maintainer")
    reply = wait_for(
        lambda: next((c.body for c in bot_comments(bot) if "only people with write" in c.body), None),
        what="the short reply",
    )
    assert push_id in reply
    assert push_state(bot, push_id) == "pending" and receive_packs(bot) == 0


def test_an_edited_approval_comment_no_longer_counts(bot: BotProcess) -> None:
    push_id, _, comment_id = hold(bot)
    bot.fake.comments[comment_id].body += "\n\n(edited by someone with access)"
    bot.fake.add_reaction(comment_id, "boss", "+1")
    # The poller saw the 👍, read the comment back, and found it was not the one it posted.
    wait_for(
        lambda: any(
            c.path.endswith(f"/issues/comments/{comment_id}") for c in bot.fake.calls_to("issues/get-comment")
        ),
        what="the approval comment read back",
    )
    stays(lambda: push_state(bot, push_id) == "pending", 2.0)
    assert receive_packs(bot) == 0


def test_an_approval_after_expiry_pushes_nothing(bot: BotProcess) -> None:
    push_id, _, comment_id = hold(bot)
    set_row(bot, push_id, expires_at=time.time() - 1)  # a week has passed
    bot.fake.add_reaction(comment_id, "boss", "+1")
    wait_for(lambda: push_state(bot, push_id) == "expired", what="the expiry")
    wait_for(lambda: "Expired" in approval_comment(bot).body, what="the comment to say so")
    assert receive_packs(bot) == 0


def test_simultaneous_approvals_push_once(bot: BotProcess) -> None:
    push_id, commit, comment_id = hold(bot)
    threads = [
        threading.Thread(target=bot.fake.add_reaction, args=(comment_id, "boss", "+1")),
        threading.Thread(target=bot.fake.add_reaction, args=(comment_id, "maintainer", "+1")),
        threading.Thread(target=send_command, args=(bot, f"/beam approve {push_id}", "boss")),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wait_for(lambda: push_state(bot, push_id) == "pushed", what="the push")
    time.sleep(1.5)  # let every other answer be seen too
    assert receive_packs(bot) == 1
    assert bot.git.ref_sha(REPO, f"refs/heads/{rows(bot)[0]['branch']}") == commit
    assert len([p for p in bot.fake.pulls_of(REPO) if p.head_ref.startswith("beam/")]) == 1


def test_a_thumbs_up_and_a_thumbs_down_reject(bot: BotProcess) -> None:
    push_id, _, comment_id = hold(bot)
    bot.fake.add_reaction(comment_id, "maintainer", "+1")
    bot.fake.add_reaction(comment_id, "boss", "-1")
    wait_for(lambda: push_state(bot, push_id) == "rejected", what="the rejection")
    wait_for(lambda: "Rejected by @boss" in approval_comment(bot).body, what="the comment to say so")
    assert receive_packs(bot) == 0


def test_reject_command_and_refused_answers(bot: BotProcess) -> None:
    push_id, _, _ = hold(bot)
    send_command(bot, f"/beam approve {push_id}", user="contributor")
    wait_for(lambda: any("only people with write" in c.body for c in bot_comments(bot)), what="the refusal")
    send_command(bot, "/beam approve ffffffff", user="boss")
    wait_for(lambda: any("no held push `ffffffff`" in c.body for c in bot_comments(bot)), what="unknown id")
    send_command(bot, f"/beam reject {push_id}", user="maintainer")  # the requester withdraws it
    wait_for(lambda: push_state(bot, push_id) == "rejected", what="the rejection")
    assert receive_packs(bot) == 0


@pytest.mark.parametrize("crashed_in", ["approved", "pushing"])
def test_a_crash_between_approval_and_push_pushes_once_after_restart(
    bot: BotProcess, crashed_in: str
) -> None:
    push_id, commit, _ = hold(bot)
    bot.stop(kill=True)
    set_row(bot, push_id, state=crashed_in, decided_by="boss", decided_at=time.time())
    bot.start()
    wait_for(lambda: push_state(bot, push_id) == "pushed", timeout=45, what="the push after the restart")
    time.sleep(1.0)
    assert receive_packs(bot) == 1
    assert bot.git.ref_sha(REPO, f"refs/heads/{rows(bot)[0]['branch']}") == commit


def test_a_failed_push_is_recorded_and_can_be_retried(bot: BotProcess) -> None:
    push_id, commit, comment_id = hold(bot)
    good_token = bot.git.token
    bot.git.set_token("revoked-by-the-server")
    bot.fake.add_reaction(comment_id, "boss", "+1")
    wait_for(lambda: push_state(bot, push_id) == "failed", what="the failed push")
    body = wait_for(lambda: (c := approval_comment(bot).body) and "push failed" in c and c, what="the edit")
    assert f"/beam approve {push_id}" in body
    assert rows(bot)[0]["error"]
    bot.git.set_token(good_token)
    send_command(bot, f"/beam approve {push_id}", user="boss")
    wait_for(lambda: push_state(bot, push_id) == "pushed", what="the retried push")
    assert bot.git.ref_sha(REPO, f"refs/heads/{rows(bot)[0]['branch']}") == commit


def test_a_newer_author_run_supersedes_the_held_push(bot: BotProcess) -> None:
    first, _, first_comment = hold(bot)
    script_author(bot)
    send_command(bot, "/beam author fix it differently")
    wait_for(lambda: len(rows(bot)) == 2, what="the second held push")
    assert push_state(bot, first) == "superseded"
    wait_for(lambda: "Superseded" in bot.fake.comments[first_comment].body, what="the first comment edited")
    bot.fake.add_reaction(first_comment, "boss", "+1")
    stays(lambda: push_state(bot, first) == "superseded", 1.5)
    assert receive_packs(bot) == 0


def test_repository_config_can_forbid_self_approval(bot: BotProcess) -> None:
    bot.fake.set_file(REPO, "main", ".github/beam.yml", "version: 1\nself_approval: false\n")
    push_id, _, comment_id = hold(bot, user="maintainer")
    bot.fake.add_reaction(comment_id, "maintainer", "+1")
    stays(lambda: push_state(bot, push_id) == "pending", 2.0)
    bot.fake.add_reaction(comment_id, "boss", "+1")
    wait_for(lambda: push_state(bot, push_id) == "pushed", what="the push")


def test_invalid_repository_config_is_reported_and_defaults_apply(bot: BotProcess) -> None:
    bot.fake.set_file(REPO, "main", ".github/beam.yml", "version: 1\nskills: [deploy]\n")
    push_id, _, _ = hold(bot)
    report = wait_for(
        lambda: next(
            (c.body for c in bot_comments(bot) if "deploy" in c.body and "beam.yml" in c.body), None
        ),
        what="the config report",
    )
    assert "default" in report.lower()
    assert push_state(bot, push_id) == "pending"


def test_a_retried_author_job_does_not_ask_the_model_again(bot: BotProcess) -> None:
    push_id, _, _ = hold(bot)
    wait_for(lambda: tracking_final(bot) and deliveries_done(bot), what="the author job to end")
    asked = len(bot.llm.requests)
    bot.stop(kill=True)
    replay_finished_deliveries(bot)  # the worker died after the push was held, before the job ended
    bot.start()
    wait_for(lambda: deliveries_done(bot), timeout=45, what="the retried job to end")
    assert len(bot.llm.requests) == asked
    assert [r["state"] for r in rows(bot)] == ["pending"] and rows(bot)[0]["id"] == push_id
    assert len([c for c in bot_comments(bot) if "beam-push:" in c.body]) == 1
    assert f"held push `{push_id}`" in (tracking_final(bot) or "")


def test_a_push_held_just_before_the_worker_died_is_still_watched(bot: BotProcess) -> None:
    push_id, commit, comment_id = hold(bot)
    wait_for(lambda: deliveries_done(bot), what="the author job to end")
    bot.stop(kill=True)
    replay_finished_deliveries(bot)
    with sqlite3.connect(bot.work_dir / "beam.db") as db:  # it died before arming the poller
        db.execute("DELETE FROM jobs WHERE kind = 'push_watch'")
    bot.start()
    bot.fake.add_reaction(comment_id, "boss", "+1")
    wait_for(lambda: push_state(bot, push_id) == "pushed", timeout=45, what="the push")
    assert bot.git.ref_sha(REPO, f"refs/heads/{rows(bot)[0]['branch']}") == commit
    assert receive_packs(bot) == 1
