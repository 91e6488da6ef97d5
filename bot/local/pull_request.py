"""`beam-bot review|summarize|ask <pull request URL>`: a pull request on GitHub, from a terminal.

The pull request is read through the API with a token (GITHUB_TOKEN, else GH_TOKEN, else what the
`gh` CLI is logged in with), its commits are fetched into a temporary repository (the token reaches
git only in its environment, never in argv or a file), and the run is `beam-bot run`'s change run
(change_run.py), the GitHub commands' own prompt, tools and review pass, with the pull request's
title and description. The review is printed as `run review` prints it, its draft built by the one
poster (reviews/posting.py); `--post` gives that poster a second door, `GitHubDoor`: inside the run,
the draft is posted with the same typed call the App makes (a review, event COMMENT, with the inline
comments it kept). A partial review is posted too, as the App posts one (its body says it is
partial); the run then says what is missing and exits 3. Another skill's answer is posted after the
run, as a comment.

`--post` posts only new findings: the App and the Action leave on each inline comment the finding's
key as a hidden marker (reviews/findings.py), and a finding already there in a comment of the bot's
login (BEAM_BOT_LOGIN, else the App's `beam-bot[bot]`) is not posted again, as an automatic review
does not repeat one. What is posted carries its marker too: posted with a token that acts as the
bot's login, every door sees it; a person's own comments are never read as the bot's.

GitHub Enterprise Server: https://HOST/OWNER/REPO/pull/N is read from https://HOST/api/v3
(GITHUB_API_URL, when set, names the API instead: a test's fake GitHub, or a proxy).
"""

from __future__ import annotations

import base64
import os
import shutil
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TextIO

import anyio
import httpx
from pydantic import SecretStr

from bot.app import markdown as md
from bot.app.github.api import GitHubApi, GitHubError
from bot.app.github.auth import ONE_INSTALLATION, TokenAuth
from bot.app.github.client import InstallationClient
from bot.app.github.models import PullRequest
from bot.app.reviews.findings import fresh_findings, known_keys
from bot.app.reviews.posting import Draft
from bot.beam.completion import CompletionClient
from bot.beam.errors import BeamError
from bot.local.change_run import ChangeRun
from bot.local.git import TemporaryWorktree, UsageError, check_repository, check_stopped
from bot.local.options import RunOptions, resolve_skill
from bot.local.output import EXIT_PARTIAL, inline_comments
from bot.local.pull_target import PullOptions, PullTarget, check_pull
from bot.local.stop import PIPE_CLOSED, signal_name, stoppable

# The login whose comments hold the findings already posted, when BEAM_BOT_LOGIN does not name the
# App's: the App registered from app.yml.
APP_LOGIN = "beam-bot[bot]"


def _git_env(token: SecretStr) -> dict[str, str]:
    """git's environment with the token as an HTTP header: in no argv, config file or URL."""
    basic = base64.b64encode(f"x-access-token:{token.get_secret_value()}".encode()).decode()
    return {
        **os.environ,
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": "http.extraHeader",
        "GIT_CONFIG_VALUE_0": f"Authorization: Basic {basic}",
    }


async def _git(repo: Path, *args: str, env: Mapping[str, str] | None = None) -> None:
    """git, as a child the run's cancellation stops (a fetch of a large repository takes minutes)."""
    with anyio.fail_after(600):
        done = await anyio.run_process(["git", "-C", str(repo), *args], env=env, check=False)
    # Ctrl-C reached git with us (one process group): our own stop says it in one line; git's
    # failure would be a second, misleading one.
    check_stopped(done.returncode)
    if done.returncode != 0:
        last = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["git failed"]
        raise UsageError(f"git {args[0]}: {last[0]}")


async def fetch_pull(
    parent: Path, pull: PullRequest, default_branch: str, clone_url: str, token: SecretStr
) -> Path:
    """A repository with the pull request's head, its base branch and the default branch (for
    `.github/beam.yml`, read from there as on GitHub), as `origin/...`."""
    repo = parent / "repo"
    await _git(parent, "init", "-q", str(repo))
    await _git(repo, "config", "user.name", "beam-bot")
    await _git(repo, "remote", "add", "origin", clone_url)
    refspecs = {
        f"refs/pull/{pull.number}/head:refs/remotes/pull/{pull.number}",
        f"+refs/heads/{pull.base.ref}:refs/remotes/origin/{pull.base.ref}",
        f"+refs/heads/{default_branch}:refs/remotes/origin/{default_branch}",
    }
    await _git(repo, "fetch", "-q", "--no-tags", "origin", *sorted(refspecs), env=_git_env(token))
    await _git(repo, "symbolic-ref", "refs/remotes/origin/HEAD", f"refs/remotes/origin/{default_branch}")
    return repo


