"""Exactly-once effects on GitHub: the journal of every write a job makes, and the one path they take.

`journal.Journal` stores each write's intent and result under a deterministic key (run id + step);
`writer.GitHubEffects` makes the writes through it and, on a retry, reads GitHub to find out whether
an earlier attempt's write already happened (ARCHITECTURE.md section 10).

May import github, jobs and the root modules; never runs, approvals, reviews, webhooks or web.
"""
