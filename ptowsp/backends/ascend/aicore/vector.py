"""Tile ops on the vector unit: float values (f16/bf16 held in f32, as nodes.py says) computed
by Add, Sub, Mul, Div, Max, Min, Adds, Muls, Exp, Ln, Sqrt, Abs, Relu, Tanh, Sin, Cos, Power,
Compare, Select, Cast, ReduceRepeat, Brcb, Duplicate and Copy, one instruction or a few over a
whole UB tile; operands broadcast or converted into temporaries first.

Value semantics are ref's (nodes.py), chosen against the real API's behaviour where the two
differ: Cast rounds with CAST_RINT to f16/bf16 (f16 overflow gives inf), Max/Min/Relu and the
max/min reductions get an explicit NaN fix-up (Compare(x, x, NE) + Select) because the hardware
select does not propagate NaN, rsqrt is 1 / Sqrt (not the approximate Rsqrt), sigmoid / silu /
gelu are composed exactly as ref spells them. The reductions are in `reductions.py`; slices
and concatenations on 32-byte blocks are moved here too (`copy_ok`)."""

from __future__ import annotations

import math

from ....diagnostics import InternalError
from ....dtypes import TABLE, round_float
from ....ir import nodes as N
from ....primitives import OPS
from ... import cexpr as C
from ...vector_plan import copy_ok, vector_ok
from .layout import ADV_TMP, REPEAT, VFLOAT, ceil_to, held_size, pc, vcount
from .reductions import ReductionOps
from .scalar import CMP, float_lit, sconvert


