"""What the multi-host tests share: commands sent as GitHub would, and a `serve` kept busy on purpose.

`serve` runs a worker pool of its own. To show that a job is done on another host, the test fills
serve's one slot (`BEAM_CONCURRENCY=1`) with a summary whose model answer is slow, on a repository of
its own, before the other hosts start: every later job can only be claimed by them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import httpx

from tests.e2e.crash_support import seed_pulls
from tests.support.bot_process import SECRET, comment_payload, wait_for
from tests.support.multihost import Cluster, HostProcess
from tests.support.openai_server import chat_response, text_message
from tests.support.webhooks import delivery, issue_comment_payload

BOT = "beam-bot[bot]"
BUSY_REPO = "octo/busy"
T = TypeVar("T")


def wait_on(hosts: Cluster, check: Callable[[], T | None], timeout: float, what: str) -> T:
    """`wait_for`, and on a timeout every host's log as it is then (not as it was at the call)."""
    try:
        return wait_for(check, timeout=timeout, what=what)
    except AssertionError as timed_out:
        raise AssertionError(f"{timed_out}\n{hosts.log()}") from None


def send_command(serve: HostProcess, repo: str, number: int, body: str, *, patient: bool = False) -> int:
    """The command's comment exists on the fake GitHub and its signed delivery was accepted (202).
    `patient`: send again until accepted, as GitHub retries while `serve` is down."""
    comment = serve.fake.add_comment(repo, number, body, user="maintainer")
    payload = issue_comment_payload(
        body, repo=repo, number=number, commenter="maintainer", comment_id=comment.id
    )
    payload["repository"]["default_branch"] = "main"
    sent = delivery("issue_comment", comment_payload(serve, payload, repo), SECRET)
    deadline = time.monotonic() + (60 if patient else 0)
    while True:
        try:
            response = serve.send(sent)
            if response.status_code == 202:
                return comment.id
            problem = f"{response.status_code} {response.text}"
        except httpx.HTTPError as error:
            problem = repr(error)
        if time.monotonic() > deadline:
            raise AssertionError(f"the delivery was not accepted: {problem}")
        time.sleep(0.05)


def occupy(serve: HostProcess, seconds: float) -> None:
    """Fill `serve`'s only worker slot for `seconds`: a summary whose model answer takes that long.
    Returns once serve's run is waiting on the model; later replies in the model's queue are not
    held up (each request takes the next reply, on its own thread)."""
    seed_pulls(serve, BUSY_REPO, [1])
    before = len(serve.llm.requests)
    serve.llm.enqueue(chat_response(text_message("A slow summary.")), delay=seconds)
    send_command(serve, BUSY_REPO, 1, "/beam summarize")
    wait_for(lambda: len(serve.llm.requests) > before, timeout=30, what="serve's busy run to ask the model")
