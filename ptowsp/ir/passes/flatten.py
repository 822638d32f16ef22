"""flatten: nested `combine` and `sequential` blocks become one block (the seeds'
`FlattenCombinePass`).

- A `combine` block adds no order, so its statements join the enclosing statement list when
  that list adds none either: a loop body, a branch, a process body, another `combine`, the
  schedule body. (Inside a `sequential` a `combine` is one step and stays.)
- A `sequential` block directly inside a `sequential` is one step made of steps; its steps
  become steps of the outer one (each still waits for the one before it).
- A block of one statement is that statement; an empty block is nothing.

Leaves alone: loops (even of one statement), CSP statements, and the order of everything.
"""

from __future__ import annotations

from dataclasses import replace

from .. import nodes as N
from ..visit import map_lists, map_schedules, rewrite


def flatten(m: N.Module) -> N.Module:
    """Nested combine / sequential blocks flattened into their parents."""
    return map_schedules(m, lambda s: _flatten_list(rewrite(s.body, _flatten)))


def _flatten(st) -> list:
    if not isinstance(st, N.Block):
        # every statement list but a `sequential`'s adds no order (processes' bodies included:
        # `rewrite` hands `_flatten` the pipe, never its processes)
        return [map_lists(st, _flatten_list)]
    if st.kind == "sequential":
        steps = []
        for x in st.body:
            if isinstance(x, N.Block) and x.kind == "sequential":
                steps.extend(x.body)
            else:
                steps.append(x)
        steps = [x for x in steps if not (isinstance(x, N.Block) and not x.body)]
        if len(steps) <= 1:
            return steps
        if len(steps) == len(st.body) and all(a is b for a, b in zip(steps, st.body)):
            return [st]
        return [replace(st, body=tuple(steps))]
    body = _flatten_list(st.body)
    if len(body) == 1:
        return list(body)
    return [st if body is st.body else replace(st, body=body)]


def _flatten_list(stmts: tuple) -> tuple:
    """A statement list that adds no order: `combine` blocks in it are spliced in."""
    if not any(isinstance(x, N.Block) and x.kind == "combine" for x in stmts):
        return stmts
    out: list = []
    for x in stmts:
        if isinstance(x, N.Block) and x.kind == "combine":
            out.extend(_flatten_list(x.body))
        else:
            out.append(x)
    return tuple(out)
