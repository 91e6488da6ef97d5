"""The jail's one memory bound, attacked: a check tries to hold 4 GiB in every place a page can live
(`/`, the sandbox's tmpfs, /dev/shm, memfd, anonymous memory, socket queues, pipes) in each mode the
bot runs in (as uid 10001, in a cgroup the suite delegates to it, as an operator would), and without a
memory cgroup checks are refused.

The v2 delegation (`Cgroups.find` adopting a leaf) cannot be exercised on this host, whose memory
controller is on v1; its decisions are tested on a cgroup tree made of plain directories."""

from __future__ import annotations

import dataclasses
import os
import re
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.app.checks.cgroups import Cgroups
from tests.app.checks.test_jail_support import (
    MODE,
    SMALL,
    USER_UID,
    make_tree,
    refused_without_a_memory_cgroup,
    run_one,
)
from tests.support.users import delegated_cgroup

pytestmark = [pytest.mark.anyio]

CAP = 512 << 20
LIMITS = dataclasses.replace(SMALL, memory_bytes=CAP, tmpfs_bytes=128 << 20, shm_bytes=32 << 20, timeout_s=60)

# Each place, 4 GiB at most, 16 MiB at a time; what each held is printed before the next is tried
# (a memory cgroup may kill the process in the middle of one).
HOG = """
import errno, os, sys
chunk = b"x" * (16 << 20)
def fill(name, new):
    # A new file (or memfd) whenever one reaches the file-size limit: that limit is per file.
    held, fd = 0, new()
    try:
        while held < (4 << 30):
            try:
                os.write(fd, chunk)
            except OSError as exc:
                if exc.errno != errno.EFBIG:
                    raise
                fd = new()
                continue
            held += len(chunk)
        print(name, "held", held >> 20, flush=True)
    except (OSError, MemoryError) as exc:
        print(name, "stopped", held >> 20, type(exc).__name__, getattr(exc, "errno", ""), flush=True)
count = iter(range(1 << 20))
for place in sys.argv[1:]:
    if place == "anon":
        kept = []
        try:
            while len(kept) < 256:
                kept.append(bytearray(chunk))
            print("anon held", len(kept) * 16, flush=True)
        except MemoryError:
            print("anon stopped", len(kept) * 16, "MemoryError", flush=True)
        continue
    make = (lambda: os.memfd_create("hog")) if place == "memfd" else (
        lambda: os.open(f"{place}{next(count)}", os.O_WRONLY | os.O_CREAT, 0o600))
    try:
        fill(place, make)
    except OSError as exc:
        print(place, "refused", exc.errno, flush=True)
print("END", flush=True)
"""


def _held(output: str, name: str) -> int:
    """MiB that place held (0 where it was refused outright)."""
    found = re.search(rf"^{re.escape(name)} (?:held|stopped) (\d+)", output, re.M)
    return int(found.group(1)) if found else 0


def _available() -> int:
    text = Path("/proc/meminfo").read_text()
    found = re.search(r"^MemAvailable:\s+(\d+) kB", text, re.M)
    assert found is not None
    return int(found.group(1)) << 10


class _LowWater:
    """The least MemAvailable seen while a check runs (sampled every 10 ms)."""

    def __init__(self) -> None:
        self.before = _available()
        self.least = self.before
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._done.wait(0.01):
            self.least = min(self.least, _available())

    def __enter__(self) -> _LowWater:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()


def _hog_tree(tmp_path: Path) -> Path:
    tree = make_tree(tmp_path)
    (tree / "hog.py").write_text(HOG)
    return tree


@pytest.fixture
def memory_cgroup(jail_mode: str) -> Iterator[None]:
    """A memory cgroup for the bot in this mode (as root, its own; as uid 10001, the one the suite
    delegates to it), as every deployment that runs checks has: without one, checks are off."""
    if Cgroups.find().base is None:
        pytest.skip(f"no memory cgroup for the bot here: {Cgroups.find().reason}")
    if jail_mode == "user" and MODE.via_driver and delegated_cgroup() is None:
        pytest.skip(f"no memory cgroup to delegate to uid {USER_UID} here")
    yield


