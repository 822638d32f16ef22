"""Which values of a kernel are computed per chunk of rows, and which are resident.

The row extent M of the stored tiles is split into chunks of R rows (R is chosen by
`ub_plan.fit`: the largest divisor of M whose footprint fits the UB). Every value computed row by
row (elementwise ops, row reductions, broadcasts, slices, gathers, matmul in its left operand)
is computed per chunk; a value that needs all rows (the operand of a `transpose`, of a column
reduction other ops read unless the kernel needs passes over the chunks, a matmul's right
operand that is computed in the kernel, the x of a row `gather`, and everything they depend
on) is resident: loaded and computed once, before the chunk loop. A
matmul's right operand that is a parameter (possibly converted to f32) is never resident: it
streams from GM in blocks of rows through a queue of its own, so weights need not fit the UB.

A `transpose` that only matmuls read, as their left or right operand, is never computed
(`in_place_transposes`): the matmul reads its operand in place (`matmul.py`), so its operand is
resident and no transposed copy exists. A matmul whose both operands are transposed is resident
too (it writes its result a column at a time).

Columns (`column_passes`, `narrow`): when even one row does not fit, a kernel elementwise along
its rows, row reductions allowed, runs in blocks of C columns too, C a multiple of 32: the
kernel is emitted for [*, C] tiles inside a loop over the blocks, each block's tiles a view of
C columns of the task's (the last one partial: padded on load, only its columns stored), once
per pass when row reductions feed the row again (their partial results accumulated across the
blocks, read back in the next pass).
"""

from __future__ import annotations

import dataclasses
from typing import Optional

from ..primitives import OPS
from .vector_plan import VFLOAT, in_place_transposes, streamed_operands  # noqa: F401 (re-exported)

COL_REDUCTIONS = ("colsum", "colmean", "colmax", "colmin")


def accumulated_columns(ops: tuple, params: dict, stores: tuple, read: bool = False) -> frozenset:
    """Column reductions of a float [M, N] value (M the stored row extent): accumulated chunk
    by chunk (rows added in order, as ref), so their operand need not be resident. One that
    other ops read is known only after the last chunk: the chunks then run in passes
    (`row_passes`), which reload the inputs, so such reductions are accumulated only when
    `read` (the kernel does not fit otherwise)."""
    m = max((params[p].rows for p, _ in stores), default=1)
    readers = {a for op in ops for a in op.args}
    return frozenset(i for i, op in enumerate(ops)
                     if op.op in COL_REDUCTIONS and m > 1 and (read or i not in readers)
                     and ops[op.args[0]].shape[0] == m and op.dtype in VFLOAT
                     and ops[op.args[0]].dtype in VFLOAT)


def _needed(ops: tuple, reductions, roots, writes) -> tuple[frozenset, frozenset]:
    """The ops one pass computes for `roots`, and the reductions it reads back: a reduction in
    `reductions` but not in `writes` was accumulated by an earlier pass (its value is read, not
    recomputed), one in `writes` is accumulated by this pass."""
    seen, reads, todo = set(), set(), list(roots)
    while todo:
        u = todo.pop()
        if u in seen:
            continue
        seen.add(u)
        if u in reductions and u not in writes:
            reads.add(u)
            continue
        todo.extend(ops[u].args)
    return frozenset(seen), frozenset(reads)


def row_passes(ops: tuple, stores: tuple, col_acc: frozenset) -> tuple:
    """The passes over the chunks of rows (`ColumnPass`es: ops, the column reductions each
    accumulates, those it reads back) when ops read a column reduction of `col_acc`: one of
    level L (L - 1 such reductions on its longest path) is accumulated in pass L, the last pass
    computes the stores (and accumulates the reductions only stores read). () when no op reads
    one: a single pass, the reductions accumulated beside the stores."""
    readers = {a for op in ops for a in op.args}
    read = frozenset(i for i in col_acc if i in readers)
    if not read:
        return ()
    level: dict[int, int] = {}
    for i, op in enumerate(ops):
        lv = max((level[a] for a in op.args), default=0)
        level[i] = lv + 1 if i in read else lv

    last = max(level[v] for _, v in stores)
    passes = []
    for p in range(last):
        writes = frozenset(r for r in read if level[r] == p + 1)
        got, reads = _needed(ops, read, writes, writes)
        passes.append(ColumnPass(got, writes, reads))
    stored_only = frozenset(col_acc - read)
    got, reads = _needed(ops, read, [v for _, v in stores], stored_only)
    passes.append(ColumnPass(got, stored_only & got, reads))
    return tuple(passes)


