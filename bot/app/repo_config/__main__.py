"""`python -m bot.app.repo_config`: print the JSON schema of `.github/beam.yml`, or check a file.

`--check FILE` prints one `FILE:LINE: message` per problem (compiler style, so editors can jump to
it), exits 1 when the file is invalid and 2 when it cannot be read.
"""

from __future__ import annotations

import argparse
import sys

from bot.app.repo_config import config_json_schema_text, parse_repo_config


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bot.app.repo_config", description=__doc__.splitlines()[0]
    )
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--schema", action="store_true", help="print the JSON schema of .github/beam.yml")
    group.add_argument("--check", metavar="FILE", help="validate a beam.yml file and list its problems")
    args = parser.parse_args(argv)
    if args.schema:
        sys.stdout.write(config_json_schema_text())
        return 0
    try:
        with open(args.check, encoding="utf-8") as handle:
            result = parse_repo_config(handle.read())
    except FileNotFoundError:
        print(f"{args.check}: no such file", file=sys.stderr)
        return 2
    except (OSError, UnicodeDecodeError) as exc:
        print(f"{args.check}: cannot read it: {getattr(exc, 'strerror', None) or exc}", file=sys.stderr)
        return 2
    for message, line in zip(result.errors, result.lines, strict=True):
        print(f"{args.check}:{line}: {message}" if line is not None else f"{args.check}: {message}")
    if result.ok:
        print(f"{args.check}: valid")
    return 0 if result.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
