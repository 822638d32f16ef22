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
from dataclasses import dataclass, field

from ....dtypes import TABLE
from ....ir import nodes as N
from ....ir.passes import plan_kernels as PK
from ....primitives import OPS
from ....version import __version__
from ... import cexpr as C
from ..render import render
from .chunks import column_passes, narrow
from .errors import AicoreError, UbOverflow
from .frame import Lines
from .layout import (
    API_RESERVE,
    COPY_T,
    MAX_LIVE,
    REPEAT,
    ROW_ALIGN,
    UB_BUDGET,
    UB_BYTES,
    ceil_to,
    pad_word,
    pc,
    vcount,
)
from .matmul import MatmulOps
from .moves import MOVE_OPS, MoveOps
from .names import describe, guard, kernel_entry
from .scalar import literal, scalar_param, sconvert, sexpr
from .scalar_ops import ScalarOps
from .sorting import SMALL_BLOCK, SORT_OPS


@dataclass
class _Input:
    """A tile parameter read by the kernel: its queue, and the value its param ops stand for."""

    name: str
    t: int  # index in `tiles`
    chunked: bool
    ops: list = field(default_factory=list)
    queued: bool = True  # through a TQue<VECIN> of its own; else copied into the arena


def emit_tile_kernel(k: N.Kernel, module: str) -> str:
    """The header of tile kernel `k` (raises AicoreError when it cannot run on the AICore)."""
    return KernelEmitter.emit(k, module)


