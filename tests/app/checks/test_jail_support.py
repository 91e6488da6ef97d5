"""Helpers of the jail tests (no tests of its own): a skip where bubblewrap cannot isolate, a tree,
one-check runs, in either mode the bot runs in.

The two modes (docs/checks.md, "The jail"): "root", the bot as uid 0 (checks drop to a dedicated
uid), and "user", the bot as an ordinary user in an unprivileged user namespace, which is what the
Docker image does (`USER 10001`). CI runs as root, so in "user" mode the bot's side runs as a process
of its own (tests/app/checks/jail_driver.py) started as uid 10001 with `setpriv`; a test run by an
ordinary user runs "user" mode in-process and skips "root".
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import anyio.to_thread
import pytest

from bot.app.checks import bwrap
from bot.app.checks import probe as jail_probe
from bot.app.checks.jail import CheckOutcome, CheckSpec, JailLimits, _run_checks, jail_status
from tests.support.users import ROOT, USER_UID, as_user, give, user_env, why_not_as_user

MODES = ("root", "user")


@dataclasses.dataclass
class Mode:
    """The mode of the jail tests running now: set by the `jail_mode` fixture, read by `run_checks_as`."""

    name: str = "root"
    peak_fds: int = 0  # in "user" mode: the most descriptors the bot's process held in the last run

    @property
    def via_driver(self) -> bool:
        return self.name == "user" and os.geteuid() == 0


MODE = Mode()


def enter_mode(name: str) -> None:
    """Skip unless the jail can be tested in mode `name` here; then make it the current mode."""
    if name == "root" and os.geteuid() != 0:
        pytest.skip("root mode needs the tests to run as root")
    if name == "user" and os.geteuid() == 0 and (why := why_not_as_user()) is not None:
        pytest.skip(why)
    MODE.name = name
    need_jail()


# Small limits: an attack that escapes one must still leave the test machine standing.
SMALL = JailLimits(
    timeout_s=20,
    memory_bytes=1 << 30,
    processes=64,
    cpu_seconds=30,
    file_bytes=64 << 20,
    open_files=256,
    tmpfs_bytes=128 << 20,
    output_bytes=64 << 10,
    kill_grace_s=1,
)


def need_jail() -> None:
    state = jail_status()
    if not state.available:
        pytest.skip(f"bubblewrap cannot make the jail's namespaces here: {state.reason}")


@pytest.fixture
def jail() -> Iterator[None]:
    """Use with `pytestmark = pytest.mark.usefixtures("jail")` after importing it."""
    need_jail()
    yield


def make_tree(root: Path) -> Path:
    tree = root / "tree"
    (tree / "pkg").mkdir(parents=True)
    (tree / "pkg" / "__init__.py").write_text("VALUE = 41\n")
    (tree / "test_value.py").write_text(
        "from pkg import VALUE\n\ndef test_value():\n    assert VALUE == 41\n"
    )
    (tree / ".git").mkdir()
    (tree / ".git" / "config").write_text("[http]\n\textraHeader = Authorization: token ghs_secret\n")
    return tree


async def run_one(
    tmp_path: Path,
    command: str,
    *,
    limits: JailLimits = SMALL,
    weaken: frozenset[str] = frozenset(),
    cache_dir: Path | None = None,
    tree: Path | None = None,
) -> CheckOutcome:
    (outcome,) = await run_checks_as(
        tree or make_tree(tmp_path),
        [CheckSpec("attack", command)],
        limits=limits,
        cache_dir=cache_dir,
        scratch=tmp_path / "scratch",
        weaken=weaken,
    )
    return outcome


async def run_checks_as(
    tree: Path,
    checks: Sequence[CheckSpec],
    *,
    limits: JailLimits,
    scratch: Path,
    cache_dir: Path | None = None,
    setup: str | None = None,
    allowed_hosts: Sequence[str] = (),
    weaken: frozenset[str] = frozenset(),
) -> list[CheckOutcome]:
    """`_run_checks` in the current mode: in-process, or as uid 10001 through the driver. Either way
    `MODE.peak_fds` is then the most descriptors the bot's process held while it ran."""
    if not MODE.via_driver:
        with _FdPeak() as peak:
            outcomes = await _run_checks(
                tree,
                checks,
                limits=limits,
                cache_dir=cache_dir,
                setup=setup,
                allowed_hosts=allowed_hosts,
                scratch=scratch,
                weaken=weaken,
            )
        MODE.peak_fds = peak.peak
        return outcomes
    request = {
        "tree": str(tree),
        "checks": [(c.name, c.run) for c in checks],
        "limits": dataclasses.asdict(limits),
        "cache_dir": str(cache_dir) if cache_dir else None,
        "setup": setup,
        "allowed_hosts": list(allowed_hosts),
        "scratch": str(scratch),
        "weaken": sorted(weaken),
    }
    answer = await anyio.to_thread.run_sync(_drive, request, [tree, scratch.parent], True)
    if "unavailable" in answer:
        pytest.skip(f"bubblewrap cannot make the jail as uid {USER_UID}: {answer['unavailable']}")
    MODE.peak_fds = int(answer["peak_fds"])
    assert answer["uid"] == USER_UID
    return [CheckOutcome(**item) for item in answer["outcomes"]]


