"""The sandbox of the framework: `SandboxRoot` (the path jail) and `WorkingTree` (git through pygit2).

The code lives in `jail.py`, `worktree.py` and `sandbox_policy.py`; this module is the public name
the architecture promises, so hosts import everything sandbox-related from one place.
"""

from __future__ import annotations

from bot.beam.jail import DEFAULT_MAX_FILE_BYTES, DEFAULT_MAX_LIST_ENTRIES, SandboxRoot
from bot.beam.push_callbacks import Credentials
from bot.beam.sandbox_policy import BlockedPaths, is_git_name, is_protected, push_branch_name
from bot.beam.worktree import DEFAULT_IDENTITY, ORIGIN, WorkingTree

__all__ = [
    "DEFAULT_IDENTITY",
    "DEFAULT_MAX_FILE_BYTES",
    "DEFAULT_MAX_LIST_ENTRIES",
    "ORIGIN",
    "BlockedPaths",
    "Credentials",
    "SandboxRoot",
    "WorkingTree",
    "is_git_name",
    "is_protected",
    "push_branch_name",
]
