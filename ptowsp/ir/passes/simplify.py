"""simplify: what lowering left in the IR that is decided at compile time.

Loop trees (symbolic expressions are already canonical when built, `sym`):
- a loop whose extent is a constant <= 0 runs nothing: removed;
- a `when` predicate that is constant (a literal, or a comparison of two constants) selects its
  branch at compile time: the branch replaces the `when`.

Kernels:
- common subexpressions: two ops with the same operation, operands, shape, dtype and constant
  are one value (ops are pure);
- ops no store reaches are dropped, and the rest renumbered in order.

A branch of several statements that replaces its `when` becomes a `combine` block of them (as
lowering does): inside a `sequential` it stays one step, and `flatten` splices it elsewhere.
Constants are told apart by their bits: `literal 0.0` and `literal -0.0` are two values (they
give different results: `x * 0.0` and `x * -0.0` differ in sign).

Leaves alone: one-trip loops (their variable names coordinates in messages), floating-point
constant folding (rounding must stay the back ends'), anything inside extern kernels,
planned kernels (`plan-kernels` ran: the plan indexes the ops, so they must not change).
"""

from __future__ import annotations

import struct
from dataclasses import replace
from typing import Optional

from ... import sym
from .. import nodes as N
from ..visit import map_schedules, rewrite

_CMP = {"==": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b,
        "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b}


def simplify(m: N.Module) -> N.Module:
    """Empty loops and constant `when`s folded away; kernel values deduplicated."""
    m = map_schedules(m, lambda s: rewrite(s.body, _fold))
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
                return _as_one(body)
            if v is True:  # an earlier branch may hold: this one ends the chain
                return [replace(st, branches=tuple(branches), otherwise=body)]
            if v is None:
                branches.append((c, body))
        if not branches:
            return _as_one(st.otherwise)
        if len(branches) == len(st.branches):
            return [st]
        return [replace(st, branches=tuple(branches))]
    return [st]


def _as_one(body: tuple) -> list:
    """A chosen branch as what replaces its `when`: nothing, its statement, or a `combine` block
    of its statements (inside a `sequential` a `when` is one step: its statements must not
    become steps ordered one after another)."""
    return list(body) if len(body) <= 1 else [N.Block("combine", tuple(body))]


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
    if k.is_extern or not k.ops or k.plan is not None:
        return k
    canon: list[int] = []
    seen: dict[tuple, int] = {}
    for i, op in enumerate(k.ops):
        key = (op.op, tuple(canon[a] for a in op.args), op.shape, op.dtype, _attr_key(op.attr))
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


def _attr_key(attr) -> tuple:
    """`attr` as a dictionary key that tells apart what `==` confuses: `0.0` and `-0.0` (equal,
    one hash), `1`, `1.0` and `True` (equal); NaNs by their bits."""
    if isinstance(attr, float):
        return ("float", struct.pack("<d", attr))
    if isinstance(attr, tuple):
        return ("tuple",) + tuple(_attr_key(a) for a in attr)
    return (type(attr).__name__, attr)
