"""Issue 23: a held push survives the loss of the work directory that held it. An author run holds a push;
the process stops and its whole work directory (mirrors, run trees) is deleted; the 👍 is handled by
a fresh process whose work directory is empty (on PostgreSQL a `beam-bot worker`, as a worker on
another host would), and the approved commit lands once, with the sha the approval comment showed."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pygit2
import pytest

from bot.app.jobs.schema import held_commits
from bot.app.jobs.store import pending_pushes
from tests.e2e.author_support import (
    REPO,
    approval_comment,
    author_stack,
    branch_refs,
    receive_packs,
    rows,
    script_author,
    send_command,
    tracking_final,
)
from tests.support.bot_process import BotProcess, wait_for
from tests.support.fleet import Fleet


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def fleet(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Fleet]:
    extra = (
        {} if request.param == "sqlite" else {"BEAM_DATABASE_URL": request.getfixturevalue("empty_pg_url")}
    )
    with author_stack(tmp_path, **extra) as bot:
        fleet = Fleet(bot, database_url=extra.get("BEAM_DATABASE_URL"))
        try:
            yield fleet
        finally:
            fleet.stop()


def push_row(fleet: Fleet) -> dict[str, Any] | None:
    found = fleet.rows(pending_pushes)
    return found[0] if found else None


def finished(fleet: Fleet) -> dict[str, Any] | None:
    row = push_row(fleet)
    return row if row is not None and row["state"] in ("pushed", "failed") else None


def pending_refs(work_dir: Path) -> dict[str, str]:
    mirror = work_dir / "mirrors" / "octo" / "demo.git"
    if not mirror.exists():
        return {}
    repo = pygit2.Repository(str(mirror))
    return {r: str(repo.references[r].target) for r in repo.references if r.startswith("refs/beam/pending/")}


def start_worker(fleet: Fleet, work_dir: Path) -> subprocess.Popen[bytes]:
    """`beam-bot worker` on a host of its own: the same database, a work directory it never shared."""
    env = {**fleet.bot.env(), "BEAM_WORK_DIR": str(work_dir)}
    log_path = work_dir.parent / "fresh-worker.log"
    fleet.logs.append(log_path)
    with log_path.open("wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "bot.cli", "worker"], env=env, stdout=log, stderr=log)
    fleet.procs.append(proc)
    return proc


def test_a_held_push_lands_from_a_fresh_work_directory(fleet: Fleet, tmp_path: Path) -> None:
    bot: BotProcess = fleet.bot
    before = branch_refs(bot)
    script_author(bot)
    send_command(bot, "/beam author fix the typo in README")
    comment = wait_for(lambda: approval_comment(bot), timeout=60, what=f"the approval comment\n{bot.log()}")
    shown = re.search(r"Commit `([0-9a-f]{40})`", comment.body)
    assert shown, comment.body
    commit = shown.group(1)
    row = wait_for(lambda: push_row(fleet), what="the held push's row")
    assert row["state"] == "pending" and row["commit_sha"] == commit
    # The commit is pinned on this host and stored with its push row.
    old_work = bot.work_dir
    assert pending_refs(old_work) == {f"refs/beam/pending/{row['id']}": commit}
    stored = fleet.rows(held_commits)
    assert [(s["push_id"], s["commit_sha"]) for s in stored] == [(row["id"], commit)]
    assert 0 < stored[0]["size"] < 100_000

    # The holding host goes away with its disk: mirrors, run trees, everything in its work directory
    # but, on SQLite, the database file itself.
    bot.stop()
    if fleet.database_url is None:
        for part in old_work.iterdir():
            if not part.name.startswith("beam.db"):
                shutil.rmtree(part) if part.is_dir() else part.unlink()
        assert {p.name for p in old_work.iterdir()} <= {"beam.db", "beam.db-wal", "beam.db-shm"}
        bot.start()
        fresh = old_work
    else:
        shutil.rmtree(old_work)
        fresh = tmp_path / "host-b" / "work"
        fresh.parent.mkdir()
        start_worker(fleet, fresh)
    assert pending_refs(fresh) == {}

    bot.fake.add_reaction(comment.id, "maintainer", "+1")
    final = wait_for(lambda: finished(fleet), timeout=60, what=f"the push\n{fleet.log()[-4000:]}")
    assert final["state"] == "pushed", final["error"]
    branch = final["branch"]
    after = branch_refs(bot)
    assert after[f"refs/heads/{branch}"] == commit
    assert {k: v for k, v in after.items() if k != f"refs/heads/{branch}"} == before
    assert receive_packs(bot) == 1
    readme = bot.git.repository(REPO)[commit].peel(pygit2.Tree) / "README.md"
    assert isinstance(readme, pygit2.Blob) and readme.data == b"Hello world\n"
    # The fresh host restored it from the database, and keeps it pinned as its own cache.
    assert "restored commit" in fleet.log()
    assert pending_refs(fresh) == {f"refs/beam/pending/{row['id']}": commit}
    pulls = wait_for(lambda: [p for p in bot.fake.pulls_of(REPO) if p.head_ref == branch], what="the PR")
    assert len(pulls) == 1


def test_a_commit_over_the_cap_is_refused_with_what_to_do(tmp_path: Path) -> None:
    with author_stack(tmp_path, BEAM_MAX_HELD_PUSH_BYTES="1024") as bot:
        body = os.urandom(4096).hex() + "\n"  # 8 kB that do not compress below the cap
        bot.llm.reply_tool_calls(("write_file", {"path": "README.md", "body": body}))
        bot.llm.reply_tool_calls(("git_add", {"path": "README.md"}), ("git_commit", {"message": "Big"}))
        bot.llm.reply_tool_calls(("git_push", {}))
        send_command(bot, "/beam author rewrite the README")
        final = wait_for(lambda: tracking_final(bot), timeout=60, what=f"the reply\n{bot.log()[-3000:]}")
        assert "failed (BEM-370)" in final and "nothing was held" in final
        assert "BEAM_MAX_HELD_PUSH_BYTES" in final and "at most 1,024" in final
        assert approval_comment(bot) is None and rows(bot) == []
        assert pending_refs(bot.work_dir) == {}  # the pin made before the bundle was dropped
        assert receive_packs(bot) == 0
