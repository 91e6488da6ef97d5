"""The jail's seccomp filter, attacked in each mode the bot runs in: every refused call is refused,
conditional ones only with their flag, and each attack of issue 27 is shown working without it
(root mode, where bubblewrap's own --disable-userns does not apply)."""

from __future__ import annotations

import errno
import json
import platform
from pathlib import Path

import pytest

from bot.app.checks import syscall_filter
from bot.app.checks.syscall_filter import REFUSED
from tests.app.checks.test_jail_support import SMALL, make_tree, run_one

pytestmark = [pytest.mark.anyio]

_KEYS = {"x86_64": (248, 250), "aarch64": (217, 219)}  # (add_key, keyctl)


def _numbers() -> dict[str, int]:
    lib = syscall_filter._bindings()
    numbers = {}
    for rule in REFUSED:
        try:
            numbers[rule.syscall] = int(lib.resolve_syscall(lib.Arch.NATIVE, rule.syscall))
        except (ValueError, OSError, TypeError):
            continue
    return numbers


# Calls each syscall with zero arguments (nothing to harm: the jail holds no capability) and prints
# its errno. A refusal by the filter is the rule's errno; the kernel's own answer would differ.
PROBE = """
import ctypes, json, sys
libc = ctypes.CDLL(None, use_errno=True)
out = {}
for name, number in json.loads(sys.argv[1]).items():
    ctypes.set_errno(0)
    rc = libc.syscall(number, 0, 0, 0, 0, 0, 0)
    out[name] = ctypes.get_errno() if rc == -1 else "ok"
print(json.dumps(out))
"""


def test_the_policy_is_a_list_with_a_reason_each() -> None:
    assert all(rule.why for rule in REFUSED)
    names = {rule.syscall for rule in REFUSED}
    for wanted in (
        "unshare",
        "clone",
        "add_key",
        "keyctl",
        "request_key",
        "ptrace",
        "process_vm_readv",
        "process_vm_writev",
        "perf_event_open",
        "bpf",
        "userfaultfd",
        "init_module",
        "finit_module",
        "kexec_load",
        "mount",
        "pivot_root",
        "swapon",
        "reboot",
    ):
        assert wanted in names
    # Without a cgroup the ways to hold uncounted memory go too; with one they stay (it counts them).
    assert "memfd_create" not in {r.syscall for r in syscall_filter.policy(with_cgroup=True)}
    assert "memfd_create" in {r.syscall for r in syscall_filter.policy(with_cgroup=False)}
    assert syscall_filter.compiled(with_cgroup=True) != syscall_filter.compiled(with_cgroup=False)


async def test_every_refused_call_is_refused(tmp_path: Path, jail_mode: str) -> None:
    numbers = _numbers()
    unconditional = {r.syscall: r.errno for r in REFUSED if r.when is None and not r.only_without_cgroup}
    asked = {name: numbers[name] for name in unconditional if name in numbers}
    tree = make_tree(tmp_path)
    (tree / "probe.py").write_text(PROBE)
    command = f"python3 probe.py '{json.dumps(asked)}'"
    outcome = await run_one(tmp_path / "jailed", command, tree=tree)
    got = json.loads(outcome.output_tail.splitlines()[-1])
    assert got == {name: unconditional[name] for name in asked}, outcome.output_tail
    # Proof: without the filter the kernel answers for itself, and some of these do not fail with
    # EPERM at all (the keyring's calls, userfaultfd, perf_event_open, io_uring).
    bare = await run_one(tmp_path / "bare", command, tree=tree, weaken=frozenset({"seccomp"}))
    kernel = json.loads(bare.output_tail.splitlines()[-1])
    differ = {name for name in asked if kernel[name] != unconditional[name]}
    assert {"keyctl", "add_key"} <= differ, kernel


_USERNS = (
    "unshare -Urmn sh -c 'grep CapEff /proc/self/status;"
    " mount -t tmpfs none /sandbox/tmp && echo MOUNTED' 2>&1;"
    ' python3 -c "import ctypes; l = ctypes.CDLL(None, use_errno=True);'
    " print('UNSHARE', l.unshare(0x10000000), ctypes.get_errno())\""
)


async def test_no_new_user_namespace(tmp_path: Path, jail_mode: str) -> None:
    """Issue 27: in root mode `unshare -Urmn` gave CapEff 000001ffffffffff and a tmpfs of its own."""
    outcome = await run_one(tmp_path / "jailed", _USERNS)
    assert "CapEff" not in outcome.output_tail and "MOUNTED" not in outcome.output_tail, outcome.output_tail
    assert f"UNSHARE -1 {errno.EPERM}" in outcome.output_tail, outcome.output_tail
    # Other namespaces without a user namespace need capabilities the jail does not have.
    if jail_mode == "root":
        shown = await run_one(tmp_path / "bare", _USERNS, weaken=frozenset({"seccomp"}))
        assert "CapEff:\t000001ffffffffff" in shown.output_tail and "MOUNTED" in shown.output_tail, shown


