"""One skill run on a pull request or issue: its frozen `JobContext`, its plan (branch, writable paths,
the `/beam docs` policy), the prompt, host tools, the tracking comment, the diff map, and the text of
every run comment (render.py).

May import github, git, jobs and the root modules; never approvals, webhooks or web.
"""
