"""Kernel evaluation in the ref interpreter: `eval_op` computes one op's value from its
arguments' values by the op's NumPy meaning in the primitive table (`ptowsp.primitives`), and
`eval_kernel` runs a tile-bodied kernel's ops in order and returns the values it stores. The
values are this interpreter's (`values.py`); the semantics are those of `interp.py`."""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from ...diagnostics import InternalError
from ...dtypes import numpy_compute_dtype
from ...ir import nodes as N
from ...primitives import OPS
from .values import convert, scalar_value, value_dtype


class _Evaluation:
    """What an op's NumPy meaning asks of the interpreter (`primitives.meanings.Evaluation`):
    the op, the kernel's inputs by parameter name, and this interpreter's values."""

    __slots__ = ("op", "inputs")

    def __init__(self, op: N.Op, inputs: Mapping[str, np.ndarray]):
        self.op, self.inputs = op, inputs

    def input(self, name: str) -> np.ndarray:
        return self.inputs[name]

    def scalar(self, value: Any, dtype: str) -> np.ndarray:
        return scalar_value(value, dtype)

    def convert(self, x: np.ndarray, dtype: str) -> np.ndarray:
        return convert(x, value_dtype(x), dtype)


def eval_op(op: N.Op, args: list[np.ndarray], inputs: Mapping[str, np.ndarray]) -> np.ndarray:
    """One op's value from its arguments' values (`inputs`: parameter values by name)."""
    spec = OPS.get(op.op)
    if spec is None:
        raise InternalError("ref", f"no rule for op `{op.op}`")
    return spec.numpy(_Evaluation(op, inputs), *args)


def eval_kernel(k: N.Kernel, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Evaluate a tile-bodied kernel: `inputs` maps In/InOut tiles and scalars to compute
    values; returns each stored parameter's value (param dtype, tile shape)."""
    params = {p.name: p for p in k.params}
    vals: list[np.ndarray] = []
    with np.errstate(all="ignore"):
        for op in k.ops:
            v = eval_op(op, [vals[a] for a in op.args], inputs)
            v = np.asarray(v, dtype=numpy_compute_dtype(op.dtype))
            if op.shape is not None and v.shape != op.shape:
                v = np.broadcast_to(v, op.shape)
            vals.append(v)
        out = {}
        for name, idx in k.stores:
            p = params[name]
            v = vals[idx]
            if k.ops[idx].dtype != p.dtype:
                v = convert(v, value_dtype(v), p.dtype)
            out[name] = np.array(np.broadcast_to(v, (p.rows, p.cols)),
                                 dtype=numpy_compute_dtype(p.dtype))
    return out


