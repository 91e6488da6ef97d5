"""The jail's behaviour on real bubblewrap: outcomes, fresh copies, caps, the cache, and refusing to
run anything when bubblewrap is missing or cannot isolate."""

from __future__ import annotations

import dataclasses
import logging
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.app.checks import bwrap
from bot.app.checks import jail as jail_module
from bot.app.checks import probe as jail_probe
from bot.app.checks.jail import CheckSpec, JailLimits, jail_status, run_checks
from bot.beam.errors import BeamError
from tests.app.checks.test_jail_support import SMALL, make_tree, need_jail, run_checks_as, run_one

pytestmark = pytest.mark.anyio


@pytest.fixture
def jail() -> None:
    need_jail()


@pytest.mark.usefixtures("jail")
async def test_outcomes_say_passed_failed_and_timed_out(tmp_path: Path) -> None:
    tree = make_tree(tmp_path)
    limits = JailLimits(timeout_s=2, kill_grace_s=1)
    outcomes = await run_checks(
        tree,
        [
            CheckSpec("tests", "python -c 'import pkg; assert pkg.VALUE == 41'"),
            CheckSpec("lint", "echo 'E501 too long' >&2; exit 3"),
            CheckSpec("slow", "sleep 30"),
        ],
        limits=limits,
        scratch=tmp_path / "scratch",
    )
    assert [(o.name, o.status, o.exit_code) for o in outcomes] == [
        ("tests", "passed", 0),
        ("lint", "failed", 3),
        ("slow", "timed_out", None),
    ]
    assert "E501 too long" in outcomes[1].output_tail
    assert 2 <= outcomes[2].duration_s < 20


@pytest.mark.usefixtures("jail")
async def test_each_check_gets_a_fresh_copy_without_git_and_the_tree_is_untouched(tmp_path: Path) -> None:
    tree = make_tree(tmp_path)
    (tree / "run.sh").write_text("#!/bin/sh\necho RAN\n")
    (tree / "run.sh").chmod(0o755)
    (tree / "link").symlink_to("pkg/__init__.py")
    before = sorted(str(p.relative_to(tree)) for p in tree.rglob("*"))
    outcomes = await run_checks(
        tree,
        [
            CheckSpec("write", "echo changed > pkg/__init__.py && touch new.txt && rm test_value.py"),
            CheckSpec("look", "cat link; ls -a; ./run.sh && test ! -e .git && test -e test_value.py"),
        ],
        limits=SMALL,
        scratch=tmp_path / "scratch",
    )
    assert [o.status for o in outcomes] == ["passed", "passed"], outcomes
    assert "VALUE = 41" in outcomes[1].output_tail and "RAN" in outcomes[1].output_tail
    assert "new.txt" not in outcomes[1].output_tail
    assert (tree / "pkg" / "__init__.py").read_text() == "VALUE = 41\n"
    assert sorted(str(p.relative_to(tree)) for p in tree.rglob("*")) == before


@pytest.mark.usefixtures("jail")
async def test_the_output_keeps_its_tail_under_the_cap(tmp_path: Path) -> None:
    limits = JailLimits(output_bytes=4096, timeout_s=20)
    outcome = await run_one(tmp_path, "seq 1 100000; echo THE-END", limits=limits)
    assert outcome.status == "passed"
    assert outcome.output_truncated
    assert len(outcome.output_tail.encode()) <= 4096
    assert outcome.output_tail.endswith("100000\nTHE-END\n")


