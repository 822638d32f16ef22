"""The back ends traverse the IR through `ir/visit.py`: no module under ptowsp/backends/ tests
a statement's class itself (`isinstance(st, N.Loop)`). An interpreter or an emitter is a
`Visitor` (`visit_<Class>`), a search uses `walk`, `children` or the queries; so a new statement
class means an entry in `visit.FIELDS`, and a `visit_` method only where a back end treats it
specially."""

from __future__ import annotations

import ast
import typing
from pathlib import Path

import pytest

from ptowsp.ir import nodes as N

ROOT = Path(__file__).resolve().parent.parent.parent
BACKENDS = ROOT / "ptowsp" / "backends"
STMT_NAMES = {c.__name__ for c in typing.get_args(N.Stmt)} | {"CSP_STMTS"}


def _names(node: ast.AST) -> set[str]:
    """Every name and attribute named in an expression (`N.Loop` -> Loop)."""
    out = set()
    for x in ast.walk(node):
        if isinstance(x, ast.Name):
            out.add(x.id)
        elif isinstance(x, ast.Attribute):
            out.add(x.attr)
    return out


def _class_tests(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id == "isinstance" and len(node.args) == 2:
            named = _names(node.args[1]) & STMT_NAMES
            if named:
                found.append(f"{node.lineno}: isinstance(..., {', '.join(sorted(named))})")
    return found


@pytest.mark.parametrize("path", sorted(p for p in BACKENDS.rglob("*.py")
                                        if "__pycache__" not in p.parts),
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_no_back_end_dispatches_on_statement_classes_itself(path: Path):
    assert not _class_tests(path), (
        f"{path.relative_to(ROOT)} tests statement classes itself: dispatch through "
        "ptowsp.ir.visit (a Visitor, walk, children or a query)\n" + "\n".join(_class_tests(path)))


def test_the_check_finds_an_isinstance_chain(tmp_path: Path):
    sample = tmp_path / "sample.py"
    sample.write_text("def f(st, a):\n    if isinstance(st, (N.When, *N.CSP_STMTS)):\n"
                      "        return isinstance(a, N.TileArg)\n")
    assert _class_tests(sample) == ["2: isinstance(..., CSP_STMTS, When)"]
