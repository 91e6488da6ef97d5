"""`beam-bot --help` as a newcomer reads it: whole sentences that name every command there is."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys

from bot.cli import _parser


def _commands(parser: argparse.ArgumentParser) -> list[str]:
    found = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert len(found) == 1
    return list(found[0].choices)


def test_the_description_is_whole_sentences_naming_every_command() -> None:
    parser = _parser()
    description = parser.description or ""
    commands = _commands(parser)
    assert commands == [
        "serve",
        "worker",
        "action",
        "run",
        "review",
        "summarize",
        "ask",
        "check-model",
        "pending",
        "prune",
        "usage",
        "secret-key",
    ]
    assert description.endswith(".") and description[0].isalpha()
    for command in commands:  # a command added later fails here until the help says what it does
        assert f"`{command}`" in description, command


def test_help_prints_the_description_and_every_command() -> None:
    shown = subprocess.run(
        [sys.executable, "-m", "bot.cli", "--help"], capture_output=True, text=True, timeout=60, check=False
    )
    assert shown.returncode == 0, shown.stderr
    text = " ".join(shown.stdout.split())
    assert " ".join((_parser().description or "").split()) in text
    assert "each builds what it" not in text  # the first line of the docstring, cut mid-sentence
    assert "exit code 2, before anything runs." in text
    for command in _commands(_parser()):  # argparse puts the longest name's help on the next line
        assert re.search(rf"\n    {command}\s", shown.stdout), command
