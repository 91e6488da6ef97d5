"""The maintainers' page (/dashboard, issue 44): its queries, tables, charts, pages, sessions and sign-in.

It may import jobs (the store and its tables), limits (prices), github (the API client), credentials
and the root modules; web mounts its routes, and nothing below web imports it.
"""
