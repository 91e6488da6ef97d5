"""`beam-bot run author|docs` (and the framework's other skills): the skill on the temporary worktree,
its commits always on a named branch, and a push only after a terminal question that says what
would be pushed where.

The run's branch is `--branch`, or `beam/<skill>-<id>`: created at `--ref` in the user's repository
(the worktree shares its refs), so the commits outlive the temporary worktree, and the last line says
where they are. The push goes only to that branch on `origin`, asked for with the remote, the branch,
the commit and its diff stat; with no `origin`, nothing is asked and the branch stays local. `docs`
is `/beam docs`'s policy (bot.app.runs.docs): the author skill, allowed to write only `docs.paths`
of the repository's `.github/beam.yml` on its default branch.
"""

from __future__ import annotations

import json
import re
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import anyio.to_thread

from bot.app.repo_config import CONFIG_PATH, parse_repo_config
from bot.app.runs.docs import docs_plan
from bot.beam.completion import CompletionClient
from bot.beam.errors import BeamError
from bot.beam.hub import RiverBeam
from bot.beam.runner import RigAgentRunner
from bot.beam.sandbox import SandboxRoot, WorkingTree
from bot.beam.sandbox_tools import sandbox_tools
from bot.beam.skills import Skill
from bot.beam.types import ActionResponseEnvelope, ActionResponseStatus, ContentPart, InvokeRequest
from bot.local.git import default_branch, protected_refs, try_git
from bot.local.options import RunOptions
from bot.local.output import FramePrinter

_USERINFO = re.compile(r"//[^/@\s]*@")


@dataclass(frozen=True, slots=True)
class PushPlan:
    """What an approved push would do, as the terminal question says it."""

    remote: str | None  # origin's URL without credentials; None: no origin
    branch: str
    commit: str | None
    stat: str

    def question(self) -> str:
        commit = self.commit[:12] if self.commit else "(no commit)"
        stat = f"\n{self.stat}" if self.stat else ""
        return f"Push {commit} to branch {self.branch} on origin ({self.remote}){stat}\nAllow? [y/N] "


def run_branch(options: RunOptions) -> str:
    """`--branch`, else `beam/<command>-<8 hex>`: a new name each run, never an existing branch."""
    return options.branch or f"beam/{options.skill}-{uuid.uuid4().hex[:8]}"


def _origin(repo: Path) -> str | None:
    url = try_git(repo, "remote", "get-url", "origin")
    return _USERINFO.sub("//", url) if url else None


