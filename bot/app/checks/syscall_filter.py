"""The seccomp filter every jailed process runs under: the system calls a pull request's code is refused.

The list below is the policy; each entry says why it is there. Calls through another ABI than the
native one (i386's `int 0x80`, x32) kill the caller: libseccomp's default for a foreign architecture,
so no rule below can be bypassed through the other numbering. Everything not listed is allowed: the
jail's namespaces, uid and rlimits do the rest, and a check must still be able to run compilers, test
runners and package managers. The filter is compiled by libseccomp (its official Python bindings, or
`pyseccomp`, which has the same API over the same C library), never written as BPF by hand, and handed
to bubblewrap's `--seccomp` through a pipe. Where libseccomp is missing, the jail is unavailable and
checks are off: nothing ever runs without the filter.

Two policies: `with_cgroup=True` when a memory cgroup bounds the check (always, where checks run: the
jail is unavailable without one), and a stricter one for a jail a test builds without its cgroup
(bwrap.WEAKENINGS), which also refuses memfd and System V shared memory.
"""

from __future__ import annotations

import errno
import tempfile
from dataclasses import dataclass
from functools import cache
from typing import Any

# Flags of clone(2)/unshare(2) (linux/sched.h).
CLONE_NEWUSER = 0x10000000
# The address family of virtio sockets (linux/socket.h): a channel to the hypervisor or the host.
AF_VSOCK = 40
# ioctl requests that type into another terminal (asm-generic/ioctls.h).
TIOCSTI = 0x5412
TIOCLINUX = 0x541C


@dataclass(frozen=True, slots=True)
class Refusal:
    syscall: str
    why: str
    errno: int = errno.EPERM
    # Refused only when argument `arg` masked with `mask` equals `value` (None: always refused).
    when: tuple[int, int, int] | None = None
    only_without_cgroup: bool = False


REFUSED: tuple[Refusal, ...] = (
    # A new user namespace gives its creator every capability inside it: mounts of its own (tmpfs
    # outside every cap), and the kernel's whole user-namespace attack surface. bubblewrap's
    # --disable-userns does this in user-namespace mode only; the filter does it in both.
    Refusal("unshare", "new user namespaces", when=(0, CLONE_NEWUSER, CLONE_NEWUSER)),
    Refusal("clone", "new user namespaces", when=(0, CLONE_NEWUSER, CLONE_NEWUSER)),
    # clone3 passes its flags in a struct a filter cannot read: ENOSYS makes glibc fall back to clone.
    Refusal("clone3", "its flags cannot be inspected; libc falls back to clone", errno=errno.ENOSYS),
    Refusal("setns", "joining another namespace"),
    # The kernel keyring is per uid, not per namespace: a key one check stores another check reads.
    Refusal("add_key", "the kernel keyring outlives a check"),
    Refusal("keyctl", "the kernel keyring outlives a check"),
    Refusal("request_key", "the kernel keyring outlives a check"),
    # Reading or writing another process of the jail (the wrapper, the forwarder) or stealing its fds.
    Refusal("ptrace", "tracing another process"),
    Refusal("process_vm_readv", "reading another process's memory"),
    Refusal("process_vm_writev", "writing another process's memory"),
    Refusal("pidfd_getfd", "taking another process's file descriptors"),
    # Which descriptors of another process point at the same file, pipe or socket: a probe of what
    # the wrapper holds (the bot's pipes), and kernel pointer order. As uid 10001 nothing else stops it.
    Refusal("kcmp", "comparing another process's kernel objects"),
    # A virtio socket is not in any network namespace: it reaches the hypervisor or the host whatever
    # --unshare-net did. The family is an int to the kernel: only its low 32 bits are compared.
    Refusal("socket", "vsock reaches the host past the network namespace", when=(0, 0xFFFFFFFF, AF_VSOCK)),
    Refusal(
        "socketpair", "vsock reaches the host past the network namespace", when=(0, 0xFFFFFFFF, AF_VSOCK)
    ),
    # Kernel attack surface a test suite has no use for.
    Refusal("perf_event_open", "kernel attack surface, side channels"),
    Refusal("bpf", "kernel attack surface"),
    Refusal("userfaultfd", "makes kernel races easy to win"),
    Refusal("io_uring_setup", "kernel attack surface (Docker's default profile refuses it too)"),
    Refusal("io_uring_enter", "kernel attack surface"),
    Refusal("io_uring_register", "kernel attack surface"),
    Refusal("syslog", "the kernel's log"),
    # What changes the system, not the jail.
    Refusal("init_module", "loading kernel modules"),
    Refusal("finit_module", "loading kernel modules"),
    Refusal("delete_module", "unloading kernel modules"),
    Refusal("kexec_load", "replacing the kernel"),
    Refusal("kexec_file_load", "replacing the kernel"),
    Refusal("reboot", "rebooting"),
    Refusal("swapon", "swap"),
    Refusal("swapoff", "swap"),
    # Mounts: a tmpfs outside the cap, or a way around a read-only bind.
    Refusal("mount", "mounts"),
    Refusal("umount2", "mounts"),
    Refusal("pivot_root", "mounts"),
    Refusal("open_tree", "mounts (the new mount API)"),
    Refusal("move_mount", "mounts (the new mount API)"),
    Refusal("fsopen", "mounts (the new mount API)"),
    Refusal("fsconfig", "mounts (the new mount API)"),
    Refusal("fsmount", "mounts (the new mount API)"),
    Refusal("fspick", "mounts (the new mount API)"),
    Refusal("mount_setattr", "mounts (the new mount API)"),
    # Typing into the terminal of whoever started the bot (the new session is the first defence).
    # The request is an int to the kernel: only its low 32 bits are compared, as the kernel reads it.
    Refusal("ioctl", "typing into another terminal", when=(1, 0xFFFFFFFF, TIOCSTI)),
    Refusal("ioctl", "typing into another terminal", when=(1, 0xFFFFFFFF, TIOCLINUX)),
    # Without a memory cgroup nothing counts these pages: memfd holds memory outside the address-space
    # limit, and a System V segment outlives every process that attached it.
    Refusal("memfd_create", "memory no limit counts, without a cgroup", only_without_cgroup=True),
    Refusal("memfd_secret", "memory no limit counts, without a cgroup", only_without_cgroup=True),
    Refusal("shmget", "memory no limit counts, without a cgroup", only_without_cgroup=True),
)


