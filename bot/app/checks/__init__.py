"""Checks: a repository's own tests and linters, run on a held commit inside a bubblewrap jail.

`jail` is the way in (`run_checks`, `jail_status`); `bwrap` builds the jail's command line, `spawn`
runs it, `proxy` and `forward` give `checks_setup` its only network, `settle` supervises the setup in
its jail and `archive` unpacks what it installed. The flow around it (config,
the author skill's tool, the approval comment, the check run) is in the `flow` modules.

May import git, effects, repo_config and the root modules (it sits below runs and approvals).
"""
