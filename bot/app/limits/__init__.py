"""Costs and limits: what a run may use (policy) and what was used and counted (ledger).

It may import jobs (the store and its tables) and the root modules; runs and webhooks import it.
"""