class KernelEmitter(MatmulOps, MoveOps, ScalarOps):
    """Ascend C for one planned tile kernel with chunks of `rows` rows (see the module doc)."""

    @classmethod
    def emit(cls, k: N.Kernel, module: str) -> str:
        """The header of `k` with the largest chunk of rows that fits the UB; when its moves'
        staging and offset tensors (moves.py) are what does not fit, with those moves on the
        scalar unit, which needs none."""
        if k.plan is None:
            k = PK.plan_kernel(k, fuse=False)
        try:
            return cls.emit_planned(k, module)
        except UbOverflow:
            if not cls.vector_moves or not any(op.op in MOVE_OPS for op in k.ops):
                raise
            return _ScalarMoves.emit_planned(k, module)

    @classmethod
    def emit_planned(cls, k: N.Kernel, module: str) -> str:
        best, smallest, chunked, m = cls.fit(k, None)
        if best is None and cls.vector_sorts and any(op.op in SORT_OPS for op in k.ops):
            # the scratch of Sort32 / MrgSort (16 bytes a row element) did not fit even in
            # chunks of one row: sorts by smaller blocks, then the scalar sort, which needs
            # none (sorting.py)
            return (ScalarSorts if cls.sort_block else BlockedSorts).emit(k, module)
        if best is None:  # column reductions the rows read: passes over the chunks of rows
            best, fp, _, _ = cls.fit(k, None, read_acc=True)
            smallest = min(smallest, fp)
        colp = column_passes(k) if best is None else None
        n = colp[0] if colp else None
        if colp is not None:
            # a row wider than the UB: blocks of C columns, C the widest multiple of 32 that
            # fits (n split in 2, 3, ... blocks)
            for nb in range(2, n + 1):
                c = ceil_to(-(-n // nb), ROW_ALIGN)
                if c >= n:
                    continue
                best, fp, _, _ = cls.fit(narrow(k, n, c), (n, c), colp[1])
                smallest = min(smallest, fp)
                if best is not None or c == ROW_ALIGN:
                    break
        if best is None:
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
    def fit(cls, k: N.Kernel, cols, passes=(), read_acc: bool = False):
        """(emitter or None, smallest footprint, chunked, M): the largest chunk of rows of k
        that fits the UB; `cols` (N, C) when k is one block of C of N columns, computed in
        `passes` over the blocks (`chunks.column_passes`)."""
        probe = cls(k, 0, read_acc)
        m, chunked = probe.m, probe.chunked
        candidates = [r for r in range(m, 0, -1) if m % r == 0] if chunked else [m]
        smallest = None
        for r in candidates:  # the largest chunk that fits
            em = cls(k, r, read_acc)
            if cols is not None:
                em.colblock, em.passes = cols, passes
            em.run(final=False)
            fp = em.footprint()
            smallest = fp if smallest is None else min(smallest, fp)
            if fp <= UB_BUDGET:
                return em, fp, chunked, m
        return None, smallest, chunked, m

    # -- the plan of the whole kernel: which ops run where, and when
    def schedule(self) -> None:
        """Which inputs are chunked, the resident ops (`pro`) and the chunked ones (`loop`),
        the step each runs at (`when`) and the last step each value is read at (`last`)."""
        ops = self.ops
        inputs: dict[str, _Input] = {}
        for i, op in enumerate(ops):
            if op.op == "param" and i not in self.skip:
                name = str(op.attr)
                inp = inputs.setdefault(name, _Input(name, self.tile_index[name],
                                                     i in self.chunked))
                inp.ops.append(i)
        for inp in inputs.values():
            # all param ops of one parameter agree (the analysis looks at each; be safe)
            if any(i not in self.chunked for i in inp.ops):
                inp.chunked = False
                self.chunked.difference_update(inp.ops)
        # an AICore TPosition holds at most MAX_LIVE tensors at once: the first inputs (the
        # chunked ones first: their queues double-buffer) get a queue each, the others are
        # copied into arena buffers with explicit MTE2 / V hand-offs (any number of inputs)
        slots = MAX_LIVE - (1 if self.streams else 0)
        for n, inp in enumerate(sorted(inputs.values(), key=lambda x: (not x.chunked, x.t))):
            inp.queued = n < slots
        self.inputs = inputs
        pro = [i for i, op in enumerate(ops) if op.shape is not None and i not in self.chunked
               and op.op != "param" and i not in self.skip and i not in self.col_acc]
        loop = [i for i in range(len(ops)) if (i in self.chunked and ops[i].op != "param")
                or i in self.col_acc]
        cstores = [(p, v) for p, v in self.stores if v in self.chunked]
        estores = [(p, v) for p, v in self.stores if v not in self.chunked]
        # steps: 0 resident inputs, 1.. prologue, then chunk inputs, the loop, chunk stores,
        # epilogue stores
        t = 1
        when: dict[int, int] = {}
        for inp in inputs.values():
            if not inp.chunked:
                for i in inp.ops:
                    when[i] = 0
        for i in pro:
            when[i] = t
            t += 1
        loop_start = t
        t += 1
        for inp in inputs.values():
            if inp.chunked:
                for i in inp.ops:
                    when[i] = loop_start
        for i in loop:
            when[i] = t
            t += 1
        cstore_t = t
        t += 1
        loop_end = t - 1
        estore_t = {}
        for s in estores:
            estore_t[s] = t
            t += 1
        self.when, self.pro, self.loop = when, pro, loop
        self.cstores, self.estores = cstores, estores
        self.loop_start, self.loop_end, self.cstore_t, self.estore_t = (loop_start, loop_end,
                                                                        cstore_t, estore_t)
        # last step reading each value
        last: dict[int, int] = {}
        for i, op in enumerate(ops):
            if op.shape is None or i not in when:
                continue
            for a in op.args:
                if a in self.in_place:  # a matmul reads the transpose's operand in place
                    a = self.in_place[a]
                if a in self.skip:
                    continue
                last[a] = max(last.get(a, -1), when[i])
        for _, v in cstores:
            last[v] = max(last.get(v, -1), cstore_t)
        for s in estores:
            last[s[1]] = max(last.get(s[1], -1), estore_t[s])
        for u in list(last):
            if u not in self.chunked and last[u] >= loop_start and when.get(u, 0) < loop_start:
                last[u] = max(last[u], loop_end)  # read by every chunk
        self.last = last

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

    def queue_bytes(self) -> list[tuple[str, str, int, int]]:
        """(name, position, buffers, bytes per buffer) of every queue."""
        out = []
        for inp in self.inputs.values():
            if not inp.queued:
                continue
            p = self.params[inp.name]
            n = self.in_elems(inp)
            out.append((f"q_in{inp.t}", "VECIN", self.bufnum if inp.chunked else 1,
                        ceil_to(n * TABLE[p.dtype].size, 32)))
        for pname, v in self.stores:
            p = self.params[pname]
            t = self.tile_index[pname]
            chunk = v in self.chunked
            rows = self.r if chunk else p.rows
            out.append((f"q_out{t}", "VECOUT", self.bufnum if chunk else 1,
                        ceil_to(vcount(rows, p.cols) * TABLE[p.dtype].size, 32)))
        for mm, (src, _) in sorted(self.streams.items()):
            p = self.params[str(self.ops[src].attr)]
            out.append((f"q_mm{mm}", "VECIN", 1,
                        ceil_to(vcount(self.kblock(mm), p.cols) * TABLE[p.dtype].size, 32)))
        return out

    def in_elems(self, inp: _Input) -> int:
        """Elements of an input's UB tensor (a resident input read a chunk at a time has the
        last chunk's whole repeats past its end)."""
        p = self.params[inp.name]
        rows = self.r if inp.chunked else p.rows
        slack = REPEAT if (not inp.chunked and self.nchunks > 1 and p.rows == self.m) else 0
        return vcount(rows, p.cols) + slack

    def footprint(self) -> int:
        """Bytes of UB the kernel takes: its queues and its arena."""
        return sum(n * b for _, _, n, b in self.queue_bytes()) + self.arena + self.acc_bytes()

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


class BlockedSorts(KernelEmitter):
    """A kernel whose sorts run on Sort32 / MrgSort by blocks of SMALL_BLOCK columns: for one
    whose whole-row sort scratch does not fit the UB (`KernelEmitter.emit`)."""

    sort_block = SMALL_BLOCK


class ScalarSorts(KernelEmitter):
    """A kernel whose sorts run on the scalar unit: for one whose Sort32 / MrgSort scratch
    does not fit the UB even by blocks (`KernelEmitter.emit`)."""

    vector_sorts = False


class _ScalarMoves(KernelEmitter):
    """The emitter with every move on the scalar unit (`KernelEmitter.emit`'s fallback)."""

    vector_moves = False
