"""Several hosts on this machine: Linux network namespaces joined to the root namespace by a bridge.

Issue 23 asks for workers that share nothing but PostgreSQL. A host here is a network namespace with
its own loopback, one veth into a bridge in the root namespace and its own address on a private /24;
it reaches the root side's services (the fake GitHub, the git server, PostgreSQL through a forwarder)
only over that veth, as a VM reaches its neighbours. Processes run in it through `ip netns exec`.

Every name carries a random tag, so runs that overlap on one machine never meet, and `close()` takes
down every namespace and the bridge even when a test failed half way (a fixture's finalizer).
`unavailable()` says why namespaces cannot be made here (not root, no `ip`, EPERM), for a skip.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import os
import shutil
import subprocess
import threading
import uuid
from dataclasses import dataclass, field
from types import TracebackType

IP = "ip"
_TIMEOUT = 10  # seconds for one `ip` command: they take milliseconds


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run([IP, *args], capture_output=True, text=True, timeout=_TIMEOUT, check=check)


def unavailable() -> str | None:
    """Why this machine cannot make network namespaces, or None when it can (checked by making one)."""
    if shutil.which(IP) is None:
        return "no `ip` command (Debian's iproute2): apt-get install iproute2"
    if os.geteuid() != 0:
        return "network namespaces need root (`ip netns add` is refused to other users)"
    probe = f"beam-probe-{uuid.uuid4().hex[:8]}"
    made = _ip("netns", "add", probe, check=False)
    if made.returncode != 0:
        return f"`ip netns add` failed here: {made.stderr.strip() or made.returncode}"
    _ip("netns", "delete", probe, check=False)
    return None


def _free_subnet() -> ipaddress.IPv4Network:
    """A /24 in 10.200.0.0/13 that no interface or route on this machine uses yet."""
    used = _ip("-4", "route", "show", "table", "all").stdout + _ip("-4", "addr").stdout
    for _ in range(200):
        candidate = ipaddress.IPv4Network(f"10.{200 + uuid.uuid4().int % 8}.{uuid.uuid4().int % 256}.0/24")
        prefix = str(candidate.network_address).rsplit(".", 1)[0] + "."
        if prefix not in used:
            return candidate
    raise RuntimeError("no free private /24 for the namespaced hosts")


@dataclass
class Host:
    """One namespace: its name, its address on the bridge, and the command prefix that runs in it."""

    name: str
    netns: str
    address: str

    def command(self, *argv: str) -> list[str]:
        return [IP, "netns", "exec", self.netns, *argv]


@dataclass
class Network:
    """A bridge in the root namespace (`gateway` is its address) and the hosts plugged into it."""

    tag: str = field(default_factory=lambda: uuid.uuid4().hex[:6])
    hosts: dict[str, Host] = field(default_factory=dict)
    subnet: ipaddress.IPv4Network | None = None

    @property
    def bridge(self) -> str:
        return f"bmh{self.tag}br"

    @property
    def gateway(self) -> str:
        assert self.subnet is not None, "the network is not up"
        return str(self.subnet.network_address + 1)

    def __enter__(self) -> Network:
        try:
            self.up()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def up(self) -> None:
        self.subnet = _free_subnet()
        _ip("link", "add", self.bridge, "type", "bridge")
        _ip("addr", "add", f"{self.gateway}/{self.subnet.prefixlen}", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")

    def add_host(self, name: str) -> Host:
        """A namespace with `lo` up and `eth0` on the bridge, at the next address of the /24."""
        assert self.subnet is not None, "the network is not up"
        index = len(self.hosts) + 1
        netns = f"beam-{self.tag}-{name}"
        outside, inside = f"bmh{self.tag}v{index}", f"bmh{self.tag}p{index}"
        address = str(self.subnet.network_address + 10 + index)
        _ip("netns", "add", netns)
        host = Host(name, netns, address)
        self.hosts[name] = host  # from here on close() removes it
        _ip("link", "add", outside, "type", "veth", "peer", "name", inside)
        _ip("link", "set", inside, "netns", netns)
        _ip("link", "set", outside, "master", self.bridge)
        _ip("link", "set", outside, "up")
        inns = ["netns", "exec", netns, IP]
        _ip(*inns, "link", "set", "lo", "up")
        _ip(*inns, "link", "set", inside, "name", "eth0")
        _ip(*inns, "addr", "add", f"{address}/{self.subnet.prefixlen}", "dev", "eth0")
        _ip(*inns, "link", "set", "eth0", "up")
        _ip(*inns, "route", "add", "default", "via", self.gateway)
        return host

    def close(self) -> None:
        """Delete every namespace (its veth end goes with it, and the root end with that), then the
        bridge; errors are ignored so that a half-made network is still taken down."""
        for host in self.hosts.values():
            _ip("netns", "delete", host.netns, check=False)
        self.hosts.clear()
        for index in range(1, 10):
            if _ip("link", "show", f"bmh{self.tag}v{index}", check=False).returncode == 0:
                _ip("link", "delete", f"bmh{self.tag}v{index}", check=False)
        _ip("link", "delete", self.bridge, check=False)


class TcpForwarder:
    """A TCP relay in the root namespace: `listen` (a bridge address) to `target` (a loopback service).

    The system's PostgreSQL listens on 127.0.0.1 only; rather than reconfigure it, hosts reach it here.
    Connections appear to it from 127.0.0.1, so its trust rules apply unchanged. The relay runs its own
    asyncio loop in a thread; `close()` stops it within a bounded wait.
    """

    def __init__(self, listen: str, target: tuple[str, int]) -> None:
        self.listen = listen
        self.target = target
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="tcp-forwarder", daemon=True)
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    def __enter__(self) -> TcpForwarder:
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    async def _start(self) -> asyncio.Server:
        return await asyncio.start_server(self._relay, self.listen, 0)

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.wait_for(asyncio.open_connection(*self.target), 10)
        except (OSError, TimeoutError):
            writer.close()
            return
        self._writers.update((writer, up_writer))
        await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            self._writers.discard(writer)
            with contextlib.suppress(OSError, RuntimeError):
                writer.close()

    async def _stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for writer in list(self._writers):
            with contextlib.suppress(OSError, RuntimeError):
                writer.close()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def close(self) -> None:
        if not self._thread.is_alive():
            return
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()
