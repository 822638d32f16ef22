"""simplify_module: what lowering left in the IR that is decided at compile time.

Loop trees (symbolic expressions are already canonical when built, `ir.sym`):
- a loop whose extent is a constant <= 0 runs nothing: removed;
- a `when` predicate that is constant (a literal, or a comparison of two constants) selects its
  branch at compile time: the branch replaces the `when`.

Kernels:
- common subexpressions: two ops with the same operation, operands, shape, dtype and constant
  are one value (ops are pure);
- ops no store reaches are dropped, and the rest renumbered in order.

Leaves alone: one-trip loops (their variable names coordinates in messages), floating-point
constant folding (rounding must stay the back ends'), anything inside `extern c` kernels.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Optional

from .. import nodes as N
from .. import sym
from . import map_schedules, rewrite_stmts

_CMP = {"==": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b,
        "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b}


def simplify_module(m: N.Module) -> N.Module:
    """Empty loops and constant `when`s folded away; kernel values deduplicated."""
    m = map_schedules(m, lambda s: rewrite_stmts(s.body, _fold))
    kernels = tuple(simplify_kernel(k) for k in m.kernels)
    if any(a is not b for a, b in zip(kernels, m.kernels)):
        m = replace(m, kernels=kernels)
    return m


def _fold(st) -> list:
    if isinstance(st, N.Loop):
        n = sym.const_value(st.extent)
        if n is not None and n <= 0:
            return []
        return [st]
    if isinstance(st, N.When):
        branches = []
        for c, body in st.branches:
            v = cond_value(c)
            if v is True and not branches:
                return list(body)
            if v is True:  # an earlier branch may hold: this one ends the chain
                return [replace(st, branches=tuple(branches), otherwise=body)]
            if v is None:
                branches.append((c, body))
        if not branches:
            return list(st.otherwise)
        if len(branches) == len(st.branches):
            return [st]
        return [replace(st, branches=tuple(branches))]
    return [st]


def cond_value(c: N.Cond) -> Optional[bool]:
    """The predicate's value when it is decided at compile time, else None."""
    if c.op == "const":
        return bool(c.args[0])
    if c.op == "not":
        v = cond_value(c.args[0])
        return None if v is None else not v
    if c.op in ("and", "or"):
        a, b = cond_value(c.args[0]), cond_value(c.args[1])
        if c.op == "and":
            return False if a is False or b is False else (True if a and b else None)
        return True if a is True or b is True else (False if a is False and b is False else None)
    if c.op in _CMP:
        a, b = sym.const_value(c.args[0]), sym.const_value(c.args[1])
        if a is not None and b is not None:
            return _CMP[c.op](a, b)
    return None


def simplify_kernel(k: N.Kernel) -> N.Kernel:
    """Common subexpressions merged and unreachable ops dropped (the same object if none)."""
    if k.extern_c is not None or not k.ops:
        return k
    canon: list[int] = []
    seen: dict[tuple, int] = {}
    for i, op in enumerate(k.ops):
        key = (op.op, tuple(canon[a] for a in op.args), op.shape, op.dtype, type(op.attr),
               op.attr)
        canon.append(seen.setdefault(key, i))
    live = set()
    stack = [canon[i] for _, i in k.stores]
    while stack:
        i = stack.pop()
        if i not in live:
            live.add(i)
            stack.extend(canon[a] for a in k.ops[i].args)
    keep = [i for i in range(len(k.ops)) if i in live]
    if len(keep) == len(k.ops):
        return k
    new_index = {old: new for new, old in enumerate(keep)}
    ops = tuple(replace(k.ops[i], args=tuple(new_index[canon[a]] for a in k.ops[i].args))
                for i in keep)
    stores = tuple((p, new_index[canon[i]]) for p, i in k.stores)
    return replace(k, ops=ops, stores=stores)
