"""The GitHub App on top of the `bot.beam` framework; its packages are layered, top to bottom.

action (`beam-bot action`: one Actions event, over web's intake) · web (HTTP) · assembly (wires
the parts; cli hands it to web) · webhooks · approvals · runs ·
effects (the journal of GitHub writes) · credentials (where a process finds the App's credentials:
its environment, the work directory, the database) · {github, git, jobs, limits} (adapters, the
queue, what runs may use) · root modules usable by all: commands, repo_config, permissions, settings
(every BEAM_* variable, and the BEAM_SECRET_KEY keyring). An import
may only point down this list; tests/app/test_layers.py checks it.
"""
