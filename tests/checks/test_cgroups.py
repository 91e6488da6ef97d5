"""The jail's one memory bound, attacked: a check tries to hold 4 GiB in every place a page can live
(`/`, the sandbox's tmpfs, /dev/shm, memfd, anonymous memory) in each mode the bot runs in, and with
a memory cgroup (root here, cgroup v1) and without one (the fallback a default container gets).

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
from tests.checks.test_jail_support import MODE, SMALL, USER_UID, make_tree, run_one

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


@pytest.fixture(params=["cgroup", "fallback"])
def memory_mode(request: pytest.FixtureRequest, jail_mode: str) -> Iterator[frozenset[str]]:
    """The weakening that makes the mode: none (a cgroup where the bot has one), or no cgroup."""
    cgroups = Cgroups.find()
    if request.param == "cgroup" and jail_mode == "user":
        pytest.skip(f"uid {USER_UID} has no memory cgroup of its own here: the fallback case is its mode")
    if request.param == "cgroup" and cgroups.base is None:
        pytest.skip(f"no memory cgroup for the bot here: {cgroups.reason}")
    yield frozenset() if request.param == "cgroup" else frozenset({"cgroup"})


async def test_a_check_cannot_hold_more_than_its_cap_anywhere(
    tmp_path: Path, memory_mode: frozenset[str]
) -> None:
    """Issue 27: in user-namespace mode `/`, `/dev` and `/dev/shm` were uncapped tmpfs mounts (4 GiB
    written against a 1 GiB cap), and memfd got past the address-space limit in both modes."""
    tree = _hog_tree(tmp_path)
    places = "/hog /dev/hog /sandbox/tmp/hog /dev/shm/hog memfd anon"
    with _LowWater() as water:
        command = f"python3 hog.py {places}"
        outcome = await run_one(tmp_path, command, limits=LIMITS, tree=tree, weaken=memory_mode)
    out = outcome.output_tail
    # Nothing writable but the capped mounts.
    assert "/hog refused" in out and "/dev/hog refused" in out, out
    assert _held(out, "/sandbox/tmp/hog") <= 128 and _held(out, "/dev/shm/hog") <= 32, out
    if memory_mode:  # no cgroup: memfd is refused, anonymous memory stops at the address-space limit
        assert "memfd refused 1" in out, out
        assert _held(out, "anon") < CAP >> 20, out
    else:  # one cap over all of it: the cgroup kills the hog when the sum reaches it
        assert "reached its memory cap" in out, out
        held = sum(_held(out, name) for name in ("/sandbox/tmp/hog", "/dev/shm/hog", "memfd", "anon"))
        assert held <= CAP >> 20, out
    # The host gave no more than the cap and a margin for everything else running.
    assert water.before - water.least < CAP + (512 << 20), (water.before, water.least, out)


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
    from bot.app.checks import bwrap

    probe = bwrap.probe()
    if not probe.ok:
        pytest.skip(probe.reason)
    gone = dataclasses.replace(probe, cgroups=Cgroups(tmp_path / "no-such-cgroup", 1, "gone"))
    monkeypatch.setattr(bwrap, "probe", lambda: gone)
    marker = tmp_path / "ran"
    outcome = await run_one(tmp_path / "jailed", f"touch {marker}")
    assert outcome.status == "error" and "memory cgroup" in outcome.output_tail, outcome
    assert not marker.exists()