@pytest.mark.usefixtures("memory_cgroup")
async def test_a_check_cannot_hold_more_than_its_cap_anywhere(tmp_path: Path) -> None:
    """Issue 27: in user-namespace mode `/`, `/dev` and `/dev/shm` were uncapped tmpfs mounts (4 GiB
    written against a 1 GiB cap), and memfd got past the address-space limit in both modes."""
    tree = _hog_tree(tmp_path)
    places = "/hog /dev/hog /sandbox/tmp/hog /dev/shm/hog memfd anon"
    with _LowWater() as water:
        command = f"python3 hog.py {places}"
        outcome = await run_one(tmp_path, command, limits=LIMITS, tree=tree)
    out = outcome.output_tail
    # Nothing writable but the capped mounts.
    assert "/hog refused" in out and "/dev/hog refused" in out, out
    assert _held(out, "/sandbox/tmp/hog") <= 128 and _held(out, "/dev/shm/hog") <= 32, out
    # One cap over all of it: the cgroup kills the hog when the sum reaches it.
    assert "reached its memory cap" in out, out
    held = sum(_held(out, name) for name in ("/sandbox/tmp/hog", "/dev/shm/hog", "memfd", "anon"))
    assert held <= CAP >> 20, out
    # The host gave no more than the cap and a margin for everything else running.
    assert water.before - water.least < CAP + (512 << 20), (water.before, water.least, out)


# Issue 40: kernel memory that no rlimit counts. PROCS processes (the first waits for the others)
# each open socket pairs with the largest send buffers, or pipes of the largest size, and fill
# them without reading, until they hold MiB between them; each says what it held.
FLOOD = """
import fcntl, os, socket, sys, time
kind, procs, mib = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
share, chunk, kids = (mib << 20) // procs, b"x" * (64 << 10), []
for _ in range(procs - 1):
    pid = os.fork()
    if pid == 0:
        kids = None
        break
    kids.append(pid)
held, keep = 0, []
def fill(send):
    global held
    while held < share:
        try:
            held += send(chunk)
        except BlockingIOError:
            return
try:
    while held < share:
        if kind == "unix":
            pair = socket.socketpair()
            keep.append(pair)
            for end in pair:
                end.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 << 20)
                end.setblocking(False)
                fill(end.send)
        else:
            read, write = os.pipe()
            keep.append((read, write))
            try:
                fcntl.fcntl(write, 1031, 1 << 20)  # F_SETPIPE_SZ: refused past the user's soft limit
            except OSError:
                pass
            os.set_blocking(write, False)
            fill(lambda data: os.write(write, data))
    print(kind, "held", held >> 20, flush=True)
except OSError as exc:
    print(kind, "stopped", held >> 20, exc.errno, flush=True)
time.sleep(1)
for pid in kids or ():
    os.waitpid(pid, 0)
"""

FLOOD_CAP = 256 << 20
FLOODS = {
    # (processes, MiB asked for, limits): sockets take 4 processes at the default 1,024 files each;
    # pipes past the user's soft limit (64 MiB) get two pages each, so they take more processes.
    "unix": (4, 1536, dataclasses.replace(LIMITS, memory_bytes=FLOOD_CAP, open_files=1024)),
    "pipe": (24, 768, dataclasses.replace(LIMITS, memory_bytes=FLOOD_CAP, open_files=8192, processes=64)),
}


def _flood_held(output: str, kind: str) -> int:
    return sum(int(found) for found in re.findall(rf"^{kind} (?:held|stopped) (\d+)", output, re.M))


