"""What the model reads: the diff packed within a call's token budget, focused hunks, the grammars and
linters that find them, and the prompt every skill is given.

Kept apart from `runs/` (a skill's lifecycle) and `reviews/` (what becomes of the answer), so that a
newcomer finds everything a model is shown in one package.

May import github, limits, repo_config and the root modules; never runs, reviews, approvals, webhooks
or web.
"""
