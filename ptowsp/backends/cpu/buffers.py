"""Output and scratch buffers for cpu_sim runs: which need zero-filling, and reuse between runs.

Two facts make a memory-bound run expensive beyond its kernels: every new 256 MiB output is
fresh memory, so its pages are faulted in and zeroed by the OS as the kernels first touch them,
and language.md's zero-fill adds a second pass. So:

- `covered(schedule, tensor, syms)` proves, for the common shape of data-parallel programs,
  that the tasks write every element of a tensor: one writing statement, each dimension's
  offset `a * v + b` in one loop variable `v` (or a constant), tiles adjacent (`a` equal to the
  box extent) and spanning the dimension, and nothing reads the tensor before that statement
  has finished writing it (no read earlier in enumeration order, by that task, or in a loop
  around it). Such a tensor needs no zero-fill. A task under a `When` or a CSP statement, or in
  a loop whose extent reads run-time values (element reads, `P.sel`, slots), never counts as
  covering.
- `BufferPool` keeps the arrays a run returned; when the caller has let go of one (nothing but
  the pool refers to it), the next run reuses its memory instead of faulting in new pages.
"""

from __future__ import annotations

import sys
import threading
from typing import Any, Mapping, Optional

from ... import sym
from ...ir import nodes as N
from ...ir import visit as V


class _Accesses(V.Visitor):
    """The accesses of the schedule's tasks and element reads to `tensor`, in enumeration order:
    `writes`, (position, TileArg, the loops around it, dynamic, the loops' statements), and
    `reads`, (position, the loops' statements), a task's read or an element read (`Read`).
    `dynamic`: run-time values decide whether the task runs at all: it is under a `when`, or in
    any other statement holding statements that is not a loop or a block (the CSP ones: a pipe,
    a process, a consume, a send, a record). Loop extents over run-time values are `covered`'s
    to judge."""

    def __init__(self, tensor: str):
        self.tensor = tensor
        self.writes: list = []
        self.reads: list = []
        self.position = 0

    def visit_Loop(self, st: N.Loop, loops: tuple, dynamic: bool, around: tuple) -> None:
        for x in st.body:
            self.visit(x, loops + ((st.var, st.extent),), dynamic, around + (st,))

    def visit_Block(self, st: N.Block, loops: tuple, dynamic: bool, around: tuple) -> None:
        for x in st.body:
            self.visit(x, loops, dynamic, around)

    def visit_Task(self, st: N.Task, loops: tuple, dynamic: bool, around: tuple) -> None:
        self.position += 1
        for a in st.args:
            if isinstance(a, N.TileArg) and a.tensor == self.tensor:
                if a.mode != "r":
                    self.writes.append((self.position, a, dict(loops), dynamic, around))
                if a.mode != "w":
                    self.reads.append((self.position, around))

    def visit_Read(self, st: N.Read, loops: tuple, dynamic: bool, around: tuple) -> None:
        self.position += 1
        if st.tensor == self.tensor:
            self.reads.append((self.position, around))

    def visit_other(self, st, loops: tuple, dynamic: bool, around: tuple) -> None:
        # `when`, CSP: the nested statements, each dynamic (Assert, SlotSet hold none)
        super().visit_other(st, loops, True, around)


def _affine(o: sym.Expr, loops: Mapping[str, sym.Expr]) -> Optional[tuple[Optional[str], sym.Expr, sym.Expr]]:
    """(v, a, b) with o == a * v + b for one loop variable v (None: o has no loop variable)."""
    vs = [v for v in sym.free_vars(o) if v in loops]
    if not vs:
        return None, sym.const(0), o
    if len(vs) > 1:
        return None
    v = vs[0]
    b = sym.substitute(o, {v: 0})
    a = sym.sub(sym.substitute(o, {v: 1}), b)
    if sym.free_vars(a) & set(loops) or sym.sub(o, sym.add(sym.mul(a, sym.var(v)), b)) != sym.const(0):
        return None
    return v, a, b


# the accesses of a tensor in a schedule do not depend on the syms: walked once per program's
# schedule (a decode step of the Llama layer walked its IR for each output on every run)
_WALKED: dict = {}


def _accesses(schedule: N.Schedule, name: str) -> "_Accesses":
    key = (id(schedule), name)
    hit = _WALKED.get(key)
    if hit is not None and hit[0] is schedule:
        return hit[1]
    acc = _Accesses(name)
    for st in schedule.body:
        acc.visit(st, (), False, ())
    if len(_WALKED) > 256:
        _WALKED.clear()
    _WALKED[key] = (schedule, acc)
    return acc


def covered(schedule: N.Schedule, tensor: N.TensorDecl, syms: Mapping[str, int]) -> bool:
    """Whether the schedule's tasks write every element of `tensor` (see the module docstring)."""
    acc = _accesses(schedule, tensor.name)
    if len(acc.writes) != 1:
        return False
    position, arg, loops, dynamic, around = acc.writes[0]
    if dynamic:
        return False  # run-time values decide which tasks exist
    if arg.steps:
        return False  # a strided view writes only every k-th element of its box
    for at, reader_loops in acc.reads:
        if at <= position:
            return False  # read before (or by) the covering task: it reads the zeros
        if any(lp is wl for lp, wl in zip(reader_loops, around)):
            return False  # read in a loop that also writes: an iteration may read ahead
    if any(sym.free_vars(e) - set(syms) for e in loops.values()):
        return False  # an extent over run-time values (or other loop variables)
    try:
        used = set()
        for d, (o, e) in enumerate(zip(arg.offsets, arg.extents)):
            dim = sym.evaluate(tensor.dims[d], syms)
            ext = sym.evaluate(e, syms)
            parts = _affine(sym.as_expr(o), loops)
            if parts is None:
                return False
            v, a, b = parts
            if v is None:
                if not (sym.evaluate(b, syms) == 0 and ext >= dim):
                    return False
                continue
            if v in used:
                return False
            used.add(v)
            steps = sym.evaluate(loops[v], syms)
            if steps <= 0 or sym.evaluate(b, syms) != 0 or sym.evaluate(a, syms) != ext:
                return False
            if ext * steps < dim:
                return False
    except sym.SymError:
        return False
    return True


class BufferPool:
    """Arrays returned by earlier runs, reused once their caller has let go of them."""

    def __init__(self) -> None:
        self._arrays: list = []
        self._lock = threading.Lock()  # runs of one program may come from several threads

    def take(self, shape: tuple, dtype: Any, zero: bool):
        import numpy as np

        want = np.dtype(dtype)
        a = None
        with self._lock:
            arrays = self._arrays
            for i in range(len(arrays)):
                # 2 references: the pool's list and getrefcount's argument (no loop variable
                # holds it: `enumerate` would keep one in its recycled result tuple)
                if (arrays[i].shape == shape and arrays[i].dtype == want
                        and sys.getrefcount(arrays[i]) <= 2):
                    a = arrays.pop(i)
                    break
        if a is None:
            return np.zeros(shape, dtype=want) if zero else np.empty(shape, dtype=want)
        if zero:
            a.fill(0)
        return a

    def keep(self, arrays) -> None:
        """Remember arrays a run hands out (the pool keeps at most the last few)."""
        with self._lock:
            self._arrays.extend(arrays)
            del self._arrays[:-8]
