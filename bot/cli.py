"""The `beam-bot` command: `serve`, `worker`, `run`, `check-model`, `pending`, `prune`, `usage`,
`secret-key`; each builds what it needs, then runs.

A wrong setting, database or port is one line on stderr and exit code 2, before anything runs.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from bot import package_version

if TYPE_CHECKING:
    from bot.app.settings import Settings

# What `beam-bot --help` opens with: whole sentences, every subcommand named (tests/test_cli_help.py).
DESCRIPTION = (
    "beam-bot brings the Riverbeam agent framework to GitHub pull requests. `serve` runs the GitHub "
    "App (webhooks and workers) and `worker` runs more workers beside it; `action` answers one event "
    "inside a GitHub Actions job; `review`, `summarize` and `ask` work on a pull request's URL from a "
    "terminal; `run` tries a skill on a local git checkout, without GitHub; `check-model` says what "
    "works with the configured model (key, model name, tools, structured output); `pending` lists held "
    "pushes, `prune` removes old records and `usage` reports runs, tokens and cost; `secret-key` "
    "prints a new key for BEAM_SECRET_KEY."
)
EPILOG = "A wrong setting, database or port is one line on stderr and exit code 2, before anything runs."


RUN_HELP = "run a skill on a local git checkout, without GitHub"


def _run_arguments(run: argparse.ArgumentParser) -> argparse.ArgumentParser:
    run.add_argument("skill", help="a command name (review, summarize, commit-notes, ask, author, docs)")
    run.add_argument(
        "instructions", nargs="?", default="", help="what to do (default: the GitHub command's own task)"
    )
    run.add_argument("--repo", type=Path, default=Path("."), help="the git checkout (default .)")
    run.add_argument("--ref", default="HEAD", help="the commit to work on (default HEAD)")
    run.add_argument(
        "--base",
        help="review, summarize, commit-notes, ask: the change is BASE...ref (default: the merge base "
        "with the default branch, or HEAD~1 on that branch)",
    )
    run.add_argument(
        "--branch", help="author, docs: the new branch for the run's commits (default beam/<skill>-<id>)"
    )
    run.add_argument(
        "--working-tree",
        action="store_true",
        help="include the checkout's uncommitted changes (a snapshot; the checkout is not touched)",
    )
    run.add_argument(
        "--json", action="store_true", help="print frames as JSON lines (review: the review object)"
    )
    decide = run.add_mutually_exclusive_group()
    decide.add_argument("--approve", action="store_true", help="allow pushes without asking")
    decide.add_argument("--deny", action="store_true", help="deny pushes without asking")
    return run


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="beam-bot", description=DESCRIPTION, epilog=EPILOG)
    parser.add_argument("--version", action="version", version=f"beam-bot {package_version()}")
    sub = parser.add_subparsers(dest="command", required=True, title="commands", metavar="<command>")

    serve = sub.add_parser("serve", help="run the GitHub App (webhooks and workers)")
    serve.add_argument("--host", help="address to bind (default BEAM_HOST, else 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port to bind (default BEAM_PORT, else 8080)")

    sub.add_parser("worker", help="run workers only, for a separate process (PostgreSQL)")
    action = sub.add_parser(
        "action",
        help="answer one GitHub Actions event (a /beam comment, a pull request), then exit",
    )
    action.add_argument(
        "--finish",
        action="store_true",
        help="the job's `if: always()` step: make final what a cancelled or timed-out run left working",
    )

    _run_arguments(sub.add_parser("run", help=RUN_HELP))
    for name, what in (
        ("review", "review a pull request by its URL and print the review"),
        ("summarize", "summarize a pull request by its URL"),
        ("ask", "answer a question about a pull request by its URL"),
    ):
        pull = sub.add_parser(name, help=what)
        pull.add_argument("url", help="https://github.com/OWNER/REPO/pull/N (or your GitHub Enterprise host)")
        if name == "ask":
            pull.add_argument("question", nargs="?", default="", help="what to ask")
        pull.add_argument("--post", action="store_true", help="post it on the pull request, as the App would")
        pull.add_argument("--json", action="store_true", help="print JSON (review: the review object)")

    sub.add_parser(
        "check-model",
        help="one small call to the configured model: whether the key, the model name, tools and "
        "structured output work, with a fix for what does not",
    )
    sub.add_parser("pending", help="list held pushes with their state and age")
    prune = sub.add_parser("prune", help="remove old deliveries, jobs and runs now (held pushes stay)")
    prune.add_argument("--days", type=float, help="keep this many days (default BEAM_RETENTION_DAYS, 30)")

    usage = sub.add_parser("usage", help="runs, tokens and estimated cost per repository and user")
    usage.add_argument("--since", default="7d", help="how far back: 7d, 12h, 30m, 2w (default 7d)")
    usage.add_argument("--repo", help="only this repository (owner/name)")

    secret_key = sub.add_parser("secret-key", help="print a new random key for BEAM_SECRET_KEY")
    secret_key.add_argument(
        "--reseal",
        action="store_true",
        help="instead, seal the stored App credentials again with the first key of BEAM_SECRET_KEY "
        "(a key rotation's middle step)",
    )
    return parser


def _pipe_closed() -> None:
    """The reader of stdout went away (`| head`): no traceback, and no second error when Python
    flushes stdout at exit (https://docs.python.org/3/library/signal.html#note-on-sigpipe)."""
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def _fail(message: str, prog: str = "beam-bot") -> int:
    print(f"{prog}: {message}", file=sys.stderr)
    return 2


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        return _command(_arguments(argv))
    except KeyboardInterrupt:
        # Ctrl-C where no command handles it itself: while Python imports, the arguments are read or
        # a setting is checked, in `check-model`, or `serve`, which stops gracefully and then raises
        # it again. `run` and `review <URL>` handle it themselves (bot/local/stop.py), saying what
        # they removed.
        return _stopped(argv[0] if argv and not argv[0].startswith("-") else "")


def _arguments(argv: list[str]) -> argparse.Namespace:
    if argv[:1] == ["run"]:
        # Intermixed, so the optional instructions may follow the options (`run review --repo . "..."`).
        run = _run_arguments(argparse.ArgumentParser(prog="beam-bot run", description=RUN_HELP))
        args = run.parse_intermixed_args(argv[1:])
        args.command = "run"
        return args
    return _parser().parse_args(argv)


def _stopped(command: str) -> int:
    """One line and exit code 130 (128 + SIGINT), as a shell reports a command Ctrl-C stopped."""
    import signal

    prog = f"beam-bot {command}" if command else "beam-bot"
    if command in ("serve", "worker"):
        print(f"{prog}: stopped by SIGINT (Ctrl-C)", file=sys.stderr)
    else:
        print(f"{prog}: ✗ stopped by SIGINT (Ctrl-C)", file=sys.stderr)
    return 128 + signal.SIGINT.value


def _command(args: argparse.Namespace) -> int:
    """The command `args` names, run to its exit code."""
    import anyio  # here, not at the top: the fewer imports before `main`, the less a Ctrl-C can hit

    if args.command == "run":
        from bot.local.git import UsageError
        from bot.local.options import RunOptions, check_arguments

        approve = True if args.approve else False if args.deny else None
        options = RunOptions(
            skill=args.skill,
            repo=args.repo,
            instructions=args.instructions,
            branch=args.branch,
            as_json=args.json,
            approve=approve,
            ref=args.ref,
            base=args.base,
            working_tree=args.working_tree,
        )
        try:
            repo, _ = check_arguments(options)
        except UsageError as error:
            return _fail(str(error), "beam-bot run")
        from functools import partial

        from bot.local.git import PendingStatus

        status = PendingStatus(repo)  # runs beside the imports below (a second or more on a big checkout)
        try:
            from bot.local.run import run_local

            code: int = anyio.run(partial(run_local, options, status=status))
        except BrokenPipeError:
            code = 141
        finally:
            status.close()
        if code == 141:
            _pipe_closed()
        return code
    if args.command in ("review", "summarize", "ask"):
        import os

        from bot.beam.errors import BeamError
        from bot.local.git import UsageError
        from bot.local.pull_target import PullOptions, check_pull

        pull_options = PullOptions(
            skill=args.command,
            url=args.url,
            instructions=getattr(args, "question", ""),
            post=args.post,
            as_json=args.json,
        )
        try:
            check_pull(pull_options, os.environ)
        except (BeamError, UsageError) as error:
            return _fail(str(error), f"beam-bot {args.command}")
        from bot.local.pull_request import run_pull

        pulled: int = anyio.run(run_pull, pull_options)
        return pulled
    if args.command == "check-model":
        import os

        from bot.local.check_model import check_model

        checked: int = anyio.run(check_model, dict(os.environ), sys.stdout)
        return checked
    if args.command == "action":
        import os

        from bot.app.action.environment import apply, model_inputs
        from bot.app.action.finish import finish_action
        from bot.app.action.render import one_line
        from bot.app.action.run import run_action
        from bot.beam.errors import BeamError

        try:
            # The Action's model inputs become the variables the model client reads (os.environ).
            changes = model_inputs(os.environ)
        except BeamError as error:
            print(f"beam-bot action: {one_line(error)}", file=sys.stderr)
            return 2
        apply(os.environ, changes)
        env = dict(os.environ)
        os.environ.pop("GITHUB_TOKEN", None)  # the token lives in memory: no child process inherits it
        try:
            return anyio.run(finish_action if args.finish else run_action, env, sys.stdout, sys.stderr)
        except KeyboardInterrupt:
            # Ctrl-C before the run watches for signals itself (while it starts): one line, no traceback.
            print("beam-bot action: stopped by SIGINT", file=sys.stderr)
            return 130
    if args.command == "secret-key" and not args.reseal:
        from bot.app.settings.secret_key import generate_key

        # Only the key on stdout, so that `BEAM_SECRET_KEY=$(beam-bot secret-key)` works.
        print(generate_key())
        return 0
    from bot.app.settings import SettingsError, load_settings

    try:
        settings = load_settings()
        if args.command == "serve":
            import os

            from bot.app.assembly import build_handler
            from bot.app.web.server import serve
            from bot.beam.model_check import start_line

            # One line on the model before the port opens: a wrong key shows at start, not at the
            # first pull request. Bounded, and never fatal (the line says what failed).
            print(anyio.run(start_line, dict(os.environ)), flush=True)
            serve(settings, args.host, args.port, handler_factory=build_handler)
            return 0
        if args.command == "worker":
            from bot.app.assembly import build_handler
            from bot.app.web.server import run_worker

            run_worker(settings, handler_factory=build_handler)
            return 0
        if args.command == "prune":
            return anyio.run(_prune, settings, args.days)
        if args.command == "secret-key":
            return anyio.run(_reseal, settings)
        if args.command == "usage":
            from bot.app.limits.report import print_usage

            return anyio.run(print_usage, settings, args.since, args.repo)
        return anyio.run(_pending, settings)
    except SettingsError as error:
        return _fail(str(error))


async def _pending(settings: Settings) -> int:
    from bot.app.approvals.pending_cli import format_rows, list_pending
    from bot.app.jobs.offline import NoDatabase, open_existing

    try:
        store, where = await open_existing(settings)
    except NoDatabase as nothing:
        print(f"{nothing}: no held pushes.")
        return 0
    try:
        print(f"Held pushes in {where}:")
        print(format_rows(await list_pending(store), time.time()))
    finally:
        await store.close()
    return 0


async def _reseal(settings: Settings) -> int:
    from bot.app.credentials.stored import reseal_stored
    from bot.app.jobs.offline import NoDatabase, open_existing

    keys = settings.secret_keys
    if keys is None:
        return _fail("BEAM_SECRET_KEY is not set: --reseal seals with its first key")
    try:
        store, where = await open_existing(settings)
    except NoDatabase as nothing:
        print(f"{nothing}: no stored credentials.")
        return 0
    try:
        done = await reseal_stored(store, keys)
    finally:
        await store.close()
    print(
        {
            "resealed": f"Sealed the App's credentials in {where} again with BEAM_SECRET_KEY's first key.",
            "current": f"The App's credentials in {where} are sealed with the first key already.",
            "none": f"{where} holds no App credentials.",
        }[done]
    )
    return 0


async def _prune(settings: Settings, days: float | None) -> int:
    from bot.app.jobs.offline import NoDatabase, open_existing
    from bot.app.jobs.retention import prune

    keep = settings.retention_days if days is None else days
    if keep <= 0:
        return _fail("retention is off (BEAM_RETENTION_DAYS=0): pass --days N to prune anyway")
    try:
        store, where = await open_existing(settings)
    except NoDatabase as nothing:
        print(f"{nothing}: nothing to prune.")
        return 0
    try:
        pruned = await prune(store, keep)
    finally:
        await store.close()
    print(f"Pruned {pruned.describe()} older than {keep:g} days from {where}; held pushes are kept.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
