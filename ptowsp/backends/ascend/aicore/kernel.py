"""Ascend C for one tile kernel: `emit_tile_kernel(k, module)`, the header's text.

The emitter (`KernelEmitter`) plans where each op runs and when (resident values before the
chunk loop, chunked ones inside it), finds the largest chunk of rows whose footprint fits the
Unified Buffer, and writes the body: the TPipe and its queues, the scalars (computed once), the
resident inputs and values, then per chunk the inputs through `TQue<VECIN>`, the ops and the
results through `TQue<VECOUT>`, double-buffered (two buffers each) when there is more than one
chunk, in the canonical CopyIn / Compute / CopyOut order, so the copy-in of chunk c + 1
overlaps the compute of chunk c. If even R = 1 does not fit, the kernel is a compile error at
its span. Each op is written by the vector unit (`vector.py`, `matmul.py`) or, when that has no
instruction for it, by the scalar unit (`scalar_ops.py`).
"""

from __future__ import annotations

import dataclasses

from ....dtypes import TABLE
from ....ir import nodes as N
from ....ir.passes import plan_kernels as PK
from ....primitives import OPS
from ....version import __version__
from ... import cexpr as C
from ...sort_plan import Sorts
from ...ub_plan import KernelShape, search
from ..render import render
from .errors import AicoreError, UbOverflow
from .frame import Lines
from .layout import (
    API_RESERVE,
    COPY_T,
    ROW_ALIGN,
    UB_BUDGET,
    UB_BYTES,
    pad_word,
    pc,
    vcount,
)
from .matmul import MatmulOps
from .moves import MoveOps
from .names import describe, guard, kernel_entry
from .scalar import literal, scalar_param, sconvert, sexpr
from .scalar_ops import ScalarOps


def emit_tile_kernel(k: N.Kernel, module: str) -> str:
    """The header of tile kernel `k` (raises AicoreError when it cannot run on the AICore)."""
    return KernelEmitter.emit(k, module)


