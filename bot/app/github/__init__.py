"""The GitHub adapter, on gidgethub: HTTP with retries and rate limits, App auth and tokens, typed calls,
payload and API models, the App's own identity.

May import only the root modules (and bot.beam); nothing here knows about jobs, runs or approvals.
"""
