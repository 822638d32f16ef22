"""Ops defined as a chain of other ops (`softmax`): the `plan-kernels` pass spells them out
before planning, so their parts fuse with what surrounds them and no back end has code of its
own for them. An expansion gets the op, its (rewritten) argument indices, `emit(name, args,
shape, dtype, attr=None) -> index` and its operands' ops (their shapes and dtypes), and returns
the index of the op's value. (`argmax` and `argmin` expand in `selection.py`.)
"""

from __future__ import annotations

from typing import Any, Callable

Emit = Callable[..., int]


def softmax(op: Any, args: tuple[int, ...], emit: Emit, operands: tuple = ()) -> int:
    # decision: softmax(x) = e * (1 / rowsum(e)), e = exp(x - rowmax(x)): one division
    # per row and a multiply per element (within an ulp of e / sum)
    (x,) = args
    rows, dt = (op.shape[0], 1), op.dtype
    mx = emit("rowmax", (x,), rows, dt)
    d = emit("sub", (x, mx), op.shape, dt)
    e = emit("exp", (d,), op.shape, dt)
    s = emit("rowsum", (e,), rows, dt)
    one = emit("literal", (), None, dt, 1.0)
    r = emit("div", (one, s), rows, dt)
    return emit("mul", (e, r), op.shape, dt)
