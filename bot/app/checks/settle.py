"""The setup's supervisor in the jail: runs `checks_setup`, makes sure every process it started is
gone, and only then asks the bot for the archive pipe and starts the `tar` that fills it.

Stdlib only, and free of `bot` imports: it runs with the jail's own `python3 -I` (no user site, so
nothing the setup puts in /deps is ever imported here), exec'd by the wrapper before the setup starts.

Why a process of its own (issue 40): the wrapper used to hold the archive pipe's write end while the
setup ran, and in user-namespace mode the setup is the same uid as the wrapper, so it opened
`/proc/<wrapper>/fd/<n>` and wrote an archive of its own choosing. Now no process of the jail holds
that pipe while the setup runs: it does not exist yet. This supervisor holds only its channel to the
bot and the mark pipe, and makes itself not dumpable first, so no process of the same uid may open
its `/proc/<pid>/fd`, `mem` or `environ` (the check has no CAP_SYS_PTRACE in any namespace). The
archive pipe is created by the bot once this supervisor says the setup has settled, handed over the
channel, and given only to a `tar` started after every other process of the jail has ended.

Usage: python3 -I settle.py CHANNEL_FD MARK_FD DEPS COMMAND   (exits with the setup's status; writes
`packed` to MARK_FD once the archive is whole)
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import time

_PR_SET_DUMPABLE = 4
_FAILED = 125
_SETTLE_TRIES = 1000  # 10 ms apart: ten seconds for the kernel to finish killing what the setup left
_TAR = "/usr/bin/tar" if os.path.exists("/usr/bin/tar") else "/bin/tar"  # never a tar the setup put on PATH


def _say(text: str) -> None:
    sys.stderr.write(f"beam: {text}\n")
    sys.stderr.flush()


def _others() -> list[int]:
    """Live processes of the jail's pid namespace but its init (pid 1) and this one (zombies hold nothing)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in (1, os.getpid()):
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as stat:
                state = stat.read().rpartition(b")")[2].split()[0]
        except (OSError, IndexError):
            continue  # gone while we looked
        if state not in (b"Z", b"X"):
            found.append(int(name))
    return found


def _settle() -> bool:
    """SIGKILL to every process but init and this one (kill(-1) spares both), until none is left."""
    for _ in range(_SETTLE_TRIES):
        with contextlib.suppress(ProcessLookupError):
            os.kill(-1, signal.SIGKILL)
        if not _others():
            return True
        time.sleep(0.01)
    return False


def main(argv: list[str]) -> int:
    channel = socket.socket(fileno=int(argv[1]))
    mark, deps, command = int(argv[2]), argv[3], argv[4]
    if ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        _say("the setup's supervisor could not make itself undumpable; nothing ran")
        return _FAILED
    # close_fds (the default): the setup gets neither the channel nor the mark pipe.
    rc = subprocess.run(["/bin/sh", "-c", command], check=False).returncode
    rc = rc if rc >= 0 else 128 - rc
    if not _settle():
        _say("the setup's processes did not end; nothing was packed")
        return rc
    channel.sendall(b"settled")
    try:
        _, fds, _, _ = socket.recv_fds(channel, 16, 1)
    except OSError:
        fds = []
    if not fds:
        _say("the bot sent no archive pipe; nothing was packed")
        return rc
    try:
        packed = subprocess.run([_TAR, "-C", deps, "-cf", "-", "."], stdout=fds[0], check=False)
    finally:
        for fd in fds:
            os.close(fd)
    if packed.returncode == 0:
        os.write(mark, b"packed")
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv))
