"""How deeply a program may nest (language.md section 2), and the check that holds it to that.

Every stage after parsing walks the AST and the IR recursively, and a flat chain `a - b - ... - z`
is a tree as deep as it is long (operators group left to right). The driver runs the stages on a
thread with a large stack (`driver.deep`) sized for these limits, so whatever passes this check
compiles; what does not is a diagnostic at the construct that goes past the limit, before any
stage recurses on it. The walk here is iterative.

- `MAX_DEPTH`: an expression is at most this many constructs deep: each operator, call, index,
  attribute and keyword argument is one level, and so is the operand at the bottom (a chain of
  100,000 operands is 100,000 levels). 100,000 levels check, lower, optimise and emit in
  seconds, in well under a gigabyte.
- `MAX_BLOCKS`: `{ ... }` blocks of workload statements (`for`, `when`, `combine`, `sequential`,
  `pipe`, `process`, `consume`) nest at most this deep. Each loop level adds a coordinate to
  every task inside it, so the work grows with the square of the depth; real programs nest a
  handful of levels.
"""

from __future__ import annotations

from typing import Iterable, Optional

from ..diagnostics import Diagnostic
from . import ast as A

MAX_DEPTH = 100_000
MAX_BLOCKS = 256

_BLOCKS = (A.ForLoop, A.When, A.Combine, A.Sequential, A.Pipe, A.Process, A.Consume)
# constructs that are not part of an expression: the expressions inside them start at depth 1
_NOT_EXPRESSIONS = (*A.DECLARATION_NAMES, A.ModuleDecl, A.Import, A.Let, A.LetMany,
                    A.Assign, A.Store,
                    A.ExprStmt, A.CallStmt, A.ForLoop, A.WhenBranch, A.When, A.Combine,
                    A.Sequential, A.Pipe, A.Process, A.Send, A.Consume, A.Record, A.Synchronize,
                    A.SlotSet, A.SlotLoad, A.Collective, A.MeshDecl, A.Layout, A.LayoutDim,
                    A.KernelParam, A.ExternBody, A.ExternInclude,
                    A.WorkloadParam,
                    A.Combinator)


def nesting_errors(files: Iterable[A.SourceFile], blocks_only: bool = False) -> list[Diagnostic]:
    """One diagnostic per file that nests past a limit (at the first construct past it).
    `blocks_only`: the expressions are known to be within the limit (the caller's text is too
    short to pass it), so only the statements are walked."""
    out = []
    for f in files:
        d = _first_too_deep(f, blocks_only)
        if d is not None:
            out.append(d)
    return out


def _first_too_deep(f: A.SourceFile, blocks_only: bool = False) -> Optional[Diagnostic]:
    # (node, its depth in the expression it belongs to, blocks around it), in pre-order
    stack: list[tuple[A.Node, int, int]] = [(d, 0, 0) for d in reversed(f.decls)]
    while stack:
        node, depth, blocks = stack.pop()
        if isinstance(node, _BLOCKS):
            blocks += 1
            if blocks > MAX_BLOCKS:
                return Diagnostic(
                    _start(node), "nesting", f"blocks nested more than {MAX_BLOCKS} deep",
                    "move the inner statements into a workload of their own and call it")
        if depth > MAX_DEPTH:
            at = node.op_span if isinstance(node, A.Binary) else _start(node)
            return Diagnostic(
                at, "nesting", f"expression nested more than {MAX_DEPTH:,} levels deep",
                "each operator, call and index is a level (`a - b - c` is `(a - b) - c`): "
                "split the expression into smaller ones (`let` steps in a kernel)")
        inner = 1 if isinstance(node, _NOT_EXPRESSIONS) else depth + 1
        children = []
        for name in _fields(type(node)):
            value = getattr(node, name)
            if isinstance(value, A.Node):
                children.append(value)
            elif type(value) is tuple:
                children.extend(x for x in value if isinstance(x, A.Node))
        if blocks_only:
            children = [c for c in children if isinstance(c, _NOT_EXPRESSIONS)]
        stack.extend((child, inner, blocks) for child in reversed(children))
    return None


_FIELDS: dict[type, tuple[str, ...]] = {}


def _fields(cls: type) -> tuple[str, ...]:
    """The fields of a node class that may hold nodes (`Node.children`, without a generator
    per node: this walk runs on every module checked)."""
    names = _FIELDS.get(cls)
    if names is None:
        names = _FIELDS[cls] = tuple(n for n in cls._all_ if n != "span")
    return names


def _start(node: A.Node) -> A.Span:
    """The first character of `node` (its whole span may cover thousands of lines)."""
    s = node.span
    return A.Span(s.file, s.line, s.col, s.line, s.col + 1)