async def run_pull(
    options: PullOptions,
    *,
    env: Mapping[str, str] | None = None,
    client: CompletionClient | None = None,
    out: TextIO = sys.stdout,
    err: TextIO = sys.stderr,
) -> int:
    """0 done, 1 a failed run or GitHub call, 2 bad usage (a bad URL, no token, a wrong model
    setting), 3 a partial review (with `--post`, posted, and what it misses said), 4 not reviewed,
    128+N a signal (Ctrl-C: 130), 141 a closed output pipe."""
    env = os.environ if env is None else env
    prog = f"beam-bot {options.skill}"
    posting = Posting()
    ended = await stoppable(lambda: _run_pull(options, env, client, out, err, posting))
    if ended.code == PIPE_CLOSED:
        err.write(f"{prog}: ✗ stopped: the output pipe was closed, and the temporary repository is removed\n")
    elif ended.signal is not None:
        err.write(f"{prog}: ✗ stopped by {signal_name(ended.signal)}{posting.left(options)}\n")
    return ended.exit_code


class Posting:
    """Whether a post was sent when a signal stopped the command. GitHub carries out a request whose
    client went away, so once it is sent, "nothing was posted" may be untrue: the stop line says
    what may have happened instead."""

    def __init__(self) -> None:
        self.sent: str | None = None  # what was sent: "review" or "comment"

    def left(self, options: PullOptions) -> str:
        if self.sent is not None:
            return (
                f" while posting: the {self.sent} may be on the pull request, "
                "and the temporary repository is removed"
            )
        what = "nothing was posted, and " if options.post else ""
        return f": {what}the temporary repository is removed"


async def _run_pull(
    options: PullOptions,
    env: Mapping[str, str],
    client: CompletionClient | None,
    out: TextIO,
    err: TextIO,
    posting: Posting,
) -> int:
    prog = f"beam-bot {options.skill}"
    try:
        target, token = check_pull(options, env)
    except (BeamError, UsageError) as error:
        err.write(f"{prog}: {error}\n")
        return 2
    parent = Path(tempfile.mkdtemp(prefix="beam-pull-"))
    try:
        async with httpx.AsyncClient(base_url=target.api_url, timeout=30.0) as http:
            gh = InstallationClient(
                TokenAuth(GitHubApi(http, base_url=target.api_url), token), ONE_INSTALLATION
            )
            try:
                pull = await gh.get_pull(target.owner, target.repo, target.number)
                repository = await gh.get_repo(target.owner, target.repo)
            except GitHubError as error:
                err.write(f"{prog}: {error}\n")
                return 1
            clone_url = repository.clone_url
            repo = await fetch_pull(parent, pull, repository.default_branch, clone_url, token)
            blob_base = f"{repository.html_url}/blob/{pull.head.sha}"
            return await _run(options, target, pull, repo, gh, client, out, err, env, posting, blob_base)
    except UsageError as error:
        err.write(f"{prog}: {error}\n")
        return 2
    except BeamError as error:  # a wrong model setting, found when the client is made
        err.write(f"{prog}: {error}\n")
        return 2
    finally:
        shutil.rmtree(parent, ignore_errors=True)


async def _run(
    options: PullOptions,
    target: PullTarget,
    pull: PullRequest,
    repo: Path,
    gh: InstallationClient,
    client: CompletionClient | None,
    out: TextIO,
    err: TextIO,
    env: Mapping[str, str],
    posting: Posting,
    blob_base: str,
) -> int:
    from bot.local.run import pick_client

    repo = check_repository(repo)
    run_options = RunOptions(
        skill=options.skill,
        repo=repo,
        instructions=options.instructions,
        as_json=options.as_json,
        ref=pull.head.sha,
        base=pull.base.sha,
    )
    skill = resolve_skill(options.skill, set())
    change_run = ChangeRun.prepare(repo, skill, run_options, pull.head.sha)
    # The prompt names the pull request as GitHub has it, not as a local change.
    change_run.change = replace(
        change_run.change,
        number=pull.number,
        repository=target.full_name,
        title=pull.title,
        body=pull.body,
        head_ref=pull.head.ref,
        base=replace(change_run.change.base, label=pull.base.ref),
        # The author wrote the change; the request is the terminal's (as `/beam review` names its
        # commenter, never the author): the author is data in the prompt, not who asked.
        author=pull.user.login if pull.user else None,
        asked_by=f"a terminal (beam-bot {options.skill})",
    )
    # The temporary repository is gone when the review is read: a tool's link points at GitHub.
    change_run.blob_base = blob_base
    door = None
    if options.post and options.skill == "review":
        login = env.get("BEAM_BOT_LOGIN") or APP_LOGIN
        door = change_run.door = GitHubDoor(gh, target, pull, login, posting)
        change_run.door_report = door.report
    owned = client is None
    if client is None:
        client, described = pick_client()
        if not options.as_json:
            out.write(f"using the {described}\n")
    try:
        if not options.as_json:
            out.write(f"{target.full_name}#{target.number}: {pull.title} ({pull.head.sha[:12]})\n")
            out.flush()
        with TemporaryWorktree(repo, pull.head.sha) as worktree:
            code = await change_run.run(worktree.path, client, out, err)
    finally:
        aclose = getattr(client, "aclose", None)
        if owned and aclose is not None:
            await aclose()
    if not options.post:
        return code
    # What is said after the run is for a person: with `--json`, stdout holds only what the run
    # printed as JSON (a review's object says where it was posted), and these lines go to stderr.
    said = err if options.as_json else out
    if door is None:  # another skill's answer: posted once the run is done
        if code != 0:
            return code
        posted = await _post_answer(options, target, change_run, gh, said, err, posting)
    elif door.drafts:
        posted = door.said(said, err)
    else:  # not reviewed, or failed before the review was done: nothing was posted
        return code
    if posted != 0 or code != EXIT_PARTIAL:
        return posted or code
    # A partial review is posted as the App posts it (its body says it is partial), then the exit
    # code still says what is missing.
    what = change_run.missing.removeprefix("**partial:** ") or "not every file was read."
    said.write(f"partial: the posted review covers part of the change: {what}\n")
    return EXIT_PARTIAL


