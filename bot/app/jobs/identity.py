"""A worker process's identity, kept in the work directory, so a restarted process knows its jobs.

Each process that runs workers takes the first free slot under `<work_dir>/workers/`: it holds
`slot-N.lock` with an exclusive `flock` for as long as it lives (the kernel drops the lock when the
process dies, even by SIGKILL) and reads the slot's stable id from `slot-N.id` (made once). A process
restarted on the same work directory thus gets the same id back, and takes back at once the jobs its
previous incarnation held (`JobQueue.reclaim`) instead of waiting for their leases to expire.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import IO

MAX_SLOTS = 256


@dataclass
class WorkerIdentity:
    """`id` names this process in job leases; the open lock file keeps the slot ours."""

    id: str
    slot: int
    _lock: IO[bytes] | None = None

    def release(self) -> None:
        if self._lock is not None:
            with contextlib.suppress(OSError):
                self._lock.close()
            self._lock = None


def claim_identity(work_dir: Path) -> WorkerIdentity:
    """The first slot no live process holds, with its stable id (blocking: call from a thread)."""
    slots = work_dir / "workers"
    slots.mkdir(parents=True, exist_ok=True, mode=0o700)
    for slot in range(MAX_SLOTS):
        handle = (slots / f"slot-{slot}.lock").open("ab")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            continue
        id_file = slots / f"slot-{slot}.id"
        if not id_file.exists():
            staging = id_file.with_suffix(f".tmp-{os.getpid()}")
            staging.write_text(f"{socket.gethostname()}:{uuid.uuid4().hex[:12]}\n")
            os.replace(staging, id_file)
        return WorkerIdentity(id_file.read_text().strip(), slot, handle)
    raise RuntimeError(f"more than {MAX_SLOTS} worker processes share the work directory {work_dir}")
