"""`run_local`: the skill on a temporary worktree of the checkout, frames printed as they happen.

It uses the framework exactly as an outside host would (hub, runner, bound sandbox tools), so it is
also the smallest end-to-end check that the framework works. The run works in a temporary git
worktree at `HEAD` (or `--ref`, or `--working-tree`: a snapshot commit of the uncommitted changes),
never in the user's own checkout, which it leaves exactly as it was; a skill that only reads
(`review`, `summarize`, `commit-notes`, `ask`) adds no worktree at all: it reads the commit from the
repository's objects and writes only the change's files to a scratch directory, for the linters.
`review`, `summarize`, `commit-notes` and `ask` go through `change_run.py`, the GitHub path's own
builders; `author` and `docs` through `author_run.py`, which keeps their commits on a named branch
and asks on the terminal before a push. Errors and the final line of a failed run go to stderr.

A run stops with a clear message, before any model call, when there is nothing to do (an empty
change, `ask` or `author` without text). SIGINT, SIGTERM and SIGHUP cancel the run: the temporary
worktree is removed and one line says so (exit 128 + the signal's number).
"""

from __future__ import annotations

import sys
from typing import TextIO

import anyio

from bot.beam.completion import CompletionClient, EchoClient
from bot.beam.errors import BeamError
from bot.beam.openai_client import OpenAiCompatible
from bot.local.change_run import ChangeRun
from bot.local.git import (
    PendingStatus,
    ScratchDir,
    TemporaryWorktree,
    UsageError,
    commit_of,
    working_tree_commit,
)
from bot.local.options import CHANGE_SKILLS, RunOptions, check_arguments
from bot.local.stop import PIPE_CLOSED, signal_name, stoppable

ECHO = (
    "echo client (no BEAM_API_KEY): the text below is the prompt a real model would get; set "
    "BEAM_API_KEY (and BEAM_API_BASE_URL, BEAM_MODEL for another server: docs/models.md), or "
    "OPENAI_API_KEY, ANTHROPIC_API_KEY, GEMINI_API_KEY, or OLLAMA_HOST with BEAM_MODEL, to use one"
)


def pick_client() -> tuple[CompletionClient, str]:
    """A live model when an API key is set (the seed's variables), the echo client otherwise."""
    client = OpenAiCompatible.from_env()
    if client is None:
        return EchoClient(), ECHO
    return client, f"model {client.model} at {client.base_url}"


async def run_local(
    options: RunOptions,
    *,
    client: CompletionClient | None = None,
    out: TextIO = sys.stdout,
    stdin: TextIO = sys.stdin,
    err: TextIO = sys.stderr,
    status: PendingStatus | None = None,
) -> int:
    """Run the skill; returns a process exit code (0 done, 1 a BEM error, 2 bad usage, 128+N a signal).
    `status`: the checkout's `git status`, if the caller started it before importing this module."""
    ended = await stoppable(lambda: _run_local(options, client, out, stdin, err, status))
    if ended.code == PIPE_CLOSED:
        err.write("✗ stopped: the output pipe was closed, and the temporary worktree is removed\n")
    elif ended.signal is not None:
        name = signal_name(ended.signal)
        err.write(f"✗ stopped by {name}: nothing was pushed, and the temporary worktree is removed\n")
    return ended.exit_code


async def _run_local(
    options: RunOptions,
    client: CompletionClient | None,
    out: TextIO,
    stdin: TextIO,
    err: TextIO,
    status: PendingStatus | None,
) -> int:
    try:
        repo, skill = check_arguments(options)
        dirty = (status or PendingStatus(repo)).lines()
        if options.working_tree:
            if options.ref != "HEAD":
                raise UsageError("--working-tree reviews the uncommitted changes on HEAD: leave out --ref")
            options = options.with_ref(working_tree_commit(repo) if dirty else "HEAD")
        elif dirty:
            err.write(
                f"note: {len(dirty)} uncommitted change{'s' if len(dirty) != 1 else ''} in {repo} "
                f"{'are' if len(dirty) != 1 else 'is'} not part of this run (the run works on "
                f"{options.ref}); commit them, or pass --working-tree to include them\n"
            )
        change = None
        start = commit_of(repo, options.ref, "--ref")
        if skill.name in CHANGE_SKILLS:
            change = ChangeRun.prepare(repo, skill, options, start)
            if not change.change.files:
                raise UsageError(
                    f"the change {change.change.base.label}...{options.ref} is empty: nothing to "
                    f"{options.skill}; pass --base with an older commit, or commit the change first"
                )
        worktree = (
            ScratchDir(repo, options.ref) if change is not None else TemporaryWorktree(repo, options.ref)
        )
    except UsageError as error:
        err.write(f"beam-bot run: {error}\n")
        return 2
    if client is None:
        try:
            client, described = pick_client()
        except BeamError as error:
            err.write(f"beam-bot run: {error}\n")
            return 2
        if not options.as_json:
            out.write(f"using the {described}\n")
    code = 1
    try:
        with worktree:
            if not options.as_json:
                where = "reading" if change is not None else "working in a temporary worktree at"
                out.write(f"{where} {options.ref} ({worktree.commit[:12]})\n")
                out.flush()
            if change is not None:
                return await change.run(worktree.path, client, out, err)
            # Only a skill that writes needs the author's path (branches, pushes): a review starts without it.
            from bot.local.author_run import AuthorRun, run_author, run_branch

            author = AuthorRun(repo, run_branch(options), start, created=options.branch is None)
            code = await run_author(worktree.path, author, skill, options, client, out, stdin, err)
    except UsageError as error:
        err.write(f"beam-bot run: {error}\n")
        return 2
    finally:
        aclose = getattr(client, "aclose", None)
        if aclose is not None:
            with anyio.CancelScope(shield=True):
                await aclose()
    # After the worktree is gone: the run's branch is no longer checked out anywhere.
    where = author.where()
    if code == 0 and not options.as_json:
        out.write(where + "\n")
    elif code != 0:
        out.write(where + "\n")
        out.flush()
    return code
