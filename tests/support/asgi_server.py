"""One way to serve a test fake (an ASGI app) on loopback: uvicorn in a thread on a random port.

Every fake uses it, so each gets TCP_NODELAY (a response written in two pieces must not wait for the
client's delayed ACK) and a bounded start.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn


@contextmanager
def serve_asgi(app: Any, what: str, host: str = "127.0.0.1", **config: Any) -> Iterator[str]:
    """Serves `app` on `host` (loopback unless a test's other hosts must reach it) until the block
    ends; yields `http://<host>:<port>`."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # inherited by accepted connections
    sock.bind((host, 0))
    port = sock.getsockname()[1]
    options: dict[str, Any] = {"log_level": "warning", "lifespan": "off", "ws": "none", "access_log": False}
    server = uvicorn.Server(uvicorn.Config(app, **{**options, **config}))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the {what} did not start")
            time.sleep(0.005)
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()