async def new_findings(
    gh: InstallationClient, target: PullTarget, comments: list[dict[str, Any]], login: str
) -> list[dict[str, Any]]:
    """The comments whose finding is not on the pull request yet (in a comment of `login`), each
    with its marker as its last line: the automatic review's own test of "already made"."""
    if not comments:
        return []
    existing = await gh.list_review_comments(target.owner, target.repo, target.number, limit=3000)
    return fresh_findings(comments, None, known_keys(existing, login))


@dataclass
class GitHubDoor:
    """`--post`'s door for a review (reviews/posting.py `Door`): the draft the one poster built is
    posted from inside the run, as the App posts it: a review, event COMMENT, with the inline comments
    whose findings are not on the pull request yet (none new: nothing is posted, as an automatic
    review posts nothing). What happened is said after the printed review (`said`), so the terminal
    reads the review, its notes, then where it was posted; a GitHub error is kept for then too, and
    the run goes on to print what the model found."""

    gh: InstallationClient
    target: PullTarget
    pull: PullRequest
    login: str
    posting: Posting
    drafts: int = 0  # how many drafts the poster gave (a pass posts once)
    repeated: int = 0  # findings already on the pull request, not posted again
    where: str | None = None  # the posted review; None: nothing was posted
    error: GitHubError | None = None

    async def __call__(self, draft: Draft) -> int | None:
        self.drafts += 1
        try:
            fresh = await new_findings(self.gh, self.target, draft.comments, self.login)
            self.repeated = len(draft.comments) - len(fresh)
            if self.repeated and not fresh:
                return None
            self.posting.sent = "review"
            made = await self.gh.create_review(
                self.target.owner,
                self.target.repo,
                self.target.number,
                self.pull.head.sha,
                draft.body,
                "COMMENT",
                inline_comments(fresh),
            )
        except GitHubError as error:
            self.error = error
            return None
        self.where = made.html_url or f"review {made.id}"
        return made.id

    def report(self) -> dict[str, Any]:
        """Where the review went, inside `review --json`'s object: the review's URL (None: nothing
        was posted), the findings not posted again, GitHub's refusal."""
        posted: dict[str, Any] = {"url": self.where, "already_posted": self.repeated}
        if self.error is not None:
            posted["error"] = str(self.error)
        return {"posted": posted}

    def said(self, out: TextIO, err: TextIO) -> int:
        """Where the review went, after the printed review: 0, or 1 when GitHub refused it."""
        if self.error is not None:
            err.write(f"beam-bot review: not posted: {self.error}\n")
            return 1
        if self.repeated:
            out.write(f"note: {already_posted(self.repeated)}\n")
        out.write(f"posted: {self.where or 'nothing, no new findings'}\n")
        return 0


async def _post_answer(
    options: PullOptions,
    target: PullTarget,
    change_run: ChangeRun,
    gh: InstallationClient,
    out: TextIO,
    err: TextIO,
    posting: Posting,
) -> int:
    """Another skill's answer, as a comment on the pull request, shown as the App shows it: no `<!--`
    of it hides text (issue 40)."""
    text = change_run.answer.strip()
    if not text:
        err.write(f"beam-bot {options.skill}: the run gave no answer to post\n")
        return 1
    try:
        posting.sent = "comment"
        comment = await gh.create_comment(target.owner, target.repo, target.number, md.untrusted(text))
    except GitHubError as error:
        err.write(f"beam-bot {options.skill}: not posted: {error}\n")
        return 1
    out.write(f"posted: {comment.html_url}\n")
    return 0


def already_posted(count: int) -> str:
    noun = "finding is" if count == 1 else "findings are"
    return f"{count} {noun} already on the pull request and not posted again"
