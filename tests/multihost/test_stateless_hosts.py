"""Issue 23, items 1 and 2 seen from the hosts: nothing a job needs lives only on one host's disk.

- A push held by an author run on host b, whose disk is then lost (work directory deleted, process
  killed), is made once, after the 👍, by host c, which never had the commit: the held commit is in
  the database.
- The App's credentials, registered through the setup page of `serve` on host a, reach workers on b
  and c that were given only `BEAM_SECRET_KEY`: no credential file, no credential in their environment.

Both wait for the branches that store held commits and credentials in the database (w-held, w-creds);
the coordinator removes the skip marks at merge.
"""

from __future__ import annotations

import base64
import html
import re
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from sqlalchemy import text

from bot.app.jobs.store import Store
from bot.app.settings import CREDENTIALS_FILE
from tests.e2e.author_support import FILES, NUMBER, REPO, approval_comment, script_author, tracking_final
from tests.e2e.crash_support import seed_pulls
from tests.multihost.hosts_support import BOT, occupy, send_command, wait_on
from tests.support.bot_process import SECRET
from tests.support.fake_github_state import PullFile
from tests.support.fleet import in_own_loop
from tests.support.multihost import Cluster, HostProcess
from tests.support.openai_server import chat_response, text_message

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(170)]
# A Fernet key's form (32 bytes, url-safe base64), which a passphrase-deriving reader takes too.
SECRET_KEY = base64.urlsafe_b64encode(bytes(range(32))).decode()
SETUP_TOKEN = "multihost-setup-token"


def pending_pushes(hosts: Cluster) -> list[dict[str, Any]]:
    async def read() -> list[dict[str, Any]]:
        store = await Store.open(hosts.database_url)
        try:
            async with store.read() as conn:
                result = await conn.execute(text("SELECT * FROM pending_pushes ORDER BY created_at"))
                return [dict(r._mapping) for r in result]
        finally:
            await store.close()

    return in_own_loop(read)


def seed_author_pull(serve: HostProcess) -> str:
    """octo/demo with pull request 7 from `feature`, and a maintainer; returns the head sha."""
    main = serve.git.seed(REPO, FILES)
    head = serve.git.commit(REPO, {"src/app.py": "print(1)\n"}, branch="feature", message="Change app")
    serve.git.create_pull_ref(REPO, NUMBER, head)
    serve.fake.ref_resolver = lambda repo, ref: serve.git.ref_sha(repo, f"refs/heads/{ref}")
    serve.fake.add_repo(REPO)
    serve.fake.add_collaborator(REPO, "maintainer", "write")
    serve.fake.add_pull(
        REPO,
        number=NUMBER,
        title="Change app",
        user="contributor",
        head_ref="feature",
        head_sha=head,
        base_sha=main,
        files=[PullFile("src/app.py", patch="@@ -1 +1 @@\n-print(0)\n+print(1)\n")],
    )
    return head


def receive_packs(hosts: Cluster) -> int:
    return sum(1 for r in hosts.git.requests if r.method == "POST" and r.path.endswith("git-receive-pack"))


def test_a_push_held_on_a_host_whose_disk_is_lost_is_made_once_by_another(hosts: Cluster) -> None:
    hosts.env.update(BEAM_POLL_INTERVAL="0.6", BEAM_POLL_MIN_INTERVAL="0.2", BEAM_LEASE_SECONDS="3")
    serve = hosts.process("a", "serve")
    head = seed_author_pull(serve)
    serve.start()
    occupy(serve, 60)  # serve's one slot is busy: the run, the poll and the push happen on b and c
    b = hosts.start("b", "worker")
    script_author(serve)
    send_command(serve, REPO, NUMBER, "/beam author fix the typo in README")
    comment = wait_on(hosts, lambda: approval_comment(serve), 60, "the approval comment")
    wait_on(hosts, lambda: tracking_final(serve), 30, "the author run's final tracking comment")
    shown = re.search(r"Commit `([0-9a-f]{40})`", comment.body)
    assert shown, comment.body
    [row] = pending_pushes(hosts)
    assert row["state"] == "pending" and row["commit_sha"] == shown.group(1)
    branch = f"refs/heads/{row['branch']}"
    assert hosts.git.ref_sha(REPO, branch) is None and receive_packs(hosts) == 0
    assert "run" in b.jobs_run().values(), "the author run was not done on b"

    # Host b is lost with its disk: the mirror that pinned the held commit is gone.
    b.kill()
    hosts.wipe("b")
    c = hosts.start("c", "worker")
    serve.fake.add_reaction(comment.id, "maintainer", "+1")
    wait_on(hosts, lambda: pending_pushes(hosts)[0]["state"] == "pushed", 60, "the push by c")
    assert hosts.git.ref_sha(REPO, branch) == shown.group(1)
    assert receive_packs(hosts) == 1
    assert hosts.git.ref_sha(REPO, "refs/heads/feature") == head
    assert "push_watch" in c.jobs_run().values()
    edited = wait_on(
        hosts,
        lambda: (got := approval_comment(serve)) and "Approved by @maintainer" in got.body and got,
        30,
        "the approval comment's edit",
    )
    assert shown.group(1) in edited.body
    hosts.fake.assert_no_violations()