def _keyring_script(step: str) -> str:
    add_key, keyctl = _KEYS[platform.machine()]
    # add_key("user", "beam-test", "PLANTED", 7, KEY_SPEC_USER_KEYRING); then KEYCTL_SEARCH (10) from
    # another check, KEYCTL_READ (11) and KEYCTL_UNLINK (9) so that nothing outlives the proof.
    return (
        'python3 -c "import ctypes; l = ctypes.CDLL(None, use_errno=True);'
        " buf = ctypes.create_string_buffer(64)\n"
        + (
            f"print('ADD', l.syscall({add_key}, b'user', b'beam-test', b'PLANTED', 7, -4),"
            ' ctypes.get_errno())"'
            if step == "plant"
            else f"k = l.syscall({keyctl}, 10, -4, b'user', b'beam-test', 0)\n"
            f"print('FOUND', k, ctypes.get_errno())\n"
            f"k > 0 and print('READ', l.syscall({keyctl}, 11, k, buf, 64), buf.value)\n"
            f'k > 0 and l.syscall({keyctl}, 9, k, -4)"'
        )
    )


@pytest.mark.skipif(platform.machine() not in _KEYS, reason="keyring syscall numbers: x86_64, aarch64")
async def test_a_key_stored_by_one_repositorys_check_is_not_read_by_the_next(
    tmp_path: Path, jail_mode: str
) -> None:
    """Issue 27: in root mode the uid pool reuses 65400, and the kernel keyring is per uid: repository
    B's check read a key that repository A's check had stored."""
    a = await run_one(tmp_path / "a", _keyring_script("plant"))
    b = await run_one(tmp_path / "b", _keyring_script("find"))
    assert f"ADD -1 {errno.EPERM}" in a.output_tail, a.output_tail
    assert f"FOUND -1 {errno.EPERM}" in b.output_tail and "PLANTED" not in b.output_tail, b.output_tail
    if jail_mode == "root":
        weak = frozenset({"seccomp"})
        planted = await run_one(tmp_path / "a2", _keyring_script("plant"), weaken=weak)
        found = await run_one(tmp_path / "b2", _keyring_script("find"), weaken=weak)
        assert "ADD -1" not in planted.output_tail, planted.output_tail
        assert "b'PLANTED'" in found.output_tail, found.output_tail


async def test_ptrace_and_reading_another_process_are_refused(tmp_path: Path, jail_mode: str) -> None:
    # PTRACE_TRACEME (0) needs no permission of the kernel's: only the filter refuses it.
    command = (
        'python3 -c "import ctypes; l = ctypes.CDLL(None, use_errno=True);'
        " print('TRACEME', l.ptrace(0, 0, 0, 0), ctypes.get_errno())\""
    )
    outcome = await run_one(tmp_path / "jailed", command, limits=SMALL)
    assert f"TRACEME -1 {errno.EPERM}" in outcome.output_tail, outcome.output_tail
    bare = await run_one(tmp_path / "bare", command, weaken=frozenset({"seccomp"}))
    assert "TRACEME 0" in bare.output_tail, bare.output_tail


# socket(AF_VSOCK, SOCK_STREAM) and kcmp(self, self, KCMP_FILE, 0, 0): the kernel answers both for
# any uid (a vsock socket needs no privilege, a process may always compare its own descriptors).
_VSOCK_KCMP = (
    'python3 -c "import ctypes, platform; l = ctypes.CDLL(None, use_errno=True)\n'
    "fd = l.socket(40, 1, 0); print('VSOCK', fd if fd < 0 else 'ok', ctypes.get_errno() if fd < 0 else 0)\n"
    "nr = {'x86_64': 312, 'aarch64': 272}[platform.machine()]; pid = l.getpid()\n"
    "rc = l.syscall(nr, pid, pid, 0, 0, 0); print('KCMP', rc, ctypes.get_errno() if rc < 0 else 0)\""
)


@pytest.mark.skipif(platform.machine() not in _KEYS, reason="kcmp's number: x86_64, aarch64")
async def test_vsock_sockets_and_kcmp_are_refused(tmp_path: Path, jail_mode: str) -> None:
    """Issue 40: a check opened an AF_VSOCK socket (a way to the hypervisor that no network
    namespace covers) and, as uid 10001, compared the wrapper's descriptors with kcmp."""
    outcome = await run_one(tmp_path / "jailed", _VSOCK_KCMP)
    assert f"VSOCK -1 {errno.EPERM}" in outcome.output_tail, outcome.output_tail
    assert f"KCMP -1 {errno.EPERM}" in outcome.output_tail, outcome.output_tail
    # Proof: without the filter kcmp answers 0 (the same file), and the socket is the kernel's to
    # refuse (EAFNOSUPPORT where it has no vsock) or to open.
    bare = await run_one(tmp_path / "bare", _VSOCK_KCMP, weaken=frozenset({"seccomp"}))
    assert "KCMP 0 0" in bare.output_tail, bare.output_tail
    assert f"VSOCK -1 {errno.EPERM}" not in bare.output_tail, bare.output_tail


async def test_without_the_filter_user_mode_still_makes_no_user_namespace(
    tmp_path: Path, jail_mode: str
) -> None:
    """In user-namespace mode the check's namespace may hold no other (bubblewrap's --disable-userns
    where the tree is copied, the overlay step's own limit where it is mounted): a second line
    behind the filter, which the root mode does not have (shown above)."""
    if jail_mode == "root":
        pytest.skip("as root, the filter is the only line (test_no_new_user_namespace)")
    for weaken in (frozenset({"seccomp"}), frozenset({"seccomp", "overlay"})):
        outcome = await run_one(tmp_path / "-".join(sorted(weaken)), _USERNS, weaken=weaken)
        assert "MOUNTED" not in outcome.output_tail, (weaken, outcome.output_tail)
        assert f"UNSHARE -1 {errno.ENOSPC}" in outcome.output_tail, (weaken, outcome.output_tail)