def chunking(ops: tuple, params: dict, stores: tuple, read: bool = False):
    """(M, chunked, streams, skip, in_place): the row extent the chunks split, the ops computed
    per chunk, the matmuls whose right operand streams from GM (`streamed_operands`), the ops
    that are therefore never materialised (those and the transposes matmuls read in place), and
    those transposes (`in_place_transposes`). Every other tile value is resident (all its rows
    in UB, computed once before the chunk loop), except the column reductions accumulated
    across the chunks (`accumulated_columns`)."""
    streams = streamed_operands(ops, frozenset(p for p, _ in stores))
    col_acc = accumulated_columns(ops, params, stores, read)
    in_place = in_place_transposes(ops, frozenset(v for _, v in stores))
    skip = {x for pair in streams.values() for x in pair if x is not None} | set(in_place)
    forced: set[int] = set()

    def force(i: int) -> None:
        todo = [i]
        while todo:
            u = todo.pop()
            if u in forced or ops[u].shape is None:
                continue
            forced.add(u)
            todo.extend(ops[u].args)

    for i, op in enumerate(ops):
        if op.op == "matmul":
            if i not in streams:
                force(op.args[1])
            if op.args[0] in in_place and op.args[1] in in_place:
                force(i)  # aᵀ @ bᵀ writes its result a column at a time
        elif op.op == "gather_rows":
            # row i reads row i of the indices and any row of x: only x needs all its rows
            force(op.args[0])
        elif i in col_acc:
            continue
        elif not OPS[op.op].row_local:  # a transpose, a column reduction
            force(op.args[0])
            force(i)
    rows = [params[p].rows for p, _ in stores]
    m = max(rows, default=1)
    if m <= 1:
        return m, set(), streams, skip, in_place
    chunked: set[int] = set()
    for i, op in enumerate(ops):
        if op.shape is None or i in forced or i in skip or op.shape[0] != m:
            continue
        if op.op == "param":
            # a parameter is loaded per chunk only when every reader reads it row by row
            if all(u not in forced for u, o in enumerate(ops) if i in o.args):
                chunked.add(i)
            continue
        chunked.add(i)
    return m, chunked, streams, skip, in_place


ROW_REDUCTIONS = ("rowsum", "rowmean", "rowmax", "rowmin")


@dataclasses.dataclass(frozen=True)
class ColumnPass:
    """One pass over the blocks of columns: the ops it computes (`ops`), the row reductions
    it accumulates across the blocks (`writes`), and those of earlier passes it reads back
    from their accumulators (`reads`)."""

    ops: frozenset
    writes: frozenset
    reads: frozenset


def column_passes(k) -> Optional[tuple[int, tuple[ColumnPass, ...]]]:
    """(N, passes) when kernel k can also run in blocks of columns (a row wider than the UB):
    every stored tile is [*, N] (N > 1) or [*, 1] (written by the first block of the last pass;
    not also read), and every tile value is [*, N] and elementwise (a
    parameter, an elementwise op, a broadcast), or [*, 1] (a parameter, elementwise) reading
    no [*, N] value, or a row reduction of a float [*, N] value. A transpose, a slice, a
    matmul, a column index or a column reduction needs the whole row: None.

    A row reduction's result is known only after every block: a reduction of level L (L - 1
    reductions on its longest path from the inputs) is accumulated in pass L - 1 and read
    back in the passes after it; the last pass computes the stores. An elementwise kernel is
    one pass; softmax (max, then the sum of exp(x - max)) is three, each loading its inputs
    again."""
    if not k.stores:
        return None
    params = {p.name: p for p in k.params}
    widths = {params[p].cols for p, _ in k.stores}
    n = max(widths)
    if n <= 1 or not widths <= {1, n}:
        return None
    ops = k.ops
    read = {str(op.attr) for op in ops if op.op == "param"}
    if any(params[p].cols == 1 and p in read for p, _ in k.stores):
        return None  # a narrow InOut written in block 0 would be read back by the others
    wide: set[int] = set()
    reds: set[int] = set()
    level: dict[int, int] = {}
    for i, op in enumerate(ops):
        if op.shape is None:
            level[i] = 0
            continue
        lv = max((level[a] for a in op.args), default=0)
        if op.shape[1] == n:
            if op.op != "param" and OPS[op.op].plan != "ew" and op.op != "broadcast":
                return None
            wide.add(i)
        elif op.shape[1] == 1:
            if op.op in ROW_REDUCTIONS and op.args[0] in wide:
                if op.dtype not in VFLOAT or ops[op.args[0]].dtype not in VFLOAT:
                    return None
                reds.add(i)
                lv += 1
            elif op.op != "param" and OPS[op.op].plan != "ew":
                return None
            elif any(a in wide for a in op.args):
                return None
        else:
            return None
        level[i] = lv

    last = max(level[v] for _, v in k.stores)
    passes = []
    for p in range(last):
        writes = frozenset(r for r in reds if level[r] == p + 1)
        got, reads = _needed(ops, reds, writes, writes)
        passes.append(ColumnPass(got, writes, reads))
    got, reads = _needed(ops, reds, [v for _, v in k.stores], frozenset())
    passes.append(ColumnPass(got, frozenset(), reads))
    return n, tuple(passes)


def narrow(k, n: int, c: int):
    """Kernel k with every [*, n] parameter and value made [*, c]: one block of columns."""
    params = tuple(dataclasses.replace(p, cols=c) if p.kind == "tile" and p.cols == n else p
                   for p in k.params)
    ops = tuple(dataclasses.replace(op, shape=(op.shape[0], c))
                if op.shape is not None and op.shape[1] == n else op for op in k.ops)
    return dataclasses.replace(k, params=params, ops=ops)
