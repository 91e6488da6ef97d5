"""Automatic reviews: the per-pull-request state, what to review (pure), the review job, the summary
comment and check run, and answers in review threads the bot started.

May import runs, github, git, jobs and the root modules; never approvals, webhooks or web.
"""
