"""Kernels built by hand, op by op, as lowering would make them (explicit converts, broadcasts
at stores): the IR the kernel back ends' tests feed to cpu_sim's C emitter and to the Ascend C
emitter."""

from __future__ import annotations

from ptowsp.ir import nodes as N


def bshape(shapes):
    """The broadcast shape of 2-D shapes (None: a scalar, broadcast to anything)."""
    out = None
    for s in shapes:
        if s is None:
            continue
        out = s if out is None else tuple(a if b == 1 else b for a, b in zip(out, s))
    return out


class KB:
    """A kernel under construction: params, ops (indices), stores."""

    def __init__(self, name: str):
        self.name, self.params, self.ops, self.stores = name, [], [], []

    def add(self, op, args=(), shape=None, dtype="f32", attr=None) -> int:
        self.ops.append(N.Op(op, tuple(args), shape, dtype, attr))
        return len(self.ops) - 1

    def tile(self, name, rows, cols, dtype="f32", mode="In"):
        self.params.append(N.KParam(name, "tile", dtype, mode, rows, cols))
        return self.add("param", (), (rows, cols), dtype, name) if mode != "Out" else None

    def scalar(self, name, dtype="f32"):
        self.params.append(N.KParam(name, "scalar", dtype))
        return self.add("scalar_param", (), None, dtype, name)

    def lit(self, value, dtype="f32"):
        return self.add("literal", (), None, dtype, value)

    def op(self, name, *args, dtype=None, shape="auto", attr=None):
        """Op `name` of `args`; its shape broadcast from theirs (a row / column reduction's
        [rows, 1] / [1, cols]), its dtype its first operand's (bool for comparisons)."""
        if shape == "auto":
            shape = bshape([self.ops[a].shape for a in args])
            if name.startswith("row"):
                shape = (shape[0], 1)
            elif name.startswith("col"):
                shape = (1, shape[1])
        if dtype is None:
            dtype = self.ops[args[-1] if name == "where" else args[0]].dtype
            if name in ("lt", "le", "gt", "ge", "eq", "ne"):
                dtype = "bool"
        return self.add(name, args, shape, dtype, attr)

    def store(self, pname, v):
        """store(p, v) to an existing Out/InOut tile, with lowering's convert and broadcast."""
        p = next(q for q in self.params if q.name == pname)
        op = self.ops[v]
        if op.dtype != p.dtype:
            v = self.add("convert", (v,), op.shape, p.dtype)
        if op.shape != (p.rows, p.cols):
            v = self.add("broadcast", (v,), (p.rows, p.cols), p.dtype)
        self.stores.append((pname, v))

    def out(self, name, v, dtype=None, mode="Out", shape=None):
        """A new Out tile (v's shape and dtype unless given) receiving v."""
        op = self.ops[v]
        rows, cols = shape or op.shape
        self.tile(name, rows, cols, dtype or op.dtype, mode)
        self.store(name, v)

    def kernel(self) -> N.Kernel:
        return N.Kernel(self.name, self.name, tuple(self.params), tuple(self.ops),
                        tuple(self.stores))
