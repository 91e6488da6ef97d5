"""The packages of `bot.app`, pinned: every import points down the layers, and nothing imports in a circle.

The order (top to bottom) is the way of a command, as bot/app/__init__.py says: web, assembly,
webhooks, approvals, runs, then the adapters and the queue, then root modules any layer may use.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import bot.app

ROOT = Path(bot.app.__file__).parent

# Higher imports lower; equal ranks never import each other, except the edges in SIDEWAYS.
RANK = {
    "action": 7,  # issue 31: `beam-bot action`, one event through the assembled app, over web's intake
    "web": 6,
    "dashboard": 5.5,  # issue 44: the maintainers' page, mounted by web, over jobs, limits and github
    "assembly": 5,
    "webhooks": 4,
    "approvals": 3,
    "reviews": 3,
    "runs": 2,
    "context": 1.9,  # what the model reads: the diff, its budget, focus, grammars, linters, the prompt
    "checks": 1.75,  # issue 22: the repositories' checks in a jail, over git, effects and repo_config
    "effects": 1.5,  # issue 8: the journal of GitHub writes, over github and jobs
    "github": 1,
    "git": 1,
    "jobs": 1,
    "limits": 1,
    "commands": 0,
    "repo_config": 0,
    "permissions": 0,
    "settings": 0,
    "logs": 0,
    "fence": 0,  # the write fence: set by the worker pool, checked by the GitHub client
    "credentials": 1.25,  # issue 23: where a process finds the App's credentials, over settings and jobs
    "markdown": 0,  # issue 28: the one escaping of untrusted text in comments
}
SIDEWAYS = {
    ("repo_config", "permissions"),
    ("limits", "jobs"),
}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> Iterator[str]:
    """Every `bot.app` module a file imports, at any depth (also under TYPE_CHECKING)."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names if alias.name.startswith("bot.app"))
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("bot.app"):
            yield node.module
            # `from bot.app import commands` or `from bot.app.runs import render` name modules too.
            for alias in node.names:
                if (
                    (ROOT.parent.parent / (node.module + "." + alias.name).replace(".", "/"))
                    .with_suffix(".py")
                    .exists()
                ):
                    yield f"{node.module}.{alias.name}"


def unit(module: str) -> str:
    """The package (or root module) of `bot.app` a module belongs to."""
    parts = module.split(".")
    return parts[2] if len(parts) > 2 else "bot.app"


def graph() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {}
    for path in sorted(ROOT.rglob("*.py")):
        edges[module_name(path)] = set(imports(path))
    return edges


def test_every_package_and_root_module_has_a_place() -> None:
    units = {unit(module) for module in graph()} - {"bot.app"}
    assert units == set(RANK), f"place new packages in RANK: {sorted(units ^ set(RANK))}"


def test_every_package_says_what_it_owns_and_may_import() -> None:
    for init in sorted(ROOT.glob("*/__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
        assert doc and "import" in doc, (
            f"{init.parent.name}/__init__.py needs a docstring saying what it may import"
        )


def upward_edges(edges: dict[str, set[str]]) -> list[str]:
    wrong = []
    for module, targets in edges.items():
        for target in targets:
            a, b = unit(module), unit(target)
            if "bot.app" in (a, b) or a == b:
                continue
            if RANK[a] <= RANK[b] and (a, b) not in SIDEWAYS:
                wrong.append(f"{module} -> {target}")
    return wrong


def cycles_in(edges: dict[str, set[str]]) -> list[list[str]]:
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    cycles: list[list[str]] = []

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for target in sorted(edges.get(module, ())):
            if target not in edges:
                continue
            if state.get(target) == 1:
                cycles.append([*path[path.index(target) :], target])
            elif target not in state:
                visit(target, [*path, target])
        state[module] = 2

    for module in sorted(edges):
        if module not in state:
            visit(module, [module])
    return cycles


def test_no_import_points_up_or_sideways() -> None:
    assert upward_edges(graph()) == []


def test_no_import_cycle_between_modules() -> None:
    assert cycles_in(graph()) == []


def test_the_checks_see_real_edges_and_catch_bad_ones() -> None:
    # The checks above would pass vacuously if `imports` found nothing.
    edges = graph()
    assert "bot.app.approvals.flow" in edges["bot.app.webhooks.handlers"]
    assert "bot.app.runs.render" in edges["bot.app.webhooks.handlers"]
    assert "bot.app.permissions" in edges["bot.app.repo_config.model"]
    bad = {"bot.app.runs.run": {"bot.app.approvals.flow"}, "bot.app.approvals.flow": {"bot.app.runs.run"}}
    assert upward_edges(bad) == ["bot.app.runs.run -> bot.app.approvals.flow"]
    assert upward_edges({"bot.app.git.checkout": {"bot.app.jobs.store"}}) != []
    assert cycles_in(bad) == [["bot.app.approvals.flow", "bot.app.runs.run", "bot.app.approvals.flow"]]