@pytest.mark.usefixtures("memory_cgroup")
@pytest.mark.parametrize("kind", sorted(FLOODS))
async def test_socket_buffers_and_pipes_count_against_the_cap(tmp_path: Path, kind: str) -> None:
    """Issue 40: without a memory cgroup, a check capped at 128 MiB held 1.6 GiB of the host's memory
    in AF_UNIX socket queues with 4 processes. The check's cgroup counts those pages: the flood is
    killed at the cap and the host gives no more than the cap and a margin."""
    procs, mib, limits = FLOODS[kind]
    tree = make_tree(tmp_path)
    (tree / "flood.py").write_text(FLOOD)
    command = f"python3 flood.py {kind} {procs} {mib}"
    with _LowWater() as water:
        outcome = await run_one(tmp_path / "capped", command, limits=limits, tree=tree)
    assert "reached its memory cap" in outcome.output_tail, outcome.output_tail
    assert water.before - water.least < FLOOD_CAP + (384 << 20), (water.before, water.least, outcome)
    # Proof: the same flood in a jail without its cgroup (a test's weakening; the bot never runs
    # one) holds well past the cap, and nothing stops it.
    bare = await run_one(tmp_path / "bare", command, limits=limits, tree=tree, weaken=frozenset({"cgroup"}))
    assert _flood_held(bare.output_tail, kind) > 2 * (FLOOD_CAP >> 20), bare.output_tail
    assert "reached its memory cap" not in bare.output_tail


@pytest.mark.parametrize("kind", sorted(FLOODS))
async def test_without_a_memory_cgroup_checks_are_refused_and_say_why(
    tmp_path: Path, jail_mode: str, kind: str
) -> None:
    """Issue 40's other way out: no fallback runs a check half-bounded. Where the bot has no memory
    cgroup, nothing runs (BEM-350), and the reason the log, /readyz and the approval comment show
    says why and where the operator finds how to give it one."""
    from bot.app.checks import flow, render
    from bot.app.checks.flow import CheckReport
    from bot.app.checks.jail import CheckSpec, JailStatus

    tree = make_tree(tmp_path)
    (tree / "flood.py").write_text(FLOOD)
    marker = tmp_path / "scratch" / "ran"
    procs, mib, _ = FLOODS[kind]
    checks = [CheckSpec("flood", f"touch {marker}; python3 flood.py {kind} {procs} {mib}")]
    refusal = await refused_without_a_memory_cgroup(tree, checks, tmp_path / "scratch")
    assert refusal.code == "BEM-350" and not marker.exists(), refusal
    assert refusal.uid == (USER_UID if MODE.via_driver else os.geteuid())
    for words in ("no memory cgroup", "checks are off", "socket buffers and pipes", "docs/checks.md#memory"):
        assert words in refusal.reason, refusal.reason
    comment = render.section(CheckReport("ab" * 20, off=refusal.reason))
    assert refusal.reason in comment and "nothing was run" in comment, comment
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(flow, "jail_state", lambda: JailStatus(False, refusal.reason))
        assert flow.checks_detail() == f"off: {refusal.reason}"


async def test_proof_without_the_bounds_memfd_and_shm_go_past_the_cap(tmp_path: Path, jail_mode: str) -> None:
    """The same places without the filter, the cgroup and the read-only mounts (bounded at 1 GiB)."""
    tree = _hog_tree(tmp_path)
    (tree / "hog.py").write_text(HOG.replace("4 << 30", "1 << 30"))
    weak = frozenset({"seccomp", "cgroup", "readonly"})
    places = "memfd /dev/shm/hog /hog" if jail_mode == "user" else "memfd"
    outcome = await run_one(tmp_path, f"python3 hog.py {places}", limits=LIMITS, tree=tree, weaken=weak)
    out = outcome.output_tail
    assert _held(out, "memfd") == 1024, out  # twice the cap, past the file-size and address-space limits
    if jail_mode == "user":  # bubblewrap's own tmpfs for `/` and `/dev` belong to the check's uid there
        assert _held(out, "/dev/shm/hog") == 1024 and _held(out, "/hog") == 1024, out
    assert MODE.name == jail_mode