class KernelEmitter(MatmulOps, MoveOps, ScalarOps):
    """Ascend C for one planned tile kernel with chunks of `rows` rows (see the module doc)."""

    # how the search first tries a kernel's sorts (sort_plan.Sorts: on Sort32 / MrgSort, whole
    # rows where they fit; `ub_plan.search` falls back to blocks of 512, then to the scalar
    # unit, when their scratch overflows the UB). Tests and benchmarks/ascend_sort.py set
    # these to run other paths.
    vector_sorts = True
    sort_block = None

    @classmethod
    def emit(cls, k: N.Kernel, module: str) -> str:
        """The header of `k` with the largest chunk of rows that fits the UB (the search is
        `ub_plan.search`, each candidate emitted and measured)."""
        if k.plan is None:
            k = PK.plan_kernel(k, fuse=False)
        best, smallest, colp = search(k, cls.measure, Sorts(cls.vector_sorts, cls.sort_block))
        if best is None:
            probe = KernelShape(k, 0)
            chunked, m = probe.chunked, probe.m
            n = colp[0] if colp else None
            how = ("even in chunks of 1 row" if chunked and m > 1 else
                   "(its rows must all be resident: a transpose, a column reduction or the right "
                   "operand of a matmul needs them)" if m > 1 else "")
            if n is not None:
                how += f" and in blocks of {ROW_ALIGN} columns"
            elif chunked or m <= 1:
                how += (" (its rows are not split into blocks of columns: a transpose, a "
                        "slice, a sort, a matmul, a column index or a column reduction reads a row "
                        "whole, as does a [rows, 1] tile both read and stored)")
            cvals = ", ".join(f"{n} = {v}" for n, v in k.constexprs)
            which = f"kernel `{k.source}`" + (f" with {cvals}" if cvals else "")
            raise UbOverflow(
                " ".join(f"{which} needs {smallest} bytes of Unified Buffer {how}; an "
                         f"AICore vector core has {UB_BUDGET} (of {UB_BYTES}: Ascend C keeps "
                         f"{API_RESERVE} for itself)".split()), k.span,
                help=("use smaller tiles (" + (f"smaller Constexpr values than {cvals} at this "
                                               "call, " if cvals else "")
                      + "fewer columns, or split the work over more tasks)"))
        best.run(final=True)
        return best.header(module)

    @classmethod
    def measure(cls, k: N.Kernel, rows: int, read_acc: bool, cols, passes, sorts: Sorts):
        """(emitter, footprint): k emitted in chunks of `rows` rows (`cols` (N, C) when k is
        one block of C of N columns, computed in `passes` over the blocks; its sorts as
        `sorts` says), its arena sized."""
        em = cls(k, rows, read_acc, sorts)
        if cols is not None:
            em.colblock, em.passes = cols, passes
        em.run(final=False)
        return em, em.footprint()

    # -- running the emission (twice: to size the arena, then with offsets)
    def run(self, final: bool) -> None:
        """One emission of the body: sizing the arena (`final` false), or the real one."""
        self.schedule()
        self.start_arena(final)
        self.out = Lines(1)
        self.scalars: dict[int, str] = {}  # scalar op -> its C++ local
        self.tensor: dict[int, str] = {}  # tile op -> its LocalTensor
        self.replicated: set[int] = set()  # [rows, 1] values whose rows' first blocks are full
        self.body()
        if not final:
            self.allocate()

    def footprint(self) -> int:
        """Bytes of UB the kernel takes: its queues and its arena."""
        return self.total_bytes(self.arena)

    # -- the body
    def body(self) -> None:
        """The function body: declarations, scalars, resident values, the chunk loop, the
        stores after it, the pipe's release."""
        out = self.out
        self.reset_pipes()
        ops = self.ops
        # declarations: pipe, queues, arena
        out("AscendC::TPipe pipe;")
        for name, pos, nbuf, _ in self.queue_bytes():
            out(f"AscendC::TQue<AscendC::TPosition::{pos}, {nbuf}> {name};")
        out("AscendC::TBuf<AscendC::TPosition::VECCALC> calc;")
        for name, _, nbuf, size in self.queue_bytes():
            out(f"pipe.InitBuffer({name}, {nbuf}, {size});")
        arena = getattr(self, "arena", 0) if self.final else 0
        out(f"pipe.InitBuffer(calc, {max(arena, 256)});")
        self.declare_accs()
        # scalars, computed once
        self.cur = 0
        for i, op in enumerate(ops):
            if op.shape is None:
                self.scalar(i)
        if self.colblock is None and not self.passes:
            self.this_pass = None
            self.pass_body()
        elif self.colblock is None:  # column reductions other ops read: passes over the rows
            for p, cp in enumerate(self.passes):
                self.this_pass = cp
                self.temp_keys = {}  # the same ops' temporaries as in the other passes
                what = ("the stores" if p == len(self.passes) - 1 else "accumulate " + ", ".join(
                    f"%{r} = {self.ops[r].op}" for r in sorted(cp.writes)))
                out(f"// pass {p + 1} of {len(self.passes)} over the rows ({what})")
                self.reset_pipes()
                self.pass_body()
                self.reset_pipes()
        else:
            n, c = self.colblock
            for p, cp in enumerate(self.passes):
                self.this_pass = cp
                self.temp_keys = {}  # the same ops' temporaries as in the other passes
                what = ("the stores" if p == len(self.passes) - 1 else "accumulate " + ", ".join(
                    f"%{r} = {self.ops[r].op}" for r in sorted(cp.writes)))
                out(f"// pass {p + 1} of {len(self.passes)} over the columns ({what}): {n} in "
                    f"{-(-n // c)} blocks of {c} (a row does not fit the UB)")
                self.start_accs(cp)
                out.open(f"for (uint32_t cb = 0; cb < {-(-n // c)}u; ++cb)")
                out(f"const uint32_t cb0 = cb * {c}u;")
                out(f"const uint32_t cbn = cb0 + {c}u <= {n}u ? {c}u : {n}u - cb0;")
                out("(void)cbn;")
                self.reset_pipes()
                self.pass_body()
                out.close()
                self.reset_pipes()
        # the next task's kernel builds its own TPipe over the same UB: let every pipe drain
        # (the last copy-out included), then release this one ("repeated TPipes" in the docs)
        out("AscendC::PipeBarrier<PIPE_ALL>();")
        out("pipe.Destroy();")

    def narrow_store(self, s: tuple) -> bool:
        """Whether store s is of a [*, 1] tile in a kernel run in blocks of columns."""
        return self.colblock is not None and self.params[s[0]].cols == 1

    def in_pass(self, i: int) -> bool:
        """Whether op i is computed (or read back) in the current pass over the columns."""
        return self.this_pass is None or i in self.this_pass.ops

    def pass_body(self) -> None:
        """The resident values, the chunk loop and the stores of the current pass (all of the
        kernel when it runs on whole rows)."""
        out = self.out
        final = self.this_pass is None or self.this_pass is self.passes[-1]
        inputs = [inp for inp in self.inputs.values() if any(self.in_pass(i) for i in inp.ops)]
        pro = [i for i in self.pro if self.in_pass(i)]
        loop = [i for i in self.loop if self.in_pass(i)]
        cstores = self.cstores if final else []
        estores = self.estores if final else []
        # resident inputs, the prologue
        self.cur = 0
        res_inputs = [inp for inp in inputs if not inp.chunked]
        if res_inputs or pro:
            out("// resident values: every row, computed once")
        self.copy_in(res_inputs, "0")
        for i in pro:
            self.cur = self.when[i]
            self.op(i)
        # column reductions accumulated across the chunks start at their identity (those of
        # an earlier pass are read back as they are)
        col_acc = [i for i in loop if i in self.col_acc
                   and (self.this_pass is None or i in self.this_pass.writes)]
        for i in col_acc:
            self.cur = self.when[i]
            self.start_columns(i)
        # the chunk loop
        chunk_inputs = [inp for inp in inputs if inp.chunked]
        if loop or cstores or chunk_inputs:
            overlap = " (copy-in of the next overlaps the compute of this one)"
            out(f"// {self.nchunks} chunk{'s' if self.nchunks > 1 else ''} of {self.r} rows"
                f"{overlap if self.bufnum > 1 else ''}")
            out.open(f"for (int32_t c = 0; c < {self.nchunks}; ++c)")
            out(f"const int32_t c0 = c * {self.r};")
            out("(void)c0;")
            self.reset_pipes()
            self.cur = self.loop_start
            self.copy_in(chunk_inputs, "c0")
            for i in loop:
                self.cur = self.when[i]
                self.op(i)
            self.cur = self.cstore_t
            for s in cstores:  # one VECOUT tensor live at a time (at most 8 may be)
                narrow = self.narrow_store(s)
                if narrow:  # a [*, 1] result: the same in every block, stored by the first
                    out.open("if (cb == 0)")
                self.store_all([s], "c0", chunk=True)
                self.copy_out([s], "c0", chunk=True)
                if narrow:
                    out.close()
                    self.reset_pipes()  # the syncs inside may not have run
            for inp in chunk_inputs:
                if inp.queued:
                    out(f"q_in{inp.t}.FreeTensor(in{inp.t});")
            out.close()
            self.reset_pipes()
        for i in col_acc:
            self.cur = self.when[i]
            self.finish_columns(i)
        for s in estores:
            self.cur = self.estore_t[s]
            narrow = self.narrow_store(s)
            if narrow:
                out.open("if (cb == 0)")
            self.store_all([s], "0", chunk=False)
            self.copy_out([s], "0", chunk=False)
            if narrow:
                out.close()
                self.reset_pipes()
        for inp in res_inputs:
            if inp.queued:
                out(f"q_in{inp.t}.FreeTensor(in{inp.t});")

    def scalar(self, i: int) -> None:
        """Scalar op i as a const local, computed once."""
        op = self.ops[i]
        ct = TABLE[op.dtype].c_compute
        if op.op == "scalar_param":
            e = scalar_param(op.dtype, self.scalar_index[str(op.attr)])
        elif op.op == "literal":
            e = literal(op.attr, op.dtype)
        elif op.op in ("valid_rows", "valid_cols"):
            # the view's extent: the task record's (a partial view's, else the tile's)
            which = "rows" if op.op == "valid_rows" else "cols"
            e = f"({ct})tiles[{self.tile_index[str(op.attr)]}].{which}"
        else:
            if OPS[op.op].plan != "ew":
                raise AicoreError(f"scalar op `{op.op}` has no AICore implementation", self.k.span)
            try:
                e = sexpr(op.op, op.dtype, [self.scalars[a] for a in op.args],
                          [self.ops[a].dtype for a in op.args], self.exponent(op))
            except AicoreError as err:
                raise AicoreError(err.message, self.k.span, err.help) from None
        name = f"s{i}"
        self.out(f"const {ct} {name} = {e};")
        self.out(f"(void){name};")
        self.scalars[i] = name

    # -- copies between GM and UB
    def tile_ref(self, name: str) -> str:
        """Tile parameter `name` as the copies see it: the task's tile, or in a kernel run in
        blocks of columns, this block's columns of a wide one (`wsp_col_block`)."""
        p = self.params[name]
        t = self.tile_index[name]
        if self.colblock is None or p.cols != self.colblock[1]:
            return f"tiles[{t}]"
        return f"wsp_col_block(tiles[{t}], cb0, {p.cols}, {TABLE[p.dtype].size})"

    def copy_in(self, inputs: list, row0: str) -> None:
        """The inputs' rows from row `row0` into their VECIN tensors (f16 / bf16 then held in
        f32, bool bytes made 0 or 1)."""
        if not inputs:
            return
        out = self.out
        if any(not inp.queued for inp in inputs):
            # arena inputs: the copy engine may not overwrite what the vector pipe or the
            # scalar unit still reads (the previous chunk's)
            out("wsp_sync<AscendC::HardEvent::V_MTE2>();")
            out("wsp_sync<AscendC::HardEvent::S_MTE2>();")
        for inp in inputs:
            p = self.params[inp.name]
            st = TABLE[p.dtype].ascend
            cp = COPY_T[TABLE[p.dtype].size]
            rows = self.r if inp.chunked else p.rows
            if inp.queued:
                out(f"AscendC::LocalTensor<{st}> in{inp.t} = q_in{inp.t}.AllocTensor<{st}>();")
            else:
                n = self.in_elems(inp)
                start = self.loop_start if inp.chunked else 0
                end = self.loop_end if inp.chunked else max(
                    [self.last.get(i, 0) for i in inp.ops] + [start])
                off = self.request(("in", inp.t), n * TABLE[p.dtype].size, start, end)
                out(f"const AscendC::LocalTensor<{st}> in{inp.t} = "
                    f"calc.GetWithOffset<{st}>({n}, {off});")
            out(f"wsp_copy_in<{cp}>(in{inp.t}.ReinterpretCast<{cp}>(), {self.tile_ref(inp.name)}, {row0}, "
                f"{rows}, {p.cols * TABLE[p.dtype].size}, {pc(p.cols) * TABLE[p.dtype].size}, "
                f"{TABLE[p.dtype].size}, {pad_word(p)});")
            if inp.queued:
                out(f"q_in{inp.t}.EnQue(in{inp.t});")
        for inp in inputs:
            p = self.params[inp.name]
            st = TABLE[p.dtype].ascend
            if inp.queued:
                out(f"in{inp.t} = q_in{inp.t}.DeQue<{st}>();")
        if any(not inp.queued for inp in inputs):
            out("wsp_sync<AscendC::HardEvent::MTE2_V>();")
        # a partial or gathered view is padded by the vector unit (or the scalar unit) too
        self.mte2_s = self.v_dirty = self.s_dirty = True
        for inp in inputs:
            p = self.params[inp.name]
            first = inp.ops[0]
            if p.dtype in ("f16", "bf16"):  # held in f32 from here on
                for i in inp.ops:
                    self.when[i] = self.when[first]
                    self.last[first] = max(self.last.get(first, 0), self.last.get(i, 0))
                self.cur = self.when[first]
                name = self.value_buffer(first)
                self.vec(f"AscendC::Cast({name}, in{inp.t}, AscendC::RoundMode::CAST_NONE, "
                         f"{self.count(first)});")
            else:
                name = f"in{inp.t}"
                if p.dtype == "bool":  # a nonzero byte is true: make every byte 0 or 1
                    self.need_s()
                    rows = self.r if inp.chunked else p.rows
                    byte = sconvert(C.call(f"{name}.GetValue", "e"), "u8", "bool")
                    self.out(f"for (uint32_t e = 0; e < {rows * pc(p.cols)}; ++e) "
                             f"{name}.SetValue(e, {byte});")
                    self.s_dirty = True
            for i in inp.ops:
                self.tensor[i] = name

    def store_all(self, stores: list, row0: str, chunk: bool) -> None:
        """Each stored value converted and copied into its VECOUT tensor, enqueued."""
        for pname, v in stores:
            p = self.params[pname]
            t = self.tile_index[pname]
            st = TABLE[p.dtype].ascend
            op = self.ops[v]
            self.out.open("")
            src, sdt = self.tensor[v] if op.shape else None, op.dtype
            if op.shape is None:  # a scalar: a tile of it
                src = self.fill(v, (p.rows if not chunk else self.r, p.cols), p.dtype)
                sdt = p.dtype
            elif op.shape != (p.rows, p.cols):
                src = self.materialise(v, (self.r if chunk else p.rows, p.cols), chunk)
            else:
                src = self.at(v, chunk)
            n = vcount(self.r if chunk else p.rows, p.cols)
            if sdt != p.dtype:
                src = self.convert_tile(src, sdt, p.dtype, n)
            self.out(f"AscendC::LocalTensor<{st}> out{t} = q_out{t}.AllocTensor<{st}>();")
            if p.dtype in ("f16", "bf16"):
                self.vec(f"AscendC::Cast(out{t}, {src}, AscendC::RoundMode::CAST_RINT, {n});")
            else:
                words = n * TABLE[p.dtype].size // 4
                self.need_v()
                self.out(f"wsp_copy_words(out{t}.ReinterpretCast<uint32_t>(), "
                         f"{src}.ReinterpretCast<uint32_t>(), {words});")
                self.v_dirty = True
            self.out(f"q_out{t}.EnQue(out{t});")
            self.out.close()

    def copy_out(self, stores: list, row0: str, chunk: bool) -> None:
        """Each stored VECOUT tensor to its tile's rows from row `row0`."""
        for pname, _ in stores:
            p = self.params[pname]
            t = self.tile_index[pname]
            st = TABLE[p.dtype].ascend
            cp = COPY_T[TABLE[p.dtype].size]
            rows = self.r if chunk else p.rows
            self.out.open("")
            self.out(f"AscendC::LocalTensor<{st}> out{t} = q_out{t}.DeQue<{st}>();")
            self.out(f"wsp_copy_out<{cp}>({self.tile_ref(pname)}, out{t}.ReinterpretCast<{cp}>(), {row0}, "
                     f"{rows}, {p.cols * TABLE[p.dtype].size}, {pc(p.cols) * TABLE[p.dtype].size}, "
                     f"{TABLE[p.dtype].size});")
            self.out(f"q_out{t}.FreeTensor(out{t});")
            self.out.close()

    # -- one op
    def op(self, i: int) -> None:
        """Tile op i into its arena buffer, on the unit that has an instruction for it."""
        op = self.ops[i]
        chunk = i in self.chunked
        self.out(f"// %{i} = {op.op}{self.describe_args(op)} -> "
                 f"[{op.shape[0]}, {op.shape[1]}] {op.dtype}")
        dst = self.value_buffer(i)
        self.out.open("")
        try:
            if i in self.col_acc and self.this_pass is not None and i in self.this_pass.reads:
                self.out(f"// (accumulated by an earlier pass: v{i})")
            elif i in self.col_acc:
                self.accumulate_columns(i, dst)
            elif self.this_pass is not None and i in self.this_pass.writes:
                self.accumulate(i, dst, chunk)
            elif self.this_pass is not None and i in self.this_pass.reads:
                self.read_back(i, dst, chunk)
            elif op.op == "matmul":
                self.matmul(i, dst, chunk)
            elif self.copy_ok(op):
                self.copy_op(i, dst, chunk)
            elif self.move_ok(op):
                self.move_op(i, dst, chunk)
            elif self.vector_ok(op):
                self.vector_op(i, dst, chunk)
                self.note_replicated(i)
            else:
                self.scalar_op(i, dst, chunk)
        except AicoreError as err:
            raise AicoreError(err.message, self.k.span, err.help) from None
        self.out.close()

    def describe_args(self, op: N.Op) -> str:
        parts = [f"%{a}" for a in op.args]
        if op.op in ("param", "scalar_param"):
            parts.append(str(op.attr))
        return f"({', '.join(parts)})"

    # -- the file
    def whole(self, p: N.KParam) -> N.KParam:
        """Parameter p as the task passes it (its N columns when this is one block of C)."""
        if self.colblock is not None and p.kind == "tile" and p.cols == self.colblock[1]:
            return dataclasses.replace(p, cols=self.colblock[0])
        return p

    def header(self, module: str) -> str:
        """The kernel's header: the template around the body."""
        k = self.k
        units = sorted({"vector" if self.vector_ok(self.ops[i]) or self.copy_ok(self.ops[i])
                        or self.move_ok(self.ops[i])
                        else "scalar"
                        for i in self.pro + self.loop})
        summary = [
            f"UB: {self.footprint()} of {UB_BUDGET} bytes ({self.arena} arena, "
            f"{self.footprint() - self.arena} queues); rows {self.m} "
            + (f"in {self.nchunks} chunk{'s' if self.nchunks > 1 else ''} of {self.r}"
               if self.chunked else "resident")
            + (f"; columns {self.colblock[0]} in blocks of {self.colblock[1]}"
               + (f", {len(self.passes)} passes" if len(self.passes) > 1 else "")
               if self.colblock else ""),
            "units: " + (", ".join(units) or "copies only")
            + ("; matmul on the vector unit (C[i,:] += a[i,k] * B[k,:]), not the cube"
               if any(op.op == "matmul" for op in self.ops) else "")
            + ("; transposed matmul operands read in place" if self.in_place else ""),
        ]
        return render(
            "aicore/kernel.h",
            name=k.name, source=k.source, module=module, version=__version__,
            params=[describe(self.whole(p)) for p in k.params], summary=summary, guard=guard(module, k),
            entry=kernel_entry(k), body=self.out.lines)