@pytest.mark.usefixtures("jail")
async def test_the_cache_is_read_only_at_cache_and_on_the_python_path(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    (cache / "site").mkdir(parents=True)
    (cache / "site" / "cachedmod.py").write_text("ANSWER = 'from the cache'\n")
    outcome = await run_one(
        tmp_path,
        "python -c 'import cachedmod; print(cachedmod.ANSWER)' && ! touch /cache/site/x 2>/dev/null",
        cache_dir=cache,
    )
    assert outcome.status == "passed", outcome.output_tail
    assert "from the cache" in outcome.output_tail
    assert sorted(p.name for p in (cache / "site").iterdir()) == ["cachedmod.py"]


async def test_a_tree_larger_than_the_tmpfs_runs_and_what_it_writes_hits_the_cap(
    tmp_path: Path, jail_mode: str
) -> None:
    """The overlay's upper layer is on the capped tmpfs: a tree of any size is there at once, and what
    a check writes (a new file, or a file of the tree copied up to be changed) counts against the cap."""
    tree = make_tree(tmp_path)
    (tree / "big.bin").write_bytes(os.urandom(3 << 20))
    limits = dataclasses.replace(SMALL, tmpfs_bytes=1 << 20)
    command = (
        "test $(wc -c < big.bin) = 3145728 && echo READ;"
        " { echo x >> big.bin; } 2>/dev/null || echo COPY-UP-REFUSED;"
        " { head -c 2097152 /dev/zero > new.bin; } 2>/dev/null || echo WRITE-REFUSED"
    )
    outcome = await run_one(tmp_path, command, limits=limits, tree=tree)
    assert outcome.status == "passed", outcome.output_tail
    assert outcome.output_tail.split()[-3:] == ["READ", "COPY-UP-REFUSED", "WRITE-REFUSED"]
    assert (tree / "big.bin").stat().st_size == 3 << 20
    assert not (tree / "new.bin").exists()


@pytest.mark.usefixtures("jail")
async def test_a_tree_larger_than_the_tmpfs_is_an_error_not_a_pass_where_it_is_copied(tmp_path: Path) -> None:
    tree = make_tree(tmp_path)
    (tree / "big.bin").write_bytes(os.urandom(3 << 20))
    limits = JailLimits(tmpfs_bytes=1 << 20, timeout_s=20)
    outcome = await run_one(tmp_path, "true", limits=limits, tree=tree, weaken=frozenset({"overlay"}))
    assert outcome.status == "error"
    assert "larger than its tmpfs" in outcome.output_tail


# What a check may do to its overlay: everything to the merged tree, nothing to the layers or mounts.
_OVERLAY_ATTACK = """
echo changed > pkg/__init__.py && rm test_value.py && mkdir pkg/sub && touch pkg/sub/new top.txt \
  && chmod 600 pkg/__init__.py && ln -s /etc/passwd pkg/link && echo WROTE
test -e .git || echo NO-GIT
mkdir .git && echo mine > .git/HEAD && echo OWN-GIT
cp -r pkg saved && rm -r pkg && mkdir pkg && test -z "$(ls -A pkg)" && echo OPAQUE
ls -A /src | wc -l | sed 's/^/SRC-ENTRIES=/'
ls /sandbox/.layers >/dev/null 2>&1 || echo LAYERS-HIDDEN
touch /sandbox/.layers/x 2>/dev/null || echo LAYERS-READ-ONLY
touch /escape 2>/dev/null || echo ROOT-READ-ONLY
mount -t tmpfs none pkg 2>/dev/null || echo NO-MOUNT
umount /sandbox/tree 2>/dev/null || umount -l /sandbox/tree 2>/dev/null || echo NO-UMOUNT
mount -o remount,rw /sandbox/tree 2>/dev/null || echo NO-REMOUNT
python3 -c "import ctypes, os; l = ctypes.CDLL(None, use_errno=True); \
r = l.mount(b'none', b'/sandbox/tree', None, 32 | 16384, None); \
print('MOUNT-CALL', r, os.strerror(ctypes.get_errno()))"
grep -c " overlay " /proc/self/mountinfo | sed 's/^/OVERLAYS=/'
grep /sandbox/tree /proc/self/mountinfo
"""


async def test_the_overlay_keeps_writes_in_the_check_and_its_layers_out_of_reach(
    tmp_path: Path, jail_mode: str
) -> None:
    tree = make_tree(tmp_path)
    before = {str(p.relative_to(tree)): p.read_bytes() for p in tree.rglob("*") if p.is_file()}
    outcomes = await run_checks_as(
        tree,
        [
            CheckSpec("attack", _OVERLAY_ATTACK),
            CheckSpec("next", "ls -A; cat pkg/__init__.py; stat -c %U pkg/__init__.py"),
        ],
        limits=SMALL,
        scratch=tmp_path / "scratch",
    )
    attack, after = outcomes
    assert attack.status == "passed", attack.output_tail
    said = attack.output_tail.splitlines()
    for line in (
        "WROTE",
        "NO-GIT",
        "OWN-GIT",
        "OPAQUE",
        "SRC-ENTRIES=0",
        "LAYERS-HIDDEN",
        "LAYERS-READ-ONLY",
        "ROOT-READ-ONLY",
        "NO-MOUNT",
        "NO-UMOUNT",
        "NO-REMOUNT",
        "MOUNT-CALL -1 Operation not permitted",
        "OVERLAYS=1",
    ):
        assert line in said, attack.output_tail
    assert str(tree) not in attack.output_tail  # no layer names a host path
    assert after.status == "passed", after.output_tail
    assert after.output_tail.split() == ["pkg", "test_value.py", "VALUE", "=", "41", "check"]
    assert {str(p.relative_to(tree)): p.read_bytes() for p in tree.rglob("*") if p.is_file()} == before


@pytest.mark.usefixtures("jail")
async def test_without_an_overlay_the_tree_is_copied_and_the_log_says_so_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A kernel that cannot mount the overlay (here: the step starts without the capabilities it
    needs) gets the copy, with the same outcome, and one line in the log for the whole process."""
    monkeypatch.setattr(bwrap, "MOUNT_CAPS", ())
    monkeypatch.setattr(jail_module, "_fallback_said", False)
    tree = make_tree(tmp_path)
    checks = [CheckSpec("write", "echo changed > pkg/__init__.py && touch new.txt && cat pkg/__init__.py")]
    with caplog.at_level(logging.WARNING, logger="beam.checks"):
        first = await run_checks(tree, checks * 2, limits=SMALL, scratch=tmp_path / "scratch")
        second = await run_checks(tree, checks, limits=SMALL, scratch=tmp_path / "scratch")
    assert [o.status for o in first + second] == ["passed"] * 3, first + second
    assert all("copying it instead" in o.output_tail and "changed" in o.output_tail for o in first + second)
    said = [r.getMessage() for r in caplog.records if "overlay" in r.getMessage()]
    assert said == ["checks: the tree's overlay could not be mounted here, so each check copies its tree"]
    assert (tree / "pkg" / "__init__.py").read_text() == "VALUE = 41\n"
    assert not (tree / "new.txt").exists()


# Refusing to run: the probe is cached per process, so each test clears it before and after.


@pytest.fixture
def fresh_probe() -> Iterator[None]:
    jail_probe.probe.cache_clear()
    yield
    jail_probe.probe.cache_clear()


def _path_with(tmp_path: Path, fake_bwrap: str | None) -> str:
    """A PATH holding the jail's other tools and, for bwrap, `fake_bwrap` (a script) or nothing."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("setpriv", "prlimit", "bash", "tar"):
        found = shutil.which(tool)
        if found:
            (bin_dir / tool).symlink_to(found)
    if fake_bwrap is not None:
        (bin_dir / "bwrap").write_text(fake_bwrap)
        (bin_dir / "bwrap").chmod(0o755)
    return str(bin_dir)


@pytest.mark.usefixtures("fresh_probe")
@pytest.mark.parametrize(
    ("fake", "said"),
    [
        (None, "bubblewrap (bwrap) is not installed"),
        ("#!/bin/sh\necho 'bwrap: No permissions to creating new namespace' >&2\nexit 1\n", "cannot create"),
    ],
    ids=["missing", "cannot-isolate"],
)
async def test_without_a_working_bwrap_checks_are_off_and_nothing_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake: str | None, said: str
) -> None:
    monkeypatch.setenv("PATH", _path_with(tmp_path, fake))
    state = jail_status()
    assert not state.available
    assert said in state.reason and "checks are off" in state.reason
    marker = tmp_path / "ran-unjailed"
    with pytest.raises(BeamError) as raised:
        await run_checks(
            make_tree(tmp_path),
            [CheckSpec("escape", f"touch {marker}")],
            limits=SMALL,
            scratch=tmp_path / "scratch",
        )
    assert raised.value.code == "BEM-350"
    assert not marker.exists()


@pytest.mark.usefixtures("fresh_probe")
async def test_a_bwrap_that_fails_only_for_checks_gives_an_error_never_an_unjailed_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Passes the probe (its command is `exit 0`), then fails every real jail as bwrap would.
    real = shutil.which("bwrap")
    if real is None:
        pytest.skip("bubblewrap is not installed")
    fake = (
        f'#!/bin/sh\ncase "$*" in *"exit 0"*) exec {real} "$@";; esac\n'
        'echo "bwrap: Creating new namespace failed" >&2\nexit 1\n'
    )
    monkeypatch.setenv("PATH", _path_with(tmp_path, fake))
    need_jail()
    marker = tmp_path / "ran-unjailed"
    outcome = await run_one(tmp_path, f"touch {marker}")
    assert outcome.status == "error"
    assert "Creating new namespace failed" in outcome.output_tail
    assert not marker.exists()
