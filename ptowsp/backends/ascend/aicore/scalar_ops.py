"""Tile ops on the scalar unit, element by element over GetValue / SetValue: integer and bool
arithmetic, f64, float -> integer casts, transpose, slices, interleave, iota and their
reductions. Slow, exact, and the documented fallback for whatever the vector unit has no
instruction for (`VectorOps.vector_ok`)."""

from __future__ import annotations

from ....dtypes import TABLE, kind_of
from ....ir import nodes as N
from ....ir.passes import plan_kernels as PK
from .errors import AicoreError
from .frame import Frame
from .layout import pc
from .scalar import float_lit, int_lit, sconvert, sexpr


class ScalarOps(Frame):
    """Tile ops computed element by element on the scalar unit."""

    def sread(self, u: int, i: str, j: str, chunk: bool) -> str:
        """Element (i, j) of the op's index space, read from value u (broadcast)."""
        op = self.ops[u]
        if op.shape is None:
            return self.scalars[u]
        ri = "0" if op.shape[0] == 1 else (self.row_offset(u, chunk) if i == "i" else i)
        cj = "0" if op.shape[1] == 1 else j
        return f"{self.tensor[u]}.GetValue(({ri}) * {pc(op.shape[1])} + ({cj}))"

    def scalar_op(self, i: int, dst: str, chunk: bool) -> None:
        op = self.ops[i]
        name = op.op
        rows, cols = self.rows_of(i), op.shape[1]
        p = pc(cols)
        self.need_s()
        out = self.out
        if name in N.REDUCTIONS:
            self.scalar_reduction(i, dst, chunk)
            self.s_dirty = True
            return
        if name == "iota_row":
            e = "(int64_t)(c0 + i)" if chunk and self.nchunks > 1 else "(int64_t)i"
            e = sconvert(e, "i64", op.dtype)
        elif name == "iota_col":
            e = sconvert("(int64_t)j", "i64", op.dtype)
        elif name == "transpose":
            (a,) = op.args
            e = f"{self.tensor[a]}.GetValue(j * {pc(self.ops[a].shape[1])} + i)"
        elif name in ("slice_even", "slice_odd"):
            (a,) = op.args
            k = "2 * j" if name == "slice_even" else "2 * j + 1"
            e = self.sread(a, "i", k, chunk)
        elif name == "interleave":
            a, b = op.args
            va = sconvert(self.sread(a, "i", "(j >> 1)", chunk), self.ops[a].dtype, op.dtype)
            vb = sconvert(self.sread(b, "i", "(j >> 1)", chunk), self.ops[b].dtype, op.dtype)
            e = f"(((j & 1) == 0) ? ({va}) : ({vb}))"
        elif name == "broadcast":
            (a,) = op.args
            e = sconvert(self.sread(a, "i", "j", chunk), self.ops[a].dtype, op.dtype)
        elif name == "matmul":
            raise AicoreError("matmul operands must be numeric tiles")
        elif name in PK.ELEMENTWISE:
            xs = [self.sread(a, "i", "j", chunk) for a in op.args]
            e = sexpr(name, op.dtype, xs, [self.ops[a].dtype for a in op.args],
                      self.exponent(op))
        else:
            raise AicoreError(f"op `{name}` has no AICore implementation")
        out(f"for (int32_t i = 0; i < {rows}; ++i) {{")
        out(f"    for (int32_t j = 0; j < {cols}; ++j) {{")
        out(f"        {dst}.SetValue(i * {p} + j, ({TABLE[op.dtype].c_compute})({e}));")
        out("    }")
        out("}")
        self.s_dirty = True

    def scalar_reduction(self, i: int, dst: str, chunk: bool) -> None:
        op = self.ops[i]
        (a,) = op.args
        dt = op.dtype
        ct = TABLE[dt].c_compute
        fl = kind_of(dt) == "float"
        what = op.op[3:]
        sa = self.ops[a].shape
        rows = self.urows(a, chunk)
        cols = sa[1]
        if what in ("sum", "mean"):
            init = f"({ct})0"
        elif fl:
            init = float_lit(float("-inf") if what == "max" else float("inf"), ct)
        else:
            lo = -(1 << (TABLE[dt].bits - 1)) if dt.startswith("i") else 0
            hi = (1 << (TABLE[dt].bits - 1)) - 1 if dt.startswith("i") else (1 << TABLE[dt].bits) - 1
            init = int_lit(lo if what == "max" else hi, dt)

        def step(acc: str, x: str) -> str:
            if what in ("sum", "mean"):
                return sexpr("add", dt, [acc, x], [dt, dt])
            return sexpr("maximum" if what == "max" else "minimum", dt, [acc, x], [dt, dt])

        x = sconvert(self.sread(a, "i" if op.op.startswith("row") else "r", "j"
                                if op.op.startswith("row") else "j", chunk), self.ops[a].dtype, dt)
        out = self.out
        if op.op.startswith("row"):
            out(f"for (int32_t i = 0; i < {rows}; ++i) {{")
            out(f"    {ct} acc = {init};")
            out(f"    for (int32_t j = 0; j < {cols}; ++j) acc = {step('acc', x)};")
            if what == "mean":
                out(f"    acc = ({ct})((double)acc / {cols}.0);" if not fl else
                    f"    acc = acc / ({ct}){cols};")
            out(f"    {dst}.SetValue(i * {pc(1)}, acc);")
            out("}")
        else:
            out(f"for (int32_t j = 0; j < {cols}; ++j) {{")
            out(f"    {ct} acc = {init};")
            out(f"    for (int32_t r = 0; r < {rows}; ++r) acc = {step('acc', x)};")
            if what == "mean":
                out(f"    acc = ({ct})((double)acc / {rows}.0);" if not fl else
                    f"    acc = acc / ({ct}){rows};")
            out(f"    {dst}.SetValue(j, acc);")
            out("}")