def _stat(path: Path, start: str, head: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(path), "diff", "--stat", f"{start}..{head}"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return done.stdout.rstrip()


def _task(options: RunOptions, repo: Path) -> tuple[str, tuple[str, ...] | None]:
    """The request's text, and the paths it may write (None: any but the blocked ones)."""
    if options.skill != "docs":
        return options.instructions, None
    branch = default_branch(repo)
    config = parse_repo_config(try_git(repo, "show", f"{branch}:{CONFIG_PATH}") if branch else None).config
    plan = docs_plan(config)
    task = options.instructions.strip() or plan.default_task
    return f"{plan.guidance}\n\n{task}", plan.allowed_paths


@dataclass
class AuthorRun:
    """Where a run's commits go, known before it starts; `pushed` once an approved push succeeded.
    `where()` is read after the temporary worktree is gone (a branch checked out there cannot be
    removed)."""

    repo: Path
    branch: str
    start: str
    created: bool
    pushed: bool = False

    def where(self) -> str:
        return where(self.repo, self.branch, self.start, pushed=self.pushed, created=self.created)


async def run_author(
    path: Path,
    run: AuthorRun,
    skill: Skill,
    options: RunOptions,
    client: CompletionClient,
    out: TextIO,
    stdin: TextIO,
    err: TextIO,
) -> int:
    repo, branch, start = run.repo, run.branch, run.start
    text, allowed = _task(options, repo)
    tree = WorkingTree(
        SandboxRoot(path), protected_refs(repo), allowed_paths=allowed, allowed_push_branches={branch}
    )
    printer = FramePrinter(out, "json" if options.as_json else "human", streams_from=client)
    try:
        tree.checkout_branch(branch, True)
        hub = RiverBeam()
        tools = [tool for tool in sandbox_tools(tree) if tool.spec().name in set(skill.tools)]
        hub.register_agent(RigAgentRunner(skill.name, client, tools, skill))
        request = InvokeRequest(
            agent_name=skill.name,
            content=[ContentPart.text_part(text)],
            session_id=uuid.uuid4(),
            request_id=uuid.uuid4(),
        )
        async with printer.alive():
            outcome = await hub.invoke(request, on_frame=printer)
        while outcome.result.interrupted and outcome.result.action_required:
            envelopes, asked_push = [], False
            for action in outcome.result.action_required:
                allowed_now = await _decide(action, tree, repo, path, branch, start, options, stdin, out)
                asked_push = asked_push or (allowed_now and action.get("tool") == "git_push")
                envelopes.append(
                    ActionResponseEnvelope(
                        action_id=str(action["action_id"]),
                        kind=str(action.get("kind", "confirmation")),
                        request_id=str(request.request_id),
                        status=ActionResponseStatus.SUBMITTED
                        if allowed_now
                        else ActionResponseStatus.CANCELLED,
                        responder_id="terminal",
                    )
                )
            resume = request.model_copy(
                update={
                    "content": [],
                    "interaction_id": outcome.result.interaction_id,
                    "request_id": uuid.uuid4(),
                    "actions": envelopes,
                }
            )
            async with printer.alive():
                outcome = await hub.invoke(resume, on_frame=printer)
            # The push ran when it was allowed and the resumed run went on without an error.
            run.pushed = run.pushed or asked_push
    except BeamError as error:
        out.flush()
        err.write(f"✗ failed: {error}\n")
        return 1
    return 0


async def _decide(
    action: dict[str, Any],
    tree: WorkingTree,
    repo: Path,
    path: Path,
    branch: str,
    start: str,
    options: RunOptions,
    stdin: TextIO,
    out: TextIO,
) -> bool:
    """The answer to one held action: `--approve`/`--deny`, else the terminal's. A push is asked
    with what it would push where; with no `origin` it is not asked at all."""
    tool = str(action.get("tool"))
    if tool == "git_push":
        remote = _origin(repo)
        commit = tree.head_oid()
        if remote is None:
            if not options.as_json:
                out.write(
                    f"  ✗ git_push: this checkout has no `origin`; the commits stay on branch {branch}\n"
                )
            return False
        plan = PushPlan(remote, branch, commit, _stat(path, start, commit) if commit else "")
        question = plan.question()
    else:
        args = json.dumps(action.get("args"), ensure_ascii=False)
        question = f"The agent wants to run {tool} {args}. Allow? [y/N] "
    if options.approve is not None:
        allowed = options.approve
    else:
        out.write(question)
        out.flush()
        answer = await read_answer(stdin)
        allowed = answer.strip().lower() in ("y", "yes")
    if not allowed and not options.as_json:
        out.write(f"  ✗ {tool} denied: nothing was run\n")
    return allowed


async def read_answer(stdin: TextIO) -> str:
    """A line typed on the terminal, waited for on the event loop: a worker thread blocked in
    `readline` cannot be stopped, and kept the process alive after Ctrl-C at the question."""
    try:
        fd = stdin.fileno()
    except (OSError, ValueError):  # io.UnsupportedOperation is both: a StringIO in a test
        return stdin.readline()
    await anyio.wait_readable(fd)
    return stdin.readline()


def where(repo: Path, branch: str, start: str, *, pushed: bool, created: bool) -> str:
    """The run's last line: where its commits are. A branch the run created and left without a
    commit is removed again (it would only be clutter)."""
    tip = try_git(repo, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}")
    if tip is None or tip == start:
        if created and tip is not None:
            try_git(repo, "branch", "-D", branch)
        return "→ no commits: nothing to push"
    count = try_git(repo, "rev-list", "--count", f"{start}..{tip}") or "?"
    commits = f"{count} commit{'s' if count != '1' else ''}"
    if pushed:
        return f"→ {commits} on branch {branch} ({tip[:12]}), pushed to origin"
    return f"→ {commits} on local branch {branch} ({tip[:12]}), not pushed: `git log {branch}` shows them"
