"""`beam-bot run`: one skill on a local git checkout, no GitHub, with pushes asked for on the terminal.

It uses the framework exactly as an outside host would (hub, runner, bound sandbox tools), so it is
also the smallest end-to-end check that the framework works. The run works in a temporary git
worktree at `HEAD` (or `--ref`), never in the user's own checkout, which it leaves exactly as it was.
Frames go to stdout as they happen; errors and the final line of a failed run go to stderr.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from bot.beam.completion import CompletionClient, EchoClient
from bot.beam.errors import BeamError
from bot.beam.hub import RiverBeam
from bot.beam.openai_client import OpenAiCompatible
from bot.beam.runner import RigAgentRunner
from bot.beam.sandbox import SandboxRoot, WorkingTree
from bot.beam.sandbox_tools import sandbox_tools
from bot.beam.skills import Skill, builtin_skills
from bot.beam.types import (
    ActionResponseEnvelope,
    ActionResponseStatus,
    ContentPart,
    InvokeRequest,
    StreamChunk,
    StreamChunkType,
)

DEFAULT_PROTECTED = ("main", "master")
Decide = Callable[[dict[str, object]], bool]
# The GitHub command names (`/beam ask ...`), as bot.app.commands maps them to framework skills.
COMMAND_SKILLS = {
    "review": "review",
    "summarize": "summarize",
    "commit-notes": "commit-notes",
    "ask": "consume",
    "author": "author",
}
# Locally there are no host tools (search, get_page, ...): `ask` reads the checkout instead.
LOCAL_EXTRA_TOOLS = {"consume": ("list_tree", "read_file", "git_log", "git_diff")}


class UsageError(Exception):
    """Bad input to `beam-bot run` (exit code 2); the message says what to do."""


def local_skills(tool_names: set[str]) -> dict[str, Skill]:
    """The skills this host can run: those with at least one of their tools available here
    (so `gfs-publish`, whose only tool is the host's `publish_docset`, is not offered)."""
    offered: dict[str, Skill] = {}
    for skill in builtin_skills():
        tools = (*skill.tools, *LOCAL_EXTRA_TOOLS.get(skill.name, ()))
        if tool_names & set(tools):
            offered[skill.name] = Skill(skill.name, skill.system_prompt, tools)
    return offered


def resolve_skill(name: str, tool_names: set[str]) -> Skill:
    offered = local_skills(tool_names)
    skill = offered.get(COMMAND_SKILLS.get(name, name))
    if skill is None:
        commands = ", ".join(c for c, s in COMMAND_SKILLS.items() if s in offered)
        others = ", ".join(s for s in offered if s not in COMMAND_SKILLS.values())
        more = f" (or the framework's {others})" if others else ""
        raise UsageError(f"unknown skill {name!r}; choose from {commands}{more}")
    return skill


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=False, timeout=120
    )
    if done.returncode != 0:
        raise UsageError(done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "git failed")
    return done.stdout.strip()


def check_repository(path: Path) -> Path:
    """The repository's top level, or UsageError when `path` is missing or not a git work tree."""
    if not path.exists():
        raise UsageError(f"{path}: no such directory")
    if not path.is_dir():
        raise UsageError(f"{path} is not a directory")
    try:
        return Path(_git(path, "rev-parse", "--show-toplevel"))
    except UsageError:
        raise UsageError(f"{path} is not a git repository (or a checkout of one)") from None


class TemporaryWorktree:
    """`git worktree add --detach` at a commit in a temporary directory, removed again on exit."""

    def __init__(self, repo: Path, ref: str) -> None:
        self.repo = repo
        try:
            self.commit = _git(
                repo, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}"
            )
        except UsageError:
            raise UsageError(f"--ref {ref!r} is not a commit of {repo}") from None
        self.parent = Path(tempfile.mkdtemp(prefix="beam-run-"))
        self.path = self.parent / "tree"

    def __enter__(self) -> TemporaryWorktree:
        try:
            _git(self.repo, "worktree", "add", "--detach", "--quiet", str(self.path), self.commit)
        except BaseException:
            shutil.rmtree(self.parent, ignore_errors=True)
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        subprocess.run(
            ["git", "-C", str(self.repo), "worktree", "remove", "--force", str(self.path)],
            capture_output=True,
            check=False,
            timeout=120,
        )
        shutil.rmtree(self.parent, ignore_errors=True)
        subprocess.run(
            ["git", "-C", str(self.repo), "worktree", "prune"], capture_output=True, check=False, timeout=120
        )


@dataclass(frozen=True, slots=True)
class RunOptions:
    skill: str
    repo: Path
    instructions: str
    branch: str | None = None
    as_json: bool = False
    approve: bool | None = None  # None: ask on the terminal
    ref: str = "HEAD"


def pick_client() -> tuple[CompletionClient, str]:
    """A live model when an API key is set (the seed's variables), the echo client otherwise."""
    client = OpenAiCompatible.from_env()
    if client is None:
        return EchoClient(), "echo client (no BEAM_API_KEY)"
    return client, f"model {client.model} at {client.base_url}"


def protected_refs(repo: Path) -> list[str]:
    """main, master and the origin's default branch when the checkout knows it."""
    refs = list(DEFAULT_PROTECTED)
    try:
        target = _git(repo, "symbolic-ref", "--quiet", "refs/remotes/origin/HEAD")
    except UsageError:
        return refs
    target = target.removeprefix("refs/remotes/origin/")
    if target and target not in refs:
        refs.append(target)
    return refs


