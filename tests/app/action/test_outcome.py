"""The step's outputs and summary (`outcome.py`, `render.py`): what the workflow reads after a run."""

from __future__ import annotations

from pathlib import Path

from bot.app import markdown as md
from bot.app.action import render
from bot.app.action.outcome import Finding, Outcome, RunRow, write_outputs
from bot.beam.errors import BeamError


def read_outputs(path: Path) -> dict[str, str]:
    found: dict[str, str] = {}
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        name, delimiter = lines[i].split("<<", 1)
        end = lines.index(delimiter, i + 1)
        found[name] = "\n".join(lines[i + 1 : end])
        i = end + 1
    return found


def test_a_value_cannot_end_its_output_or_set_another(tmp_path: Path) -> None:
    path = tmp_path / "out"
    write_outputs(
        {"GITHUB_OUTPUT": str(path)}, {"review-url": "x\nEOF\noutcome=success", "outcome": "failure"}
    )
    assert read_outputs(path) == {"review-url": "x\nEOF\noutcome=success", "outcome": "failure"}


def test_outside_actions_nothing_is_written(tmp_path: Path) -> None:
    write_outputs({}, {"outcome": "success"})
    assert list(tmp_path.iterdir()) == []


def test_the_last_line_names_the_first_cause_and_counts_the_rest() -> None:
    failed = RunRow("review", "failed", "BEM-084", "LLM returned an error status.: llm http 401")
    outcome = Outcome(
        runs=[failed],
        state_problem=BeamError("BEM-394", "could not keep this run's state on GitHub"),
        unfinished=1,
        time_limit=600,
    )
    line = render.failure_line(outcome)
    assert line is not None
    assert line.startswith("`/beam review` failed (BEM-084): LLM returned an error status.: llm http 401")
    assert line.endswith("(and 2 more above)")
    causes = render.causes(outcome)
    assert "BEM-394" in causes[1] and "\n" not in causes[1]
    assert "1 job(s) still queued or running when the time limit (600 s" in causes[2]


def test_nothing_failed_is_no_failure_line() -> None:
    assert render.failure_line(Outcome(runs=[RunRow("ask", "succeeded", None, None)])) is None


def test_the_summary_shows_a_findings_claim_without_rendering_it() -> None:
    claim = "<img src=x onerror=alert(1)> @everyone [click](https://evil.example)"
    outcome = Outcome(
        runs=[RunRow("review", "succeeded", None, None, "m", 10, 5, None)],
        findings=[Finding("a.py", 3, "major", claim)],
    )
    text = render.summary(outcome, "issue_comment on o/r#1", "https://github.com/o/r/actions/runs/1")
    # Shown in a code span, where nothing renders: no image, mention or link.
    [line] = [line for line in text.splitlines() if "evil.example" in line]
    assert line == f"- `a.py:3` (`major`): {md.code(claim)}"
