"""Which parallel loop nests have mutually independent tasks.

A nest is independent when no two of its tasks conflict (language.md section 6: a write that
overlaps another task's read or write of the same tensor). The runtime may then run the tasks
of one batch on several workers at once (`WSP_BATCH_INDEPENDENT` in `wsp_runtime.h`), which
is what keeps placement (`round_robin`, `affinity`, ...) as cheap as no placement.

The proof is deliberately simple and sound: the nest is a perfect nest of grid loops around
one task, and every tensor the task writes is accessed through one view only (its reads of that
tensor, if any, are the same box) such that, for every loop variable `v`, some dimension's
offset is `c*v + a` with `a` free of the nest's variables and the extent a constant no larger
than `|c|`. Two different iterations differ in some `v`, so their boxes are disjoint along that
dimension. Anything else (several statements, `P.seq` inside, a variable no dimension tracks,
`Y[i // 2]`) is reported as not proven, and the runtime keeps such batches on one worker.
"""

from __future__ import annotations

from .. import sym
from . import nodes as N


def independent_nest(loop: N.Loop) -> bool:
    """Whether the tasks of the grid nest rooted at `loop` are pairwise independent (proven)."""
    loop_vars: list[str] = []
    node: N.Stmt = loop
    while isinstance(node, N.Loop):
        if node.kind == "seq" or len(node.body) != 1:
            return False
        loop_vars.append(node.var)
        node = node.body[0]
    if not isinstance(node, N.Task):
        return False
    views: dict[str, list[N.TileArg]] = {}
    for a in node.args:
        if isinstance(a, N.TileArg):
            views.setdefault(a.tensor, []).append(a)
    for args in views.values():
        if all(a.mode == "r" for a in args):
            continue  # reads never conflict with reads
        first = args[0]
        if any(_box(a) != _box(first) for a in args[1:]):
            return False
        if not all(_separates(first, v, loop_vars) for v in loop_vars):
            return False
    return True


def _box(a: N.TileArg) -> tuple[str, ...]:
    return (tuple(sym.to_str(sym.as_expr(e)) for e in (*a.offsets, *a.extents))
            + tuple(str(k) for k in a.steps))


def _separates(a: N.TileArg, v: str, loop_vars: list[str]) -> bool:
    """Some dimension of `a` moves by at least its (constant) extent whenever `v` changes, and
    depends on no other variable of the nest."""
    nest = set(loop_vars)
    for off, ext in zip(a.offsets, a.box_extents):
        off = sym.as_expr(off)
        if sym.free_vars(off) & nest != {v}:
            continue
        step = sym.const_value(sym.simplify(sym.substitute(off, {v: sym.var(v) + 1}) - off))
        width = sym.const_value(sym.as_expr(ext))
        if step is not None and width is not None and step != 0 and 0 <= width <= abs(step):
            return True
    return False