class _FdPeak:
    def __init__(self) -> None:
        self.peak = len(os.listdir("/proc/self/fd"))
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._done.wait(0.005):
            self.peak = max(self.peak, len(os.listdir("/proc/self/fd")))

    def __enter__(self) -> _FdPeak:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()


@dataclasses.dataclass(frozen=True)
class Refusal:
    """What the bot said and did when asked to run checks without a memory cgroup."""

    reason: str  # jail_status().reason: the sentence of the log, /readyz and the approval comment
    code: str | None  # the BeamError `_run_checks` raised (None: it ran the checks)
    uid: int


async def refused_without_a_memory_cgroup(tree: Path, checks: Sequence[CheckSpec], scratch: Path) -> Refusal:
    """`_run_checks` in the current mode, where the bot has no memory cgroup: as root, with the probe
    finding none (`Cgroups.find` answers as in a default container); as uid 10001, started outside
    the cgroup the suite delegates to it."""
    limits = dataclasses.replace(SMALL, timeout_s=60)
    if MODE.via_driver:
        request = {
            "tree": str(tree),
            "checks": [(c.name, c.run) for c in checks],
            "limits": dataclasses.asdict(limits),
            "scratch": str(scratch),
            "attempt_anyway": True,
        }
        answer = await anyio.to_thread.run_sync(_drive, request, [tree, scratch.parent], False)
        assert "unavailable" in answer, answer
        return Refusal(str(answer["unavailable"]), answer.get("refused"), int(answer["uid"]))  # type: ignore[arg-type, call-overload]
    from bot.app.checks.cgroups import Cgroups
    from bot.beam.errors import BeamError

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(
            Cgroups, "find", staticmethod(lambda: Cgroups(None, 1, "the memory cgroup is not writable"))
        )
        jail_probe.probe.cache_clear()
        try:
            reason = jail_status().reason
            try:
                await _run_checks(tree, checks, limits=limits, scratch=scratch)
                code = None
            except BeamError as error:
                code = error.code
        finally:
            jail_probe.probe.cache_clear()
    return Refusal(reason, code, os.geteuid())


def _drive(request: dict[str, object], owned: list[Path], memory_cgroup: bool) -> dict[str, object]:
    """The driver as uid 10001 (in the memory cgroup the suite delegates to it, unless not
    `memory_cgroup`); what it reads and writes is given to that uid first, as the image's work
    directory belongs to its user."""
    give(*owned)
    done = subprocess.run(
        as_user(["-m", "tests.app.checks.jail_driver"], memory_cgroup=memory_cgroup),
        input=json.dumps(request).encode(),
        capture_output=True,
        cwd=ROOT,
        env=user_env(dict(os.environ)),
        timeout=170,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode("utf-8", "replace")[-4000:]
    answer: dict[str, object] = json.loads(done.stdout)
    return answer


def describe(pids: list[int]) -> str:
    """What those processes are, for an assertion's message."""
    out = []
    for pid in pids:
        try:
            out.append(f"{pid}: {Path(f'/proc/{pid}/cmdline').read_bytes().replace(bytes(1), b' ').decode()}")
        except OSError:
            out.append(f"{pid}: gone")
    return "; ".join(out)


def jail_uid_processes() -> list[int]:
    """Pids of host processes running as one of the jail's uids (in "user" mode: the bot's user's)."""
    uids = {str(uid) for uid in range(bwrap.JAIL_UID_BASE, bwrap.JAIL_UID_BASE + bwrap.JAIL_UID_COUNT)}
    if MODE.via_driver:
        uids.add(str(USER_UID))
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            status = (proc / "status").read_text()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("Uid:") and line.split()[1] in uids:
                found.append(int(proc.name))
    return found
