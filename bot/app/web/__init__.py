"""The HTTP side: the Starlette app and its lifespan, webhook intake, setup mode, metrics, the server.

Owns the process's resources (store, GitHub HTTP client, worker pool). May import jobs and the root
modules; it never imports the job handler's packages: cli hands it `assembly.build_handler`.
"""
