"""Deliveries to actions: the pure decision on a comment, the (event, action) table, the command
table, and the job dispatcher that also routes other job kinds.

May import approvals, reviews, runs, github, git, jobs and the root modules; nothing imports it but assembly.
"""
