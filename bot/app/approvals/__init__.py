"""Held pushes: `/beam author` and `/beam docs` (with follow-ups on the bot's own branches), `/beam
update`, the approval comment and its poller, the rules, the state machine, the one push path, their
comment texts, and the `beam-bot pending` listing.

May import runs, github, git, jobs and the root modules; never webhooks or web.
"""
