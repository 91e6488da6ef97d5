"""The in-jail forwarder: 127.0.0.1:PORT inside the jail's empty network namespace -> the bot's proxy
socket (bound into the jail). Run by the jail's own `python` during `checks_setup` only.

Stdlib only, and free of `bot` imports: it runs with the check's interpreter, which has none of the
bot's packages. It decides nothing: the allowlist is the proxy's, on the host side of the socket, so a
setup that replaces or bypasses this forwarder reaches nothing more.

Usage: python forward.py PORT SOCKET  (returns once listening; the forwarding goes on in a child)
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import sys


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(1 << 16):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(ConnectionError, OSError, RuntimeError):
            if writer.can_write_eof():
                writer.write_eof()


async def _serve(listener: socket.socket, path: str) -> None:
    async def one(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_unix_connection(path)
        except OSError:
            writer.close()
            return
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        for w in (writer, up_writer):
            w.close()

    server = await asyncio.start_server(one, sock=listener)
    async with server:
        await server.serve_forever()


def main(argv: list[str]) -> int:
    port, path = int(argv[1]), argv[2]
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(64)
    if os.fork() > 0:
        return 0  # listening already: the setup may connect as soon as we return
    os.setsid()
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    asyncio.run(_serve(listener, path))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