class FramePrinter:
    """Prints frames as they arrive: a compact human view, or JSON lines with `--json`."""

    def __init__(self, out: TextIO, as_json: bool) -> None:
        self.out = out
        self.as_json = as_json

    async def __call__(self, frame: StreamChunk) -> None:
        if self.as_json:
            self.out.write(json.dumps(frame.to_json(), ensure_ascii=False) + "\n")
        else:
            self.out.write(self.human(frame) + "\n")
        self.out.flush()

    @staticmethod
    def human(frame: StreamChunk) -> str:
        kind = frame.type
        if kind is StreamChunkType.TOOL and frame.data is not None:
            args = json.dumps(frame.data.tool_args, ensure_ascii=False, separators=(",", ":"))
            return f"  · {frame.data.tool_name} {args}"
        if kind is StreamChunkType.CHUNK:
            return frame.text
        if kind is StreamChunkType.DONE and frame.result is not None:
            result = frame.result
            if result.interrupted:
                return "⏸ waiting for approval"
            usage = result.token_usage
            tokens = f"{usage.total_tokens} tokens" if usage else "no usage"
            model = f", {result.model_used}" if result.model_used else ""
            return f"✓ done ({len(result.tool_calls)} tool calls, {tokens}{model})"
        if kind is StreamChunkType.ERROR:
            return f"✗ {frame.error}"
        if kind is StreamChunkType.THINKING:
            return "… thinking"
        return f"… {frame.text}"


def ask_terminal(action: dict[str, object], stdin: TextIO, out: TextIO) -> bool:
    args = json.dumps(action.get("args"), ensure_ascii=False)
    out.write(f"The agent wants to run {action.get('tool')} {args}. Allow? [y/N] ")
    out.flush()
    answer = stdin.readline().strip().lower()
    return answer in ("y", "yes")


async def run_local(
    options: RunOptions,
    *,
    client: CompletionClient | None = None,
    out: TextIO = sys.stdout,
    stdin: TextIO = sys.stdin,
    err: TextIO = sys.stderr,
) -> int:
    """Run the skill; returns a process exit code (0 done, 1 a BEM error, 2 bad usage)."""
    try:
        repo = check_repository(options.repo)
        probe = WorkingTree(SandboxRoot(repo), list(DEFAULT_PROTECTED))
        skill = resolve_skill(options.skill, {tool.spec().name for tool in sandbox_tools(probe)})
        worktree = TemporaryWorktree(repo, options.ref)
    except UsageError as error:
        err.write(f"beam-bot run: {error}\n")
        return 2
    if client is None:
        client, described = pick_client()
        if not options.as_json:
            out.write(f"using the {described}\n")
    try:
        with worktree:
            if not options.as_json:
                out.write(f"working in a temporary worktree at {options.ref} ({worktree.commit[:12]})\n")
                out.flush()
            return await _run_in(worktree.path, repo, skill, options, client, out, stdin, err)
    except UsageError as error:
        err.write(f"beam-bot run: {error}\n")
        return 2
    finally:
        aclose = getattr(client, "aclose", None)
        if aclose is not None:
            await aclose()


async def _run_in(
    path: Path,
    repo: Path,
    skill: Skill,
    options: RunOptions,
    client: CompletionClient,
    out: TextIO,
    stdin: TextIO,
    err: TextIO,
) -> int:
    tree = WorkingTree(SandboxRoot(path), protected_refs(repo))
    try:
        if options.branch:
            tree.checkout_branch(options.branch, True)
        hub = RiverBeam()
        tools = [tool for tool in sandbox_tools(tree) if tool.spec().name in set(skill.tools)]
        hub.register_agent(RigAgentRunner(skill.name, client, tools, skill))
        printer = FramePrinter(out, options.as_json)
        request = InvokeRequest(
            agent_name=skill.name,
            content=[ContentPart.text_part(options.instructions)],
            session_id=uuid.uuid4(),
            request_id=uuid.uuid4(),
        )
        outcome = await hub.invoke(request, on_frame=printer)
        while outcome.result.interrupted and outcome.result.action_required:
            envelopes = []
            for action in outcome.result.action_required:
                allowed = options.approve if options.approve is not None else ask_terminal(action, stdin, out)
                status = ActionResponseStatus.SUBMITTED if allowed else ActionResponseStatus.CANCELLED
                envelopes.append(
                    ActionResponseEnvelope(
                        action_id=str(action["action_id"]),
                        kind=str(action.get("kind", "confirmation")),
                        request_id=str(request.request_id),
                        status=status,
                        responder_id="terminal",
                    )
                )
                if not allowed and not options.as_json:
                    out.write(f"  ✗ {action.get('tool')} denied: nothing was run\n")
            resume = request.model_copy(
                update={
                    "content": [],
                    "interaction_id": outcome.result.interaction_id,
                    "request_id": uuid.uuid4(),
                    "actions": envelopes,
                }
            )
            outcome = await hub.invoke(resume, on_frame=printer)
    except BeamError as error:
        out.flush()
        err.write(f"✗ failed: {error}\n")
        return 1
    return 0
