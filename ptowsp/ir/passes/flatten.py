"""flatten_blocks: nested `combine` and `sequential` blocks become one block (the seeds'
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
from . import map_schedules, rewrite_stmts


def flatten_blocks(m: N.Module) -> N.Module:
    """Nested combine / sequential blocks flattened into their parents."""
    return map_schedules(m, lambda s: _flatten_list(rewrite_stmts(s.body, _flatten)))


def _flatten(st) -> list:
    if not isinstance(st, N.Block):
        if isinstance(st, (N.Loop, N.Consume, N.Process, N.Mark)):
            body = _flatten_list(st.body)
            return [st if body is st.body else replace(st, body=body)]
        if isinstance(st, N.Pipe):
            # `rewrite_stmts` rewrites a pipe's processes' statements but hands `fn` the pipe,
            # not its processes: their bodies are flattened here
            procs = tuple(_flatten(p)[0] for p in st.processes)
            if all(p is q for p, q in zip(procs, st.processes)):
                return [st]
            return [replace(st, processes=procs)]
        if isinstance(st, N.When):
            branches = tuple((c, _flatten_list(b)) for c, b in st.branches)
            other = _flatten_list(st.otherwise)
            if all(b is ob for (_, b), (_, ob) in zip(branches, st.branches)) and \
                    other is st.otherwise:
                return [st]
            return [replace(st, branches=branches, otherwise=other)]
        return [st]
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
