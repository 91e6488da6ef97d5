"""Durable work: the database and its schema, the store, the job queue, the worker pool, and the
signals a job handler raises.

May import only the root modules; it knows nothing of what a job does.
"""
