"""Every BEM code the code base uses is in the catalogue, and the catalogue keeps the original's statuses."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from bot.beam.errors import CATALOG, BeamError

BOT = Path(__file__).resolve().parents[2] / "bot"
CODE = re.compile(r"BEM-\d{3}")


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the string constants that are docstrings: they talk about codes, they do not use them."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def codes_used(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    skip = _docstrings(tree)
    used: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            used.update(CODE.findall(node.value))
    return used


def test_the_walk_finds_codes() -> None:
    # Guards the test itself: the runner (and its approved actions) raise these, so the walk must see them.
    assert {"BEM-088", "BEM-089"} <= codes_used(BOT / "beam" / "runner.py")
    assert {"BEM-090"} <= codes_used(BOT / "beam" / "approved_actions.py")


def test_every_code_used_under_bot_is_catalogued() -> None:
    files = sorted(BOT.rglob("*.py"))
    assert files
    missing = {
        f"{path.relative_to(BOT.parent)}: {code}"
        for path in files
        for code in codes_used(path)
        if code not in CATALOG
    }
    assert not missing, sorted(missing)


@pytest.mark.parametrize(
    ("code", "status"),
    [
        ("BEM-020", 404),
        ("BEM-027", 404),
        ("BEM-040", 400),
        ("BEM-041", 422),
        ("BEM-042", 500),
        ("BEM-063", 400),
        ("BEM-065", 400),
        ("BEM-066", 400),
        ("BEM-081", 422),
        ("BEM-086", 422),
        ("BEM-087", 422),
        ("BEM-088", 422),
        ("BEM-089", 422),
        ("BEM-090", 422),
        ("BEM-109", 501),
        ("BEM-328", 403),
    ],
)
def test_statuses_of_the_codes_the_agent_side_raises(code: str, status: int) -> None:
    assert CATALOG[code].status == status
    assert BeamError(code).http_status == status


def test_catalogue_keys_are_well_formed() -> None:
    assert all(CODE.fullmatch(code) and entry.code == code for code, entry in CATALOG.items())
