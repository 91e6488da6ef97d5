"""The git adapter: per-repository mirrors, per-run working trees, pins and pushes, git plumbing.

May import only the root modules (and bot.beam); nothing here knows about GitHub's API or jobs.
"""
