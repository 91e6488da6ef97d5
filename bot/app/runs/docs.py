"""`/beam docs`: the author skill with a documentation prompt, allowed to write only `docs.paths`.

A write elsewhere is refused by the run's working tree (BEM-338) and the refusal goes back to the
model as a tool result, so it can put the documentation where it belongs; the held push is checked
against the same globs again before anyone is asked to approve it.
"""

from __future__ import annotations

from bot.app.repo_config import RepoConfig
from bot.app.runs.plan import RunPlan

OUTSIDE_DOCS = "BEM-338"

GUIDANCE = (
    "You write documentation only. You may change only files matching these globs (from the "
    "repository root; `**` spans directories): {paths}. A write anywhere else is refused with "
    "{code}; do not retry it. Read the code you document, make the documentation change, commit it "
    "and push."
)
FOR_PULL = (
    "Update the documentation for this pull request's change: read what it changes, then update or add "
    "the documentation that change needs."
)


def docs_plan(config: RepoConfig) -> RunPlan:
    paths = tuple(config.docs.paths)
    return RunPlan(
        label="docs",
        allowed_paths=paths,
        guidance=GUIDANCE.format(paths=", ".join(f"`{p}`" for p in paths), code=OUTSIDE_DOCS),
        default_task=FOR_PULL,
        refusals_for_model=frozenset({OUTSIDE_DOCS}),
    )
