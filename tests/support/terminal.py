"""A command run on a pseudo-terminal, as a person runs it: its output is a terminal's (`isatty()` is
true), and Ctrl-C is the byte 0x03 typed into it, which the terminal turns into SIGINT for the
command's whole process group (git children included), exactly as a keyboard does.

Every read and wait is bounded: a test that hangs fails with what the command printed so far.
"""

from __future__ import annotations

import contextlib
import os
import pty
import re
import select
import signal
import time
from collections.abc import Mapping, Sequence

CTRL_C = b"\x03"


class Terminal:
    """One command on a pty (`pty.fork`): stdout and stderr both go to it, as on a real terminal."""

    def __init__(self, argv: Sequence[str], env: Mapping[str, str], cwd: str | None = None) -> None:
        pid, fd = pty.fork()
        if pid == 0:  # the child: becomes the command, the pty its controlling terminal
            try:
                if cwd is not None:
                    os.chdir(cwd)
                os.execve(argv[0], list(argv), dict(env))  # noqa: S606 (the command itself, as a shell runs it)
            finally:
                os._exit(127)
        self.pid, self.fd = pid, fd
        self.output = b""
        self.status: int | None = None

    @property
    def text(self) -> str:
        return self.output.decode(errors="replace")

    def _read(self, timeout: float) -> bool:
        """Reads what is there within `timeout`; False once the terminal is closed."""
        ready, _, _ = select.select([self.fd], [], [], max(0.0, timeout))
        if not ready:
            return True
        try:
            chunk = os.read(self.fd, 65536)
        except OSError:  # EIO: the command and all its children closed the terminal
            return False
        self.output += chunk
        return bool(chunk)

    def expect(self, pattern: str, timeout: float = 30.0) -> re.Match[str]:
        """Reads until `pattern` (a regex) is in the output; fails with the output on timeout."""
        deadline = time.monotonic() + timeout
        while True:
            found = re.search(pattern, self.text)
            if found is not None:
                return found
            left = deadline - time.monotonic()
            if left <= 0 or not self._read(min(left, 0.2)):
                found = re.search(pattern, self.text)
                if found is not None:
                    return found
                raise AssertionError(f"no {pattern!r} within {timeout} s; the terminal showed:\n{self.text}")

    def read_for(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0 and self._read(min(left, 0.2)):
            pass

    def ctrl_c(self) -> None:
        os.write(self.fd, CTRL_C)

    def wait(self, timeout: float = 30.0) -> int:
        """The exit code (a shell's: 128 + N for a signal), reading the output to its end."""
        deadline = time.monotonic() + timeout
        while self.status is None:
            done, status = os.waitpid(self.pid, os.WNOHANG)
            if done:
                self.status = status
                break
            if time.monotonic() > deadline:
                self.close()
                raise AssertionError(f"still running after {timeout} s; the terminal showed:\n{self.text}")
            self._read(0.1)
        while self._read(0.1):
            pass
        code = os.waitstatus_to_exitcode(self.status)
        return 128 - code if code < 0 else code

    def close(self) -> None:
        if self.status is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
                _, self.status = os.waitpid(self.pid, 0)
            except ProcessLookupError:
                pass
        with contextlib.suppress(OSError):
            os.close(self.fd)

    def __enter__(self) -> Terminal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def screen_lines(text: str) -> list[str]:
    """The lines a terminal would show at the end: each carriage return starts its line again, and
    the erase-to-end sequence is dropped (what the live line writes)."""
    shown = []
    for line in text.replace("\r\n", "\n").split("\n"):
        line = line.replace("\x1b[K", "")
        shown.append(line.rsplit("\r", 1)[-1])
    return [line for line in shown if line.strip()]
