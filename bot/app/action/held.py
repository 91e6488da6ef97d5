"""Held pushes between workflow runs: the pinned commit kept on GitHub as `refs/beam/pending/<id>`.

The run that holds a push publishes its pin under the same ref on GitHub: a ref outside
`refs/heads` is no branch, shows in no branch list, and a push made with the workflow's token starts
no workflow. The `/beam approve <id>` run, on a fresh runner, fetches it back into its mirror when
the approval comment's marker could not carry the commit's bundle (carry.py); either way the push
checks the commit against the approved SHA before anything reaches a branch (approvals/resume.py).
"""

from __future__ import annotations

import logging
from pathlib import Path

import anyio.to_thread
import pygit2

from bot.app.approvals.pushes import Pushes
from bot.app.git.checkout import Checkouts
from bot.app.git.plumbing import CheckoutError

log = logging.getLogger("beam.action")


async def publish_held(pushes: Pushes, checkouts: Checkouts, token: str, repo: str, number: int) -> set[str]:
    """Publishes the pins of the pull request's pending pushes; the ids whose pins are on GitHub."""
    published: set[str] = set()
    for push in await pushes.pending_for(repo, number):
        try:
            await checkouts.publish_pin(
                push.repo, push.context.clone_url, token, push.pending_ref, push.commit_sha
            )
        except CheckoutError as error:
            log.warning("push %s: its commit could not be kept on GitHub: %s", push.id, error)
            continue
        published.add(push.id)
    return published


async def fetch_held(pushes: Pushes, checkouts: Checkouts, token: str, repo: str, number: int) -> None:
    """Fetches the pins of carried pushes whose bundle was not carried into this run's mirror."""
    for push in await pushes.pending_for(repo, number):
        if await pushes.held_commit(push.id) is not None:
            continue
        ref = push.pending_ref
        # A fetch never writes under refs/beam/ (a mirror's pins: git/plumbing.py), so the commit
        # comes in beside it and is pinned only when it is the approved commit.
        fetched = "refs/remotes/" + ref.removeprefix("refs/")
        try:
            await checkouts.update_mirror(push.repo, push.context.clone_url, token, [f"{ref}:{fetched}"])
        except CheckoutError as error:  # then the approval says the commit is gone (BEM-374)
            log.warning("push %s: its commit could not be fetched from GitHub: %s", push.id, error)
            continue
        mirror = checkouts.mirror_path(push.repo)
        if not await anyio.to_thread.run_sync(_pin, mirror, fetched, ref, push.commit_sha):
            log.warning("push %s: GitHub's %s is not the held commit %s", push.id, ref, push.commit_sha[:12])


def _pin(mirror: Path, fetched: str, ref: str, sha: str) -> bool:
    repo = pygit2.Repository(str(mirror))
    target = repo.references.get(fetched)
    if target is None or str(target.target) != sha:
        return False
    repo.references.create(ref, sha, force=True)
    return True
