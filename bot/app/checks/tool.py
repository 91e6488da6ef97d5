"""`run_checks`: the host tool that lets the author skill run the repository's checks on its tree.

Offered only where the repository names checks and the jail can be built. It runs them on the run's
current files (what the model wrote, committed or not) and returns each result and output tail, so
the model can fix what fails before it asks to push. Its calls count against the run's cap
(`check_runs_per_run`); past it the model is told so (BEM-360) and the run goes on.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bot.app.checks import render
from bot.app.checks.flow import Checker
from bot.app.repo_config import RepoConfig
from bot.beam.errors import BeamError
from bot.beam.tools import Tool, ToolSpec, json_params
from bot.beam.types import AgentInput

TOOL_NAME = "run_checks"
# Errors of `run_checks` the model is told about instead of ending the run.
CHECK_TOOL_REFUSALS = frozenset({"BEM-360"})


class RunChecksTool(Tool):
    def __init__(
        self, checker: Checker, tree: Path, config: RepoConfig, repo_full_name: str, cap: int | None
    ) -> None:
        self.checker = checker
        self.tree = tree
        self.config = config
        self.repo_full_name = repo_full_name
        self.cap = cap
        self.used = 0

    def spec(self) -> ToolSpec:
        return ToolSpec(name=TOOL_NAME, description=render.RUN_CHECKS_DESCRIPTION, parameters=json_params({}))

    async def invoke(self, args: Any, input: AgentInput) -> Any:
        if self.cap is not None and self.used >= self.cap:
            raise BeamError("BEM-360", {"detail": render.cap_reached(self.cap)})
        self.used += 1
        report = await self.checker.run(self.tree, self.config, self.repo_full_name, None)
        left = None if self.cap is None else self.cap - self.used
        return render.for_model(report, left)


def checks_tool(
    checker: Checker | None, tree: Path, config: RepoConfig, repo_full_name: str, cap: int | None
) -> list[Tool]:
    """The tool, when this repository has checks and this server can run them; else nothing."""
    if checker is None or not config.checks or not checker.status.available:
        return []
    return [RunChecksTool(checker, tree, config, repo_full_name, cap)]