class VectorOps(ReductionOps):
    """The vector unit's ops (and the scalar-unit fallbacks their operands need)."""

    def vector_ok(self, op: N.Op) -> bool:
        """`vector_plan.vector_ok`: the vector unit has instructions for op."""
        return vector_ok(op, self.ops)

    def operand(self, u: int, ishape: tuple, chunk: bool) -> str:
        """Value u as a tile of the op's IR shape `ishape` (broadcasts and scalars
        materialised in temporaries of the op's UB shape)."""
        op = self.ops[u]
        ushape = (self.r if chunk and ishape[0] == self.m else ishape[0], ishape[1])
        if op.shape is None:
            return self.fill(u, ushape, op.dtype if op.dtype in VFLOAT else "f32")
        if op.shape == ishape:
            return self.at(u, chunk)
        return self.materialise(u, ushape, chunk)

    def fill(self, u: int, shape: tuple, dtype: str) -> str:
        """A tile of `shape` holding scalar u (converted to `dtype`)."""
        ct = TABLE[dtype].c_compute
        n = vcount(*shape)
        t = self.temp(ct, n)
        val = C.cast_to(ct, sconvert(self.scalars[u], self.ops[u].dtype, dtype))
        if ct == "float" or ct in ("int32_t", "uint32_t", "int16_t", "uint16_t"):
            self.vec(f"AscendC::Duplicate({t}, {val}, {n});")
        else:
            self.need_s()
            self.out(f"for (uint32_t e = 0; e < {n}; ++e) {t}.SetValue(e, {val});")
            self.s_dirty = True
        return t

    def materialise(self, u: int, shape: tuple, chunk: bool) -> str:
        """Value u (a tile) broadcast to `shape` in a temporary."""
        op = self.ops[u]
        rows, cols = shape
        ct = TABLE[op.dtype].c_compute
        n = vcount(rows, cols)
        t = self.temp(ct, n)
        src = self.at(u, chunk)
        words = pc(cols) * held_size(op.dtype) // 4
        dup = ct in ("float", "int32_t", "uint32_t", "int16_t", "uint16_t")
        if op.shape[1] == 1 and self.urows(u, chunk) == rows and ct == "float" and \
                u in self.replicated:  # each row's value fills its first block: copy blocks
            self.need_v()
            self.out(f"wsp_bcast_blocks({t}.ReinterpretCast<uint32_t>(), "
                     f"{src}.ReinterpretCast<uint32_t>(), {rows}, {pc(cols)});")
            self.v_dirty = True
        elif op.shape[1] == 1 and self.urows(u, chunk) == rows and ct == "float":
            # a loaded column: gathered and spread by the vector unit (`wsp_bcast_col`)
            vals = self.temp("float", ceil_to(rows, REPEAT))
            spread = self.temp("float", ceil_to(rows, 8) * pc(1))
            self.need_v()
            self.out(f"wsp_bcast_col({t}, {src}, {vals}, {spread}, {rows}, {pc(cols)});")
            self.v_dirty = True
        elif op.shape == (1, 1) and dup:
            self.need_s()
            self.out(f"{{ const {ct} b = {src}.GetValue(0); AscendC::Duplicate({t}, b, {n}); }}")
            self.out("AscendC::PipeBarrier<PIPE_V>();")
            self.v_dirty = True
        elif op.shape[1] == 1 and self.urows(u, chunk) == rows and dup:
            self.need_s()
            self.out(f"wsp_bcast_cols<{ct}>({t}, {src}, {rows}, {pc(1)}, {pc(cols)}, {pc(cols)});")
            self.v_dirty = True
        elif op.shape[0] == 1 and op.shape[1] == cols:
            self.need_v()  # rows of any dtype are whole 32-bit words
            self.out(f"wsp_bcast_rows({t}.ReinterpretCast<uint32_t>(), "
                     f"{src}.ReinterpretCast<uint32_t>(), {rows}, {words});")
            self.v_dirty = True
        else:  # anything else (a [rows, 1] of a narrow dtype): the scalar unit
            self.need_s()
            row = C.E(0) if op.shape[0] == 1 else self.row_offset(u, chunk)
            col = C.E(0) if op.shape[1] == 1 else C.E("j")
            read = C.call(f"{self.tensor[u]}.GetValue",
                          C.iadd(C.imul(row, pc(op.shape[1])), col))
            self.out(f"for (int32_t i = 0; i < {rows}; ++i) for (int32_t j = 0; j < {cols}; ++j) "
                     f"{t}.SetValue({C.iadd(C.imul('i', pc(cols)), 'j')}, {read});")
            self.s_dirty = True
        return t

    def copy_ok(self, op: N.Op) -> bool:
        """`vector_plan.copy_ok`: a slice or concatenation moved as boxes of 32-bit words."""
        return copy_ok(op, self.ops)

    def copy_op(self, i: int, dst: str, chunk: bool) -> None:
        """A `copy_ok` op: boxes of words moved by the vector unit, no scalar round trip (a
        row's last word may carry padding elements: they land in the padding of dst's row)."""
        op = self.ops[i]
        rows, cols = self.rows_of(i), op.shape[1]
        es = held_size(op.dtype)
        words = lambda t: f"{t}.ReinterpretCast<uint32_t>()"  # noqa: E731
        nw = lambda n: -(-n * es // 4)  # noqa: E731  (words holding n elements)
        self.need_v()
        if op.op == "slice_cols":
            (a,) = op.args
            src = f"{self.at(a, chunk)}[{int(op.attr)}]"
            self.out(f"wsp_copy_box({words(dst)}, {words(src)}, {rows}, {nw(cols)}, "
                     f"{nw(pc(cols))}, {nw(pc(self.ops[a].shape[1]))});")
        elif op.op == "concat_cols":
            at = 0
            for a in op.args:
                ac = self.ops[a].shape[1]
                d = f"{dst}[{at}]" if at else dst
                self.out(f"wsp_copy_box({words(d)}, {words(self.at(a, chunk))}, {rows}, "
                         f"{nw(ac)}, {nw(pc(cols))}, {nw(pc(ac))});")
                at += ac
        else:  # whole rows: contiguous words
            p = pc(cols)
            if op.op == "slice_rows":
                (a,) = op.args
                src = self.at(a, chunk)
                self.out(f"wsp_copy_words({words(dst)}, {words(f'{src}[{int(op.attr) * p}]')}, "
                         f"{nw(rows * p)});")
            else:
                a, b = op.args
                na = self.ops[a].shape[0]
                self.out(f"wsp_copy_words({words(dst)}, {words(self.at(a, chunk))}, {nw(na * p)});")
                self.out(f"wsp_copy_words({words(f'{dst}[{na * p}]')}, "
                         f"{words(self.at(b, chunk))}, {nw((rows - na) * p)});")
        self.v_dirty = True

    def note_replicated(self, i: int) -> None:
        """Record float [rows, 1] value i as `replicated` (each row's value in the whole of its
        first 32-byte block) when it is elementwise in values that are: a row reduction's
        result (`row_reduction`), scalars and [1, 1] tiles (filled by Duplicate)."""
        op = self.ops[i]
        if (op.shape is None or op.shape[1] != 1 or TABLE[op.dtype].c_compute != "float"
                or OPS[op.op].plan != "ew" or op.op == "broadcast"):
            return
        for a in op.args:
            sh, dt = self.ops[a].shape, self.ops[a].dtype
            if TABLE[dt].c_compute != "float":
                return
            if not (sh is None or a in self.replicated or (sh == (1, 1) and op.shape != (1, 1))):
                return
        self.replicated.add(i)

    def convert_tile(self, src: str, sdt: str, ddt: str, n: int) -> str:
        """A converted copy of tile `src` (dtype sdt) as dtype ddt, n elements."""
        if ddt in VFLOAT and (sdt in VFLOAT or sdt == "bool" or (sdt == "i32" and ddt != "bf16")):
            t = self.temp("float", n)
            self.vector_convert(t, src, sdt, ddt, n)
            return t
        t = self.temp(TABLE[ddt].c_compute, n)
        self.need_s()
        self.out(f"for (uint32_t e = 0; e < {n}; ++e) {t}.SetValue(e, "
                 f"{sconvert(C.call(f'{src}.GetValue', 'e'), sdt, ddt)});")
        self.s_dirty = True
        return t

    def vector_convert(self, dst: str, src: str, sdt: str, ddt: str, n: int) -> None:
        if sdt == "bool":
            h = self.temp("half", n)
            self.vec(f"AscendC::Cast({h}, {src}, AscendC::RoundMode::CAST_NONE, {n});")
            self.vec(f"AscendC::Cast({dst}, {h}, AscendC::RoundMode::CAST_NONE, {n});")
            return
        if sdt == "i32":
            self.vec(f"AscendC::Cast({dst}, {src}, AscendC::RoundMode::CAST_RINT, {n});")
            src = dst
        elif sdt in VFLOAT and ddt not in ("f16", "bf16"):
            self.need_v()
            self.out(f"wsp_copy_words({dst}.ReinterpretCast<uint32_t>(), "
                     f"{src}.ReinterpretCast<uint32_t>(), {n});")
            self.v_dirty = True
            return
        if ddt == "f16":
            h = self.temp("half", n)
            self.vec(f"AscendC::Cast({h}, {src}, AscendC::RoundMode::CAST_RINT, {n});")
            self.vec(f"AscendC::Cast({dst}, {h}, AscendC::RoundMode::CAST_NONE, {n});")
        elif ddt == "bf16":
            h = self.temp("bfloat16_t", n)
            self.vec(f"AscendC::Cast({h}, {src}, AscendC::RoundMode::CAST_RINT, {n});")
            self.vec(f"AscendC::Cast({dst}, {h}, AscendC::RoundMode::CAST_NONE, {n});")

    def bool_from_mask(self, dst: str, mask: str, n: int) -> None:
        """dst (uint8_t 0/1) from a Compare bit mask."""
        one = self.temp("float", n)
        h = self.temp("half", n)
        self.vec(f"AscendC::Duplicate({one}, 1.0f, {n});")
        self.vec(f"AscendC::Select({one}, {mask}, {one}, 0.0f, "
                 f"AscendC::SELMODE::VSEL_TENSOR_SCALAR_MODE, {n});")
        self.vec(f"AscendC::Cast({h}, {one}, AscendC::RoundMode::CAST_RINT, {n});")
        self.vec(f"AscendC::Cast({dst}, {h}, AscendC::RoundMode::CAST_NONE, {n});")

    def mask_of_bool(self, src: str, n: int) -> str:
        """A Compare bit mask of a bool (uint8_t) tile: nonzero -> 1."""
        h = self.temp("half", n)
        f = self.temp("float", n)
        z = self.temp("float", n)
        mask = self.temp("uint8_t", n // 8)
        self.vec(f"AscendC::Cast({h}, {src}, AscendC::RoundMode::CAST_NONE, {n});")
        self.vec(f"AscendC::Cast({f}, {h}, AscendC::RoundMode::CAST_NONE, {n});")
        self.vec(f"AscendC::Duplicate({z}, 0.0f, {n});")
        self.vec(f"AscendC::Compare({mask}, {f}, {z}, AscendC::CMPMODE::NE, {n});")
        return mask

    def nan_fix(self, dst: str, a: str, b: str, n: int) -> None:
        mask = self.temp("uint8_t", n // 8)
        self.need_v()
        self.out(f"wsp_nan_fix({dst}, {a}, {b}, {mask}, {n});")
        self.v_dirty = True

    def adv_tmp(self) -> str:
        return self.temp("uint8_t", ADV_TMP)

    def vector_op(self, i: int, dst: str, chunk: bool) -> None:
        op = self.ops[i]
        name, shape = op.op, op.shape
        n = self.count(i)
        args = op.args
        A = lambda u: self.operand(u, shape, chunk)  # noqa: E731
        if name in ("add", "sub", "mul", "div"):
            a, b = args
            sa, sb = self.ops[a].shape is None, self.ops[b].shape is None
            api = {"add": "Add", "sub": "Sub", "mul": "Mul", "div": "Div"}[name]
            if name in ("add", "mul") and (sa or sb):
                t, s = (b, a) if sa else (a, b)
                self.vec(f"AscendC::{api}s({dst}, {A(t)}, {C.cast('float', self.scalars[s])}, {n});")
            elif name == "sub" and sb:
                minus = C.neg(C.cast("float", self.scalars[b]))
                self.vec(f"AscendC::Adds({dst}, {A(a)}, {minus}, {n});")
            elif name == "sub" and sa:
                self.vec(f"AscendC::Muls({dst}, {A(b)}, -1.0f, {n});")
                self.vec(f"AscendC::Adds({dst}, {dst}, {C.cast('float', self.scalars[a])}, {n});")
            else:
                ta, tb = A(a), A(b)
                self.vec(f"AscendC::{api}({dst}, {ta}, {tb}, {n});")
            return
        if name in ("maximum", "minimum"):
            ta, tb = A(args[0]), A(args[1])
            self.vec(f"AscendC::{'Max' if name == 'maximum' else 'Min'}({dst}, {ta}, {tb}, {n});")
            self.nan_fix(dst, ta, tb, n)
            return
        if name in CMP:
            ta, tb = A(args[0]), A(args[1])
            mask = self.temp("uint8_t", n // 8)
            mode = {"lt": "LT", "le": "LE", "gt": "GT", "ge": "GE", "eq": "EQ", "ne": "NE"}[name]
            self.vec(f"AscendC::Compare({mask}, {ta}, {tb}, AscendC::CMPMODE::{mode}, {n});")
            self.bool_from_mask(dst, mask, n)
            return
        if name == "where":
            c, a, b = args
            cop = self.ops[c]
            if cop.shape is None:
                ct = self.temp("uint8_t", n)
                self.need_s()
                self.out(f"for (uint32_t e = 0; e < {n}; ++e) {ct}.SetValue(e, "
                         f"{sconvert(self.scalars[c], cop.dtype, 'bool')});")
                self.s_dirty = True
            else:
                ct = self.at_or_bcast(c, shape, chunk)
            mask = self.mask_of_bool(ct, n)
            ta, tb = A(a), A(b)
            self.vec(f"AscendC::Select({dst}, {mask}, {ta}, {tb}, "
                     f"AscendC::SELMODE::VSEL_TENSOR_TENSOR_MODE, {n});")
            return
        if name in ("convert", "cast"):
            (a,) = args
            self.vector_convert(dst, A(a) if self.ops[a].dtype in VFLOAT else
                                self.at_or_bcast(a, shape, chunk), self.ops[a].dtype, op.dtype, n)
            return
        if name == "broadcast":
            (a,) = args
            src = self.operand(a, shape, chunk)
            self.need_v()
            self.out(f"wsp_copy_words({dst}.ReinterpretCast<uint32_t>(), "
                     f"{src}.ReinterpretCast<uint32_t>(), {n});")
            self.v_dirty = True
            return
        if name == "pow":
            a = args[0]
            e = self.exponent(op)
            ta = A(a)
            if e == 2.0:
                self.vec(f"AscendC::Mul({dst}, {ta}, {ta}, {n});")
            elif e == 1.0:
                self.need_v()
                self.out(f"wsp_copy_words({dst}.ReinterpretCast<uint32_t>(), "
                         f"{ta}.ReinterpretCast<uint32_t>(), {n});")
                self.v_dirty = True
            elif e == 0.0:
                self.vec(f"AscendC::Duplicate({dst}, 1.0f, {n});")
            elif e == -1.0:
                one = self.temp("float", n)
                self.vec(f"AscendC::Duplicate({one}, 1.0f, {n});")
                self.vec(f"AscendC::Div({dst}, {one}, {ta}, {n});")
            else:
                tmp = self.adv_tmp()
                s = C.cast("float", self.scalars[args[1]])
                self.vec(f"AscendC::Power({dst}, {ta}, {s}, {tmp}, {n});")
            return
        if OPS[name].plan == "red":
            self.reduction(i, dst, chunk)
            return
        # unary float math
        (a,) = args
        ta = A(a)
        if name == "neg":
            self.vec(f"AscendC::Muls({dst}, {ta}, -1.0f, {n});")
        elif name in ("abs", "exp", "log", "sqrt"):
            api = {"abs": "Abs", "exp": "Exp", "log": "Ln", "sqrt": "Sqrt"}[name]
            self.vec(f"AscendC::{api}({dst}, {ta}, {n});")
        elif name == "rsqrt":  # 1 / sqrt(x), as ref: the Rsqrt instruction is approximate
            one = self.temp("float", n)
            self.vec(f"AscendC::Sqrt({dst}, {ta}, {n});")
            self.vec(f"AscendC::Duplicate({one}, 1.0f, {n});")
            self.vec(f"AscendC::Div({dst}, {one}, {dst}, {n});")
        elif name == "relu":
            self.vec(f"AscendC::Relu({dst}, {ta}, {n});")
            self.nan_fix(dst, ta, ta, n)
        elif name in ("tanh", "sin", "cos"):
            tmp = self.adv_tmp()
            api = {"tanh": "Tanh", "sin": "Sin", "cos": "Cos"}[name]
            self.vec(f"AscendC::{api}({dst}, {ta}, {tmp}, {n});")
        elif name in ("sigmoid", "silu"):
            s = dst if name == "sigmoid" else self.temp("float", n)
            self.sigmoid(s, ta, n)
            if name == "silu":
                self.vec(f"AscendC::Mul({dst}, {ta}, {s}, {n});")
                self.neg_inf_zero(dst, ta, n)
        elif name == "gelu":
            self.gelu(dst, ta, n)
        else:
            raise InternalError("ascend", f"vector_ok accepts `{name}`, which has no vector code")

    def at_or_bcast(self, u: int, ishape: tuple, chunk: bool) -> str:
        """Value u (any dtype) as a tile of the op's IR shape, in its own dtype."""
        op = self.ops[u]
        ushape = (self.r if chunk and ishape[0] == self.m else ishape[0], ishape[1])
        if op.shape is None:
            return self.fill(u, ushape, op.dtype)
        if op.shape == ishape:
            return self.at(u, chunk)
        return self.materialise(u, ushape, chunk)

    def sigmoid(self, dst: str, x: str, n: int) -> None:
        """ref: e = exp(-|x|); where(x >= 0, 1, e) / (1 + e)."""
        e = self.temp("float", n)
        one = self.temp("float", n)
        mask = self.temp("uint8_t", n // 8)
        self.vec(f"AscendC::Abs({e}, {x}, {n});")
        self.vec(f"AscendC::Muls({e}, {e}, -1.0f, {n});")
        self.vec(f"AscendC::Exp({e}, {e}, {n});")
        self.vec(f"AscendC::Duplicate({one}, 0.0f, {n});")
        self.vec(f"AscendC::Compare({mask}, {x}, {one}, AscendC::CMPMODE::GE, {n});")
        self.vec(f"AscendC::Duplicate({one}, 1.0f, {n});")
        self.vec(f"AscendC::Select({one}, {mask}, {one}, {e}, "
                 f"AscendC::SELMODE::VSEL_TENSOR_TENSOR_MODE, {n});")
        self.vec(f"AscendC::Adds({e}, {e}, 1.0f, {n});")
        self.vec(f"AscendC::Div({dst}, {one}, {e}, {n});")

    def neg_inf_zero(self, dst: str, x: str, n: int) -> None:
        """dst = -0 where x is -inf (silu and gelu tend to -0 there; x * 0 would be NaN)."""
        t = self.temp("float", n)
        mask = self.temp("uint8_t", n // 8)
        self.vec(f"AscendC::Duplicate({t}, {float_lit(float('-inf'), 'float')}, {n});")
        self.vec(f"AscendC::Compare({mask}, {x}, {t}, AscendC::CMPMODE::EQ, {n});")
        self.vec(f"AscendC::Duplicate({t}, -0.0f, {n});")
        self.vec(f"AscendC::Select({dst}, {mask}, {t}, {dst}, "
                 f"AscendC::SELMODE::VSEL_TENSOR_TENSOR_MODE, {n});")

    def gelu(self, dst: str, x: str, n: int) -> None:
        """ref, operation by operation: u = c * (x + 0.044715 * x * x * x), then
        x * sigmoid(u + u) (the tanh approximation without the cancellation of 1 + tanh(u))."""
        c = float_lit(round_float(math.sqrt(2.0 / math.pi), "f32"), "float")
        k = float_lit(round_float(0.044715, "f32"), "float")
        b = self.temp("float", n)
        self.vec(f"AscendC::Muls({b}, {x}, {k}, {n});")
        self.vec(f"AscendC::Mul({b}, {b}, {x}, {n});")
        self.vec(f"AscendC::Mul({b}, {b}, {x}, {n});")
        self.vec(f"AscendC::Add({b}, {x}, {b}, {n});")
        self.vec(f"AscendC::Muls({b}, {b}, {c}, {n});")
        self.vec(f"AscendC::Add({b}, {b}, {b}, {n});")
        self.sigmoid(b, b, n)  # in place: sigmoid reads its operand before it writes dst
        self.vec(f"AscendC::Mul({dst}, {x}, {b}, {n});")
        self.neg_inf_zero(dst, x, n)

    def as_float(self, u: int, chunk: bool) -> str:
        """Value u as an f32 tile (a matmul operand)."""
        op = self.ops[u]
        src = self.at(u, chunk)
        if op.dtype in VFLOAT:
            return src
        return self.convert_tile(src, op.dtype, "f32", vcount(self.urows(u, chunk), op.shape[1]))