def register_through_the_setup_page(serve: HostProcess) -> None:
    """What an operator does in a browser: the token link, the manifest form, GitHub's redirect back."""
    with httpx.Client(base_url=serve.url, timeout=10, trust_env=False) as browser:
        assert browser.get("/", params={"token": SETUP_TOKEN}).status_code == 303
        page = browser.get("/")
        action = re.search(r'<form action="([^"]+)" method="post">', page.text)
        assert action, page.text
        [state] = parse_qs(urlsplit(html.unescape(action.group(1))).query)["state"]
        done = browser.get("/setup/callback", params={"code": "c0de1", "state": state})
        assert done.status_code == 200, done.text
        assert browser.get("/healthz").json() == {"status": "ok", "mode": "normal"}


def test_credentials_registered_on_a_reach_workers_that_never_had_them(hosts: Cluster) -> None:
    hosts.env.update(BEAM_SECRET_KEY=SECRET_KEY, BEAM_MAX_CONCURRENCY_PER_INSTALLATION="0")
    serve = hosts.process("a", "serve", credentials=False, BEAM_SETUP_TOKEN=SETUP_TOKEN)
    serve.fake.register_manifest_code(
        "c0de1",
        app_id=serve.fake.app_id,
        slug="beam-bot",
        pem=serve.fake.key.private_pem,
        webhook_secret=SECRET,
    )
    numbers = range(1, 5)
    seed_pulls(serve, "octo/many", numbers)
    serve.start()
    register_through_the_setup_page(serve)
    occupy(serve, 30)  # every job below is claimed by b or c
    workers = [hosts.start(name, "worker", credentials=False) for name in ("b", "c")]
    for worker in workers:
        assert not {"BEAM_APP_ID", "BEAM_PRIVATE_KEY", "BEAM_WEBHOOK_SECRET"} & set(worker.env())
    for number in numbers:
        serve.llm.enqueue(_summary(number), delay=1.0)  # each run holds its worker a moment
    for number in numbers:
        send_command(serve, "octo/many", number, "/beam summarize")

    def answered() -> bool:
        if not all(w.alive() for w in workers):
            raise AssertionError(f"a worker without credentials on disk stopped\n{hosts.log()}")
        return all(
            any(c.user == BOT and "Summary " in c.body for c in serve.fake.comments_on("octo/many", n))
            for n in numbers
        )

    wait_on(hosts, answered, 60, "every summary posted")
    ran = {name: sorted(p.jobs_run().values()) for name, p in hosts.procs.items()}
    assert all("run" in w.jobs_run().values() for w in workers), f"b and c did not both run: {ran}"
    # b and c signed App JWTs and used installation tokens with a key they never had on disk.
    pem = serve.fake.key.private_pem.encode()
    for name in ("b", "c"):
        assert not (hosts.work_dir(name) / CREDENTIALS_FILE).exists()
        for path in hosts.work_dir(name).rglob("*"):
            assert not (path.is_file() and pem in path.read_bytes()), path
    hosts.fake.assert_no_violations()


def _summary(number: int) -> dict[str, Any]:
    return chat_response(text_message(f"Summary {number}."))