class FilterUnavailable(Exception):
    """libseccomp (or its Python bindings) is not installed: the jail must not run."""


def _bindings() -> Any:
    try:
        import seccomp  # libseccomp's own bindings (Debian's python3-seccomp), where importable

        return seccomp
    except ImportError:
        pass
    try:
        import pyseccomp  # the same API over ctypes (PyPI)
    except (ImportError, RuntimeError, OSError) as exc:  # RuntimeError: libseccomp.so not found
        raise FilterUnavailable(f"libseccomp cannot be loaded ({exc})") from exc
    return pyseccomp


def policy(*, with_cgroup: bool) -> tuple[Refusal, ...]:
    return tuple(r for r in REFUSED if not (with_cgroup and r.only_without_cgroup))


@cache
def compiled(*, with_cgroup: bool) -> bytes:
    """The filter as the BPF program bubblewrap loads (a few hundred bytes; made once per process)."""
    lib = _bindings()
    try:
        flt = lib.SyscallFilter(defaction=lib.ALLOW)
        for rule in policy(with_cgroup=with_cgroup):
            try:
                lib.resolve_syscall(lib.Arch.NATIVE, rule.syscall)
            except (ValueError, OSError, TypeError):
                continue  # unknown on this architecture (or this libseccomp): nothing to refuse
            args = [] if rule.when is None else [lib.Arg(rule.when[0], lib.MASKED_EQ, *rule.when[1:])]
            flt.add_rule(lib.ERRNO(rule.errno), rule.syscall, *args)
        with tempfile.TemporaryFile() as out:
            flt.export_bpf(out)
            out.seek(0)
            return out.read()
    except FilterUnavailable:
        raise
    except Exception as exc:  # the bindings' errors are OSError, RuntimeError or ValueError
        raise FilterUnavailable(f"the seccomp filter could not be built ({exc})") from exc