def _cgroup_tree(root: Path, *, subtree: str, procs: str) -> Path:
    """A cgroup v2 directory as the kernel shows it, made of plain files."""
    base = root / "sys" / "fs" / "cgroup" / "system.slice" / "beam.service"
    base.mkdir(parents=True)
    (base / "cgroup.controllers").write_text("cpu io memory pids\n")
    (base / "cgroup.subtree_control").write_text(subtree)
    (base / "cgroup.procs").write_text(procs)
    proc = root / "proc"
    proc.mkdir()
    (proc / "cgroup").write_text("0::/system.slice/beam.service\n")
    (proc / "mountinfo").write_text(
        f"30 20 0:26 / {root}/sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n"
    )
    return base


def test_v2_a_delegated_cgroup_is_adopted_through_a_leaf(tmp_path: Path) -> None:
    base = _cgroup_tree(tmp_path, subtree="", procs="")
    found = Cgroups.find(tmp_path / "proc")
    assert found.base == base and found.version == 2, found.reason
    assert (base / "beam-bot").is_dir()  # the bot's processes moved into a leaf first
    assert (base / "cgroup.subtree_control").read_text() == "+memory"
    check = found.make(CAP)
    assert (check.path / "memory.max").read_text() == str(CAP)
    assert check.enter_argv()[-1] == str(check.path / "cgroup.procs")
    for written in check.path.iterdir():  # the kernel's files go with the directory; plain ones do not
        written.unlink()
    check.remove()
    assert not check.path.exists()


def test_v2_a_second_process_of_the_bot_makes_its_checks_beside_the_leaf(tmp_path: Path) -> None:
    """The first process moved every process of the cgroup into `beam-bot`; the next one to start
    (a worker) finds itself there and makes its checks' cgroups beside the leaf, not below it."""
    base = _cgroup_tree(tmp_path, subtree="memory", procs="")
    (base / "beam-bot").mkdir()
    (tmp_path / "proc" / "cgroup").write_text("0::/system.slice/beam.service/beam-bot\n")
    found = Cgroups.find(tmp_path / "proc")
    assert found.base == base, found.reason
    assert not (base / "beam-bot" / "beam-bot").exists()


def test_v2_without_the_memory_controller_there_is_no_cgroup(tmp_path: Path) -> None:
    base = _cgroup_tree(tmp_path, subtree="", procs="")
    (base / "cgroup.controllers").write_text("cpu pids\n")
    found = Cgroups.find(tmp_path / "proc")
    assert found.base is None and "not delegated" in found.reason


def test_a_cgroup_left_by_a_dead_bot_is_swept(tmp_path: Path) -> None:
    base = _cgroup_tree(tmp_path, subtree="memory", procs="")
    found = Cgroups.find(tmp_path / "proc")
    dead = base / "beam-check-999999999-1"
    alive = base / f"beam-check-{os.getpid()}-1"
    for path in (dead, alive):
        path.mkdir()
    found.sweep()
    assert not dead.exists() and alive.exists()


async def test_a_cgroup_that_cannot_be_made_runs_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fail closed: where the probe found a cgroup that is gone when a check starts, the check is an
    error and nothing ran without its cap."""
    from bot.app.checks import probe as jail_probe

    probe = jail_probe.probe()
    if not probe.ok:
        pytest.skip(probe.reason)
    gone = dataclasses.replace(probe, cgroups=Cgroups(tmp_path / "no-such-cgroup", 1, "gone"))
    monkeypatch.setattr(jail_probe, "probe", lambda: gone)
    marker = tmp_path / "ran"
    outcome = await run_one(tmp_path / "jailed", f"touch {marker}")
    assert outcome.status == "error" and "memory cgroup" in outcome.output_tail, outcome
    assert not marker.exists()
