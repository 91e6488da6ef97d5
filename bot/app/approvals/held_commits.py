"""Held commits kept in the database (issue 23): packed when a push is held, restored into the mirror of
whichever worker pushes it.

A held push used to live only as `refs/beam/pending/<id>` in the mirror of the worker that ran the
author skill: a worker on another host, or the same host after its disk was lost, had nothing to push.
Now `pack_held_commit` bundles what the commit adds over the commits GitHub already has (capped by
`BEAM_MAX_HELD_PUSH_BYTES`, BEM-370), `Pushes.create` stores it with the push row in one transaction,
and before every push `restore_held_commit` makes sure the local mirror holds the approved commit:
from the local pin when it is there (a cache), else from the database, checked twice (the digest,
BEM-371, and the bundle's commit against the approved sha, BEM-372). Nothing else is pushed.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from bot.app.approvals.pushes import HeldCommit, HeldPush, Pushes
from bot.app.git.bundles import BundleTooLarge, bundle_header
from bot.app.git.checkout import CheckoutError, Checkouts, RunTree
from bot.beam.errors import BeamError

log = logging.getLogger("beam.approvals")
DEFAULT_MAX_HELD_PUSH_BYTES = 50 * 1024 * 1024

Refresh = Callable[[], Awaitable[str]]


async def commit_bases(
    checkouts: Checkouts, repo_full_name: str, run_tree: RunTree, commit: str
) -> list[str]:
    """What the commit builds on that GitHub has; call before `pin` (see `Bundles.commit_bases`)."""
    bases = await checkouts.commit_bases(repo_full_name, run_tree.path, commit)
    # A commit the mirror already had (nothing new in the run tree): bundle it over the run's base.
    return [run_tree.base_commit] if commit in bases else bases


async def pack_held_commit(
    checkouts: Checkouts,
    repo_full_name: str,
    push_id: str,
    ref: str,
    run_tree: RunTree,
    commit: str,
    bases: list[str],
    max_bytes: int = DEFAULT_MAX_HELD_PUSH_BYTES,
) -> HeldCommit:
    """Bundle the commit pinned at `ref`; over `max_bytes` the pin is dropped and BEM-370 raised, so
    nothing is held and the run's reply says what to do."""
    try:
        pack = await checkouts.bundle(repo_full_name, ref, bases, max_bytes)
    except BundleTooLarge as error:
        await checkouts.drop_pin(repo_full_name, ref)
        detail = (
            f"its objects take {error.size:,} bytes; at most {error.limit:,} can be held (push {push_id})"
        )
        raise BeamError("BEM-370", {"detail": detail}) from None
    return HeldCommit.of(commit, run_tree.base_commit, bases, pack)


def known_refs(push: HeldPush) -> list[str]:
    """The refs an author run of this push fetched: where its base commits are, if GitHub will not
    serve them by sha."""
    names = [f"refs/heads/{push.context.default_branch}"]
    if push.context.expected_tip is not None:
        names.append(f"refs/heads/{push.branch}")
    elif push.context.on_pull_request and push.number is not None:
        names.append(f"refs/pull/{push.number}/head")
    return [f"{name}:{name}" for name in names]


async def restore_held_commit(
    checkouts: Checkouts, pushes: Pushes, push: HeldPush, token: str, refresh: Refresh | None = None
) -> bool:
    """Make this host's mirror hold the push's approved commit under its pending ref, from the local
    pin when present, else from the database; True when it came from the database.

    A mirror that lacks the bundle's prerequisites (an empty work directory, another host) fetches them
    from GitHub first. Raises BEM-371 (digest), BEM-372 (another commit than the approved one),
    BEM-373 (a prerequisite GitHub no longer has), BEM-374 (no stored copy), or CheckoutError (git).
    """
    repo, url = push.repo, push.context.clone_url
    if await checkouts.holds(repo, push.pending_ref, push.commit_sha):
        return False
    held = await pushes.held_commit(push.id)
    if held is None:
        raise BeamError("BEM-374", {"detail": f"held push {push.id}, commit {push.commit_sha[:12]}"})
    prerequisites, heads = bundle_header(held.pack)
    if held.commit_sha != push.commit_sha or list(heads.values()) != [push.commit_sha]:
        found = ", ".join(sorted(set(heads.values()) | {held.commit_sha}))
        detail = f"held push {push.id} was approved as {push.commit_sha[:12]}; the stored copy holds {found}"
        raise BeamError("BEM-372", {"detail": detail[:300]})
    missing = await checkouts.missing_commits(repo, prerequisites)
    if missing or not checkouts.mirror_path(repo).exists():
        try:
            await checkouts.fetch_commits(repo, url, token, missing, refresh=refresh)
        except CheckoutError as error:  # a server that serves commits only by ref
            log.info("push %s: fetching its base by sha failed (%s); fetching its refs", push.id, error)
            await checkouts.update_mirror(repo, url, token, known_refs(push), refresh=refresh)
        missing = await checkouts.missing_commits(repo, prerequisites)
    if missing:
        raise BeamError("BEM-373", {"detail": f"held push {push.id} builds on {missing[0][:12]}"})
    await checkouts.unbundle(repo, held.pack, push.pending_ref, push.commit_sha)
    log.info("push %s: restored commit %s from the database", push.id, push.commit_sha[:12])
    return True
