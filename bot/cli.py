"""The `beam-bot` command: `serve`, `worker`, `run`, `pending`, `usage`; each builds what it needs, then
runs."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import anyio


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="beam-bot", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run the GitHub App (webhooks and workers)")
    serve.add_argument("--host", help="address to bind (default BEAM_HOST, else 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port to bind (default BEAM_PORT, else 8080)")

    sub.add_parser("worker", help="run workers only, for a separate process (PostgreSQL)")

    run = sub.add_parser("run", help="run a skill on a local git checkout, without GitHub")
    run.add_argument("skill", help="review, summarize, commit-notes, consume, author, ...")
    run.add_argument("instructions", help="what to do")
    run.add_argument("--repo", type=Path, default=Path("."), help="the git checkout (default .)")
    run.add_argument("--branch", help="create and check out this branch first")
    run.add_argument("--json", action="store_true", help="print frames as JSON lines")
    decide = run.add_mutually_exclusive_group()
    decide.add_argument("--approve", action="store_true", help="allow pushes without asking")
    decide.add_argument("--deny", action="store_true", help="deny pushes without asking")

    sub.add_parser("pending", help="list held pushes with their state and age")

    usage = sub.add_parser("usage", help="runs, tokens and estimated cost per repository and user")
    usage.add_argument("--since", default="7d", help="how far back: 7d, 12h, 30m, 2w (default 7d)")
    usage.add_argument("--repo", help="only this repository (owner/name)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "run":
        from bot.local_run import RunOptions, run_local

        approve = True if args.approve else False if args.deny else None
        options = RunOptions(
            skill=args.skill,
            repo=args.repo,
            instructions=args.instructions,
            branch=args.branch,
            as_json=args.json,
            approve=approve,
        )
        return anyio.run(run_local, options)
    from bot.app.settings import SettingsError, load_settings

    try:
        settings = load_settings()
    except SettingsError as error:
        print(f"beam-bot: {error}", file=sys.stderr)
        return 2
    from bot.app.assembly import build_handler

    try:
        if args.command == "serve":
            from bot.app.web.server import serve

            serve(settings, args.host, args.port, handler_factory=build_handler)
            return 0
        if args.command == "worker":
            from bot.app.web.server import run_worker

            run_worker(settings, handler_factory=build_handler)
            return 0
    except SettingsError as error:
        print(f"beam-bot: {error}", file=sys.stderr)
        return 2
    if args.command == "usage":
        from bot.app.limits.report import print_usage

        return anyio.run(print_usage, settings, args.since, args.repo)
    from bot.app.approvals.pending_cli import print_pending

    return anyio.run(print_pending, settings)


if __name__ == "__main__":
    raise SystemExit(main())
