"""Reductions on the vector unit (a mixin of `VectorOps`): row reductions that never leave
it (`row_reduction`: ReduceRepeat a repeat per row, the 64-column blocks combined in column
order, Brcb to spread the per-row values over each row's first block), column reductions (rows
added in order, as ref; accumulated chunk by chunk when only stores read them), and the
reductions of a row wider than the UB, accumulated across its blocks of columns in a pass each
and read back in the later passes (`chunks.column_passes`). Max / min get a NaN check (a sum
of the NaNs) because the hardware's select does not propagate NaN; a sum's order (a tree per
256-byte block, blocks in sequence) differs from NumPy's: sums agree to a tolerance."""

from __future__ import annotations

from .frame import Frame
from .layout import REPEAT, ceil_to, pc, vcount
from .scalar import float_lit


class ReductionOps(Frame):
    """Row and column reductions; `nan_fix` comes from `VectorOps`."""

    def reduction(self, i: int, dst: str, chunk: bool) -> None:
        op = self.ops[i]
        (a,) = op.args
        src_op = self.ops[a]
        x = self.at(a, chunk)
        rows = self.rows_of(i) if op.op.startswith("row") else self.rows_of(a)
        cols = src_op.shape[1]
        pcx = pc(cols)
        nx = vcount(rows, cols)
        n = self.count(i)
        what = op.op[3:]
        if op.op.startswith("row"):
            self.row_reduction(i, dst, x, what, rows, cols)
            return
        # column reductions: the rows added (or max'ed) in order, as NumPy does
        api = {"sum": "Add", "mean": "Add", "max": "Max", "min": "Min"}[what]
        self.need_v()
        self.out(f"wsp_copy_words({dst}.ReinterpretCast<uint32_t>(), "
                 f"{x}.ReinterpretCast<uint32_t>(), {pcx});")
        self.out(f"for (int32_t i = 1; i < {rows}; ++i) {{ AscendC::{api}({dst}, {dst}, "
                 f"{x}[i * {pcx}], {pcx}); AscendC::PipeBarrier<PIPE_V>(); }}")
        self.v_dirty = True
        if what == "mean":
            d = self.temp("float", n)
            self.vec(f"AscendC::Duplicate({d}, {float_lit(float(rows), 'float')}, {n});")
            self.vec(f"AscendC::Div({dst}, {dst}, {d}, {n});")
        if what in ("max", "min"):
            mask = self.temp("uint8_t", nx // 8)
            t = self.temp("float", nx)
            s = self.temp("float", n)
            self.vec(f"AscendC::Compare({mask}, {x}, {x}, AscendC::CMPMODE::NE, {nx});")
            self.vec(f"AscendC::Select({t}, {mask}, {x}, 0.0f, "
                     f"AscendC::SELMODE::VSEL_TENSOR_SCALAR_MODE, {nx});")
            self.out(f"wsp_copy_words({s}.ReinterpretCast<uint32_t>(), "
                     f"{t}.ReinterpretCast<uint32_t>(), {pcx});")
            self.out(f"for (int32_t i = 1; i < {rows}; ++i) {{ AscendC::Add({s}, {s}, "
                     f"{t}[i * {pcx}], {pcx}); AscendC::PipeBarrier<PIPE_V>(); }}")
            self.nan_fix(dst, s, s, n)

    def row_reduction(self, i: int, dst: str, x: str, what: str, rows: int, cols: int) -> None:
        """A row reduction that never leaves the vector unit (`wsp_row_reduce`: ReduceRepeat a
        repeat per row, blocks of 64 columns combined in column order), its per-row values
        then spread by Brcb over the first 32-byte block of each row of dst, so a broadcast
        back along the rows is a block copy (`replicated`, `materialise`)."""
        pcx = pc(cols)
        nr = ceil_to(rows, REPEAT)
        rt = {"sum": "SUM", "mean": "SUM", "max": "MAX", "min": "MIN"}[what]
        vals = self.temp("float", nr)
        part = self.temp("float", nr) if cols > REPEAT else vals
        self.need_v()
        self.out(f"wsp_row_reduce<AscendC::ReduceType::{rt}>({vals}, {part}, {x}, {rows}, "
                 f"{cols}, {pcx});")
        self.v_dirty = True
        if what == "mean":
            d = self.temp("float", nr)
            self.vec(f"AscendC::Duplicate({d}, {float_lit(float(cols), 'float')}, {nr});")
            self.vec(f"AscendC::Div({vals}, {vals}, {d}, {nr});")
        if what in ("max", "min"):  # NaN anywhere in the row gives NaN: a sum of the NaNs
            nx = vcount(rows, cols)
            mask = self.temp("uint8_t", nx // 8)
            t = self.temp("float", nx)
            s = self.temp("float", nr)
            self.vec(f"AscendC::Compare({mask}, {x}, {x}, AscendC::CMPMODE::NE, {nx});")
            self.vec(f"AscendC::Select({t}, {mask}, {x}, 0.0f, "
                     f"AscendC::SELMODE::VSEL_TENSOR_SCALAR_MODE, {nx});")
            self.out(f"wsp_row_reduce<AscendC::ReduceType::SUM>({s}, {part}, {t}, {rows}, "
                     f"{cols}, {pcx});")
            self.nan_fix(vals, s, s, nr)
        # Brcb writes whole groups of 8 rows: straight into dst when it has them
        spread = ceil_to(rows, 8) * pc(1)
        if spread <= self.count(i):
            self.need_v()
            self.out(f"wsp_brcb_rows({dst}, {vals}, {rows});")
        else:
            t = self.temp("float", spread)
            self.need_v()
            self.out(f"wsp_brcb_rows({t}, {vals}, {rows});")
            self.out(f"wsp_copy_words({dst}.ReinterpretCast<uint32_t>(), "
                     f"{t}.ReinterpretCast<uint32_t>(), {self.count(i)});")
        self.v_dirty = True
        self.replicated.add(i)

    # -- column reductions accumulated across the chunks of rows (`chunks.accumulated_columns`)
    def col_buffers(self, i: int) -> tuple[str, str]:
        """Column reduction i's value and NaN-sum buffers, declared in the current scope (the
        same bytes wherever declared: one key each, live from before the loop to its store)."""
        n = self.count(i)
        # live across every chunk: from the loop's start (its identity is set just before) to
        # its store, or to the loop's end when the chunks of a later pass read it
        end = max(self.last.get(i, self.when[i]), self.loop_end)
        # read by a later pass over the rows (its prologue included): live over every step
        start = 0 if self.passes and self.colblock is None else self.loop_start
        off = self.request(("v", i), n * 4, start, end)
        offn = self.request(("colnan", i), n * 4, start, end)
        self.out(f"const AscendC::LocalTensor<float> v{i} = calc.GetWithOffset<float>({n}, {off});")
        self.out(f"const AscendC::LocalTensor<float> vn{i} = "
                 f"calc.GetWithOffset<float>({n}, {offn});")
        self.tensor[i] = f"v{i}"
        return f"v{i}", f"vn{i}"

    def start_columns(self, i: int) -> None:
        """Before the chunk loop: the accumulator at the reduction's identity (-0 for a sum,
        so the first row's value comes out exactly, -0 included)."""
        v, vn = self.col_buffers(i)
        n = self.count(i)
        init = {"colsum": -0.0, "colmean": -0.0, "colmax": float("-inf"),
                "colmin": float("inf")}[self.ops[i].op]
        self.vec(f"AscendC::Duplicate({v}, {float_lit(init, 'float')}, {n});")
        self.vec(f"AscendC::Duplicate({vn}, 0.0f, {n});")

    def accumulate_columns(self, i: int, dst: str) -> None:
        """This chunk's rows combined into column reduction i, one row after the other (the
        order ref adds them in), and for max / min the rows' NaNs summed."""
        del dst
        op = self.ops[i]
        (a,) = op.args
        x = self.at(a, True)
        rows = self.rows_of(a)
        pcx = pc(op.shape[1])
        v, vn = f"v{i}", f"vn{i}"
        api = {"colsum": "Add", "colmean": "Add", "colmax": "Max", "colmin": "Min"}[op.op]
        self.need_v()
        self.out(f"for (int32_t i = 0; i < {rows}; ++i) {{ AscendC::{api}({v}, {v}, "
                 f"{x}[i * {pcx}], {pcx}); AscendC::PipeBarrier<PIPE_V>(); }}")
        self.v_dirty = True
        if op.op in ("colmax", "colmin"):
            nx = vcount(rows, op.shape[1])
            mask = self.temp("uint8_t", nx // 8)
            t = self.temp("float", nx)
            self.vec(f"AscendC::Compare({mask}, {x}, {x}, AscendC::CMPMODE::NE, {nx});")
            self.vec(f"AscendC::Select({t}, {mask}, {x}, 0.0f, "
                     f"AscendC::SELMODE::VSEL_TENSOR_SCALAR_MODE, {nx});")
            self.out(f"for (int32_t i = 0; i < {rows}; ++i) {{ AscendC::Add({vn}, {vn}, "
                     f"{t}[i * {pcx}], {pcx}); AscendC::PipeBarrier<PIPE_V>(); }}")

    def finish_columns(self, i: int) -> None:
        """After the chunk loop: a mean divided by the row count, a max / min made NaN where a
        column held one."""
        op = self.ops[i]
        v, vn = f"v{i}", f"vn{i}"  # declared before the loop (`start_columns`)
        self.tensor[i] = v
        n = self.count(i)
        if op.op == "colmean":
            d = self.temp("float", n)
            self.vec(f"AscendC::Duplicate({d}, {float_lit(float(self.m), 'float')}, {n});")
            self.vec(f"AscendC::Div({v}, {v}, {d}, {n});")
        if op.op in ("colmax", "colmin"):
            self.nan_fix(v, vn, vn, n)

    # -- row reductions over a row in blocks of columns (`chunks.column_passes`)
    def acc_name(self, r: int, kind: str) -> str:
        return f"acc{r}" if kind == "v" else f"accn{r}"

    def declare_accs(self) -> None:
        """The accumulators' TBuf, outside the arena: they live across every pass."""
        slots = self.acc_slots()
        if not slots:
            return
        self.out("AscendC::TBuf<AscendC::TPosition::VECCALC> accs;")
        self.out(f"pipe.InitBuffer(accs, {self.acc_bytes()});")
        for n, (r, kind) in enumerate(slots):
            self.out(f"const AscendC::LocalTensor<float> {self.acc_name(r, kind)} = "
                     f"accs.GetWithOffset<float>({self.m * 8}, {n * self.acc_size()});")

    def start_accs(self, cp) -> None:
        """Before a pass: its accumulators at the reduction's identity."""
        init = {"rowsum": 0.0, "rowmean": 0.0, "rowmax": float("-inf"), "rowmin": float("inf")}
        for r, kind in self.acc_slots():
            if r in cp.writes:
                v = init[self.ops[r].op] if kind == "v" else 0.0
                self.vec(f"AscendC::Duplicate({self.acc_name(r, kind)}, "
                         f"{float_lit(v, 'float')}, {self.m * 8});")

    def accumulate(self, i: int, dst: str, chunk: bool) -> None:
        """Row reduction i over this block's columns (`cbn` of them: the last block's valid
        ones), combined into its accumulator rows (Add / Max / Min; blocks in column order)."""
        del dst  # the value is read back in a later pass
        op = self.ops[i]
        (a,) = op.args
        x = self.at(a, chunk)
        rows = self.rows_of(i)
        pcx = pc(self.ops[a].shape[1])
        nr = ceil_to(rows, REPEAT)
        what = op.op[3:]
        rt = {"sum": "SUM", "mean": "SUM", "max": "MAX", "min": "MIN"}[what]
        vals = self.temp("float", nr)
        part = self.temp("float", nr)
        row0 = "c0" if i in self.chunked else "0"
        self.need_v()
        self.out(f"wsp_row_reduce<AscendC::ReduceType::{rt}>({vals}, {part}, {x}, {rows}, cbn, "
                 f"{pcx});")
        self.v_dirty = True
        spread = self.temp("float", ceil_to(rows, 8) * 8)
        acc = f"{self.acc_name(i, 'v')}[{row0} * 8]"
        api = {"sum": "Add", "mean": "Add", "max": "Max", "min": "Min"}[what]
        self.out(f"wsp_brcb_rows({spread}, {vals}, {rows}, 1);")
        self.vec(f"AscendC::{api}({acc}, {acc}, {spread}, {rows * 8});")
        if what in ("max", "min"):  # and the sum of the block's NaNs
            nx = vcount(rows, self.ops[a].shape[1])
            mask = self.temp("uint8_t", nx // 8)
            t = self.temp("float", nx)
            self.vec(f"AscendC::Compare({mask}, {x}, {x}, AscendC::CMPMODE::NE, {nx});")
            self.vec(f"AscendC::Select({t}, {mask}, {x}, 0.0f, "
                     f"AscendC::SELMODE::VSEL_TENSOR_SCALAR_MODE, {nx});")
            self.out(f"wsp_row_reduce<AscendC::ReduceType::SUM>({vals}, {part}, {t}, {rows}, "
                     f"cbn, {pcx});")
            self.out(f"wsp_brcb_rows({spread}, {vals}, {rows}, 1);")
            accn = f"{self.acc_name(i, 'nan')}[{row0} * 8]"
            self.vec(f"AscendC::Add({accn}, {accn}, {spread}, {rows * 8});")

    def read_back(self, i: int, dst: str, chunk: bool) -> None:
        """Row reduction i of an earlier pass: its accumulator rows copied into the first block
        of each row of dst (so it is `replicated`), a mean divided by the row's width, a max /
        min made NaN where its row held one."""
        op = self.ops[i]
        rows = self.rows_of(i)
        n = self.count(i)
        row0 = "c0" if i in self.chunked else "0"
        words = lambda t: f"{t}.ReinterpretCast<uint32_t>()"  # noqa: E731
        acc = f"{self.acc_name(i, 'v')}[{row0} * 8]"
        self.need_v()
        self.out(f"wsp_copy_box({words(dst)}, {words(acc)}, {rows}, 8, {pc(1)}, 8);")
        self.v_dirty = True
        if op.op == "rowmean":
            d = self.temp("float", n)
            self.vec(f"AscendC::Duplicate({d}, {float_lit(float(self.colblock[0]), 'float')}, {n});")
            self.vec(f"AscendC::Div({dst}, {dst}, {d}, {n});")
        if op.op in ("rowmax", "rowmin"):
            t = self.temp("float", n)
            accn = f"{self.acc_name(i, 'nan')}[{row0} * 8]"
            self.out(f"wsp_copy_box({words(t)}, {words(accn)}, {rows}, 8, {pc(1)}, 8);")
            self.nan_fix(dst, t, t, n)
        self.replicated.add(i)
