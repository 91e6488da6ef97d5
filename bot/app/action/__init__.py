"""`beam-bot action`: the bot inside one GitHub Actions job, without a server (ARCHITECTURE section 14).

One event per workflow run, read from the standard Actions environment, goes through the App's own
parts (assembly.py: triage, permission check, `.github/beam.yml`, runs, reviews, posting, footer);
only the way the client authenticates (the workflow's GITHUB_TOKEN, github/auth.py's `TokenAuth`)
and where the queue lives (SQLite in the runner's temporary directory) differ.

The package sits above web (it reuses intake's job key and the app's metrics): it may import every
other package of bot.app; nothing imports it but the CLI.
"""
