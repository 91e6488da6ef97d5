"""`beam-bot run`: one skill on a local git checkout, without GitHub, with pushes asked for on the terminal.

`review`, `summarize`, `commit-notes` and `ask` work on a change (`--base`..`--ref`) exactly as the
GitHub commands work on a pull request with that diff: the change becomes the pull request's typed
objects (`change.py`), and the prompt, the tools and the limits come from the same builders
(`bot.app.context.prompt`, `bot.app.runs.skill_agent`). `author` and the framework's other skills run on
the checkout with the sandbox tools alone.

The package sits above both layers: it may import `bot.beam` and `bot.app`; neither imports it.
It imports nothing itself: `options.py` and `pull_target.py` check a command's arguments before
`run.py` and `pull_request.py` load the framework and the App (seconds on a slow disk), so a typo is
answered at once (bench/cli_startup.py).
"""
