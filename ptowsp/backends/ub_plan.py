"""The Unified Buffer plan of a vector kernel: from the IR kernel alone, which values are
resident or chunked, where each op runs and when, its queues, the buffers of its arena (values,
inputs, each op's temporaries) with their sizes and lifetimes, their liveness allocation, and so
the kernel's UB footprint at a chunk of R rows (`footprint`) and the chunking the Ascend
emitter chooses (`fit`: the largest R that fits, else blocks of columns). Below both back ends:
the Ascend emitter (`backends/ascend/aicore/frame.py`, `kernel.py`) builds its state on
`KernelShape` and allocates its arena with `allocate`, and the cycle model
(`backends/cpu/cost.py`) costs a vector kernel in the chunks `fit` gives, so cpu_sim's own
runs model the emitter's chunks.

What is one definition and what is two: the shape facts (chunking, the schedule of steps, the
queues, the accumulators, the arena's allocation) are `KernelShape`, shared. Each op's
temporaries are requested by the emitter's op writers while they write their text
(`Frame.temp` in vector.py, matmul.py, reductions.py, sorting.py); `UbPlan` declares the same
temporaries, writer by writer (`_op`, `_vector_op`, `_matmul`, ...), without text, and
repeats which writer takes an op (`_vector_ok`, `_copy_ok`: vector.py's `vector_ok`,
`copy_ok`; the data moves' rule and temporaries are move_plan.py's, shared). The chunk search (`search`) is one, run with the emitter's measure or the plan's.
tests/ascend/conftest.py checks, at every measure of every kernel the Ascend tests emit (every
example and test program among them), that the buffers the emitter requests (key, size,
lifetime, offset, order) are the plan's, so its footprint and R are the plan's: a writer that
changes its temporaries changes the plan's declaration with it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Optional

from ..dtypes import TABLE, literal_value
from ..ir import nodes as N
from ..primitives import OPS
from .move_plan import MovePlan, has_moves
from .sort_plan import BLOCK, ON_SORT32, Sorts, has_sorts, sort_pairs, sortable, whole_rows
from .vector_chunks import accumulated_columns, chunking, column_passes, narrow, row_passes
from .vector_plan import (
    ADV_TMP,
    CXX_SIZE,
    MAX_LIVE,
    REPEAT,
    ROW_ALIGN,
    STREAM_BYTES,
    UB_BUDGET,
    VFLOAT,
    ceil_to,
    copy_ok,
    held_size,
    pc,
    vcount,
    vector_ok,
)

_CMP = ("lt", "le", "gt", "ge", "eq", "ne")  # aicore/scalar.py's CMP: compares


@dataclass
class Req:
    """A UB buffer of the arena: `size` bytes live over steps [start, end], at `off`."""

    key: tuple
    size: int
    start: int
    end: int
    off: int = 0


def request_size(size: int) -> int:
    """Bytes a buffer of `size` takes in the arena (at least 32, whole 256-byte repeats)."""
    return ceil_to(max(size, 32), 256)


def record(reqs: dict, key: tuple, size: int, start: int, end: int) -> None:
    """Record a buffer request: a key asked for again (the same value or temporary in another
    pass) is the same buffer, as large as the largest asked for, live over both lifetimes."""
    size = request_size(size)
    req = reqs.get(key)
    if req is None:
        reqs[key] = Req(key, size, start, end)
    else:
        req.size, req.start, req.end = (max(req.size, size), min(req.start, start),
                                        max(req.end, end))


def allocate(reqs: dict) -> int:
    """Place every recorded buffer at the lowest offset free over its lifetime (buffers whose
    lifetimes do not overlap share bytes); the arena's size."""
    placed: list[Req] = []
    for req in sorted(reqs.values(), key=lambda q: (q.start, -q.size)):
        off = 0
        clash = sorted((p.off, p.off + p.size) for p in placed
                       if p.start <= req.end and req.start <= p.end)
        for lo, hi in clash:
            if off + req.size <= lo:
                break
            off = max(off, hi)
        req.off = off
        placed.append(req)
    return max((q.off + q.size for q in reqs.values()), default=0)


@dataclass
class Input:
    """A tile parameter read by the kernel: its queue, and the value its param ops stand for."""

    name: str
    t: int  # index in `tiles`
    chunked: bool
    ops: list = field(default_factory=list)
    queued: bool = True  # through a TQue<VECIN> of its own; else copied into the arena


class KernelShape:
    """The shape facts of one vector kernel run in chunks of `rows` rows (and, when `colblock`
    is (N, C), in blocks of C of its N columns over `passes`), its sorts run as `sorts` says:
    shared by the emitter and the plan."""

    def __init__(self, k: N.Kernel, rows: int, read_acc: bool = False,
                 sorts: Sorts = ON_SORT32):
        self.k = k
        self.sorts = sorts
        self.ops = k.ops
        self.read_acc = read_acc
        self.params = {p.name: p for p in k.params}
        self.tiles = [p for p in k.params if p.kind == "tile"]
        self.tile_index = {p.name: t for t, p in enumerate(self.tiles)}
        self.stores = tuple(k.stores)
        self.m, self.chunked, self.streams, self.skip, self.in_place = chunking(
            self.ops, self.params, self.stores, read_acc)
        # column reductions accumulated in the chunk loop (their operand is chunked); those
        # other ops read only with `read_acc` (`fit`: when nothing else fits)
        self.col_acc = frozenset(i for i in accumulated_columns(self.ops, self.params, self.stores,
                                                                read_acc)
                                 if self.ops[i].args[0] in self.chunked)
        # passes over the chunks when ops read an accumulated column reduction
        self.row_passes = row_passes(self.ops, self.stores, self.col_acc)
        self.r = rows if self.chunked else self.m
        self.nchunks = self.m // self.r if self.chunked and self.r else 1
        self.bufnum = 2 if self.nchunks > 1 else 1
        # (N, C): this kernel is one block of C of a task's N columns, run in a loop over the
        # blocks (`vector_chunks.column_passes`); None: whole rows
        self.colblock: Optional[tuple[int, int]] = None
        # its passes over the blocks of columns, or over the chunks of rows (`ColumnPass`)
        self.passes: tuple = self.row_passes

    # -- shapes
    def rows_of(self, i: int) -> int:
        """Rows of value i's UB tile (R for a chunked value)."""
        return self.r if i in self.chunked else self.ops[i].shape[0]

    def count(self, i: int) -> int:
        """Elements a vector instruction covers for value i's UB tile."""
        return vcount(self.rows_of(i), self.ops[i].shape[1])

    def slack(self, i: int) -> int:
        """Extra elements after a resident value read a chunk at a time (the last chunk's
        instructions cover whole repeats past its end)."""
        op = self.ops[i]
        if self.nchunks > 1 and i not in self.chunked and op.shape and op.shape[0] == self.m:
            return REPEAT
        return 0

    def urows(self, u: int, chunk: bool) -> int:
        """Rows of value u as the current op sees it (R for a chunked op reading M rows)."""
        rows = self.ops[u].shape[0]
        return self.r if chunk and rows == self.m else rows

    def exponent(self, op: N.Op) -> Optional[float]:
        """The exponent of a `pow` when it is a literal (special cases: 2, 1, 0, -1)."""
        if op.op != "pow":
            return None
        e = self.ops[op.args[1]]
        if e.op == "literal":
            return float(literal_value(e.attr, e.dtype))
        return None

    # -- the plan of the whole kernel: which ops run where, and when
    def schedule(self) -> None:
        """Which inputs are chunked, the resident ops (`pro`) and the chunked ones (`loop`),
        the step each runs at (`when`) and the last step each value is read at (`last`)."""
        ops = self.ops
        inputs: dict[str, Input] = {}
        for i, op in enumerate(ops):
            if op.op == "param" and i not in self.skip:
                name = str(op.attr)
                inp = inputs.setdefault(name, Input(name, self.tile_index[name],
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

    def computes(self, i: int, this_pass) -> bool:
        """Whether op i is computed (or read back) in pass `this_pass` (None: whole rows)."""
        return this_pass is None or i in this_pass.ops

    # -- the queues and the accumulators (outside the arena)
    def kblock(self, mm: int) -> int:
        """Rows of a streamed matmul operand per block (about STREAM_BYTES of UB)."""
        src = self.streams[mm][0]
        p = self.params[str(self.ops[src].attr)]
        return max(1, min(p.rows, STREAM_BYTES // (pc(p.cols) * 4)))

    def in_elems(self, inp: Input) -> int:
        """Elements of an input's UB tensor (a resident input read a chunk at a time has the
        last chunk's whole repeats past its end)."""
        p = self.params[inp.name]
        rows = self.r if inp.chunked else p.rows
        slack = REPEAT if (not inp.chunked and self.nchunks > 1 and p.rows == self.m) else 0
        return vcount(rows, p.cols) + slack

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

    def acc_slots(self) -> list[tuple[int, str]]:
        """(reduction, "v" | "nan") of every accumulator of a row in blocks of columns: a
        value per row, and for max / min the sum of the row's NaNs (the hardware's max does not
        propagate NaN). Passes over the rows accumulate in the arena: none."""
        out = []
        if self.colblock is None:
            return out
        for cp in self.passes:
            for r in sorted(cp.writes):
                out.append((r, "v"))
                if self.ops[r].op in ("rowmax", "rowmin"):
                    out.append((r, "nan"))
        return out

    def acc_size(self) -> int:
        """Bytes of one accumulator: a 32-byte block per row of the task's M."""
        return ceil_to(self.m * 8 * 4, 256)

    def acc_bytes(self) -> int:
        return len(self.acc_slots()) * self.acc_size()

    def total_bytes(self, arena: int) -> int:
        """Bytes of UB the kernel takes with an arena of `arena` bytes: queues, arena, accs."""
        return sum(n * b for _, _, n, b in self.queue_bytes()) + arena + self.acc_bytes()


# -- the plan: the arena's buffers, declared without writing the kernel


class UbPlan(MovePlan, KernelShape):
    """The buffers the emitter requests for kernel k in chunks of `rows` rows, in the order it
    requests them (`requests`), their allocation (`arena`) and the kernel's `footprint`."""

    def __init__(self, k: N.Kernel, rows: int, read_acc: bool = False,
                 cols: Optional[tuple[int, int]] = None, passes: tuple = (),
                 sorts: Sorts = ON_SORT32):
        super().__init__(k, rows, read_acc, sorts)
        if cols is not None:
            self.colblock, self.passes = cols, passes
        self.schedule()
        self.reqs: dict[tuple, Req] = {}
        self.temp_keys: dict[int, int] = {}
        self.replicated: set[int] = set()
        self.cur = 0
        self._body()
        self.arena = allocate(self.reqs)
        self.footprint = self.total_bytes(self.arena)

    # -- primitives (Frame's, without text)
    def _temp(self, ct: str, elems: int) -> None:
        n = self.temp_keys.get(self.cur, 0)
        self.temp_keys[self.cur] = n + 1
        record(self.reqs, ("t", self.cur, n), elems * CXX_SIZE[ct], self.cur, self.cur)

    def _request(self, key: tuple, size: int, start: int, end: int) -> None:
        record(self.reqs, key, size, start, end)

    def _value(self, i: int) -> None:
        op = self.ops[i]
        n = self.count(i) + self.slack(i)
        end = self.last.get(i, self.when[i])
        record(self.reqs, ("v", i), n * held_size(op.dtype), self.when[i], max(end, self.when[i]))

    # -- the body (KernelEmitter.body, pass_body)
    def _body(self) -> None:
        if self.colblock is None and not self.passes:
            self._pass(None)
            return
        for cp in self.passes:
            self.temp_keys = {}  # the same ops' temporaries as in the other passes
            self._pass(cp)

    def _pass(self, cp) -> None:
        final = cp is None or cp is self.passes[-1]
        inputs = [inp for inp in self.inputs.values() if any(self.computes(i, cp) for i in inp.ops)]
        self.cur = 0
        res_inputs = [inp for inp in inputs if not inp.chunked]
        self._copy_in(res_inputs)
        for i in (i for i in self.pro if self.computes(i, cp)):
            self.cur = self.when[i]
            self._op(i, cp)
        loop = [i for i in self.loop if self.computes(i, cp)]
        col_acc = [i for i in loop if i in self.col_acc and (cp is None or i in cp.writes)]
        for i in col_acc:
            self.cur = self.when[i]
            self._col_buffers(i)
        chunk_inputs = [inp for inp in inputs if inp.chunked]
        cstores = self.cstores if final else []
        if loop or cstores or chunk_inputs:
            self.cur = self.loop_start
            self._copy_in(chunk_inputs)
            for i in loop:
                self.cur = self.when[i]
                self._op(i, cp)
            self.cur = self.cstore_t
            for s in cstores:
                self._store(s, chunk=True)
        for i in col_acc:  # finish_columns
            self.cur = self.when[i]
            n = self.count(i)
            if self.ops[i].op == "colmean":
                self._temp("float", n)
            if self.ops[i].op in ("colmax", "colmin"):
                self._temp("uint8_t", n // 8)
        for s in (self.estores if final else []):
            self.cur = self.estore_t[s]
            self._store(s, chunk=False)

    def _copy_in(self, inputs: list) -> None:
        for inp in inputs:
            if not inp.queued:
                p = self.params[inp.name]
                start = self.loop_start if inp.chunked else 0
                end = self.loop_end if inp.chunked else max(
                    [self.last.get(i, 0) for i in inp.ops] + [start])
                record(self.reqs, ("in", inp.t), self.in_elems(inp) * TABLE[p.dtype].size,
                       start, end)
        for inp in inputs:
            if self.params[inp.name].dtype in ("f16", "bf16"):  # held in f32: a Cast
                first = inp.ops[0]
                for i in inp.ops:
                    self.when[i] = self.when[first]
                    self.last[first] = max(self.last.get(first, 0), self.last.get(i, 0))
                self.cur = self.when[first]
                self._value(first)

    def _col_buffers(self, i: int) -> None:
        n = self.count(i)
        end = max(self.last.get(i, self.when[i]), self.loop_end)
        start = 0 if self.passes and self.colblock is None else self.loop_start
        record(self.reqs, ("v", i), n * 4, start, end)
        record(self.reqs, ("colnan", i), n * 4, start, end)

    def _store(self, s: tuple, chunk: bool) -> None:
        """store_all: a scalar filled, a broadcast materialised, a conversion to the tile's
        dtype."""
        pname, v = s
        p = self.params[pname]
        op = self.ops[v]
        sdt = op.dtype
        rows = self.r if chunk else p.rows
        if op.shape is None:
            self._temp(TABLE[p.dtype].c_compute, vcount(rows, p.cols))
            sdt = p.dtype
        elif op.shape != (p.rows, p.cols):
            self._materialise(v, (rows, p.cols), chunk)
        if sdt != p.dtype:
            self._convert_tile(sdt, p.dtype, vcount(rows, p.cols))

    # -- one op (KernelEmitter.op)
    def _op(self, i: int, cp) -> None:
        op = self.ops[i]
        chunk = i in self.chunked
        self._value(i)
        if i in self.col_acc and cp is not None and i in cp.reads:
            pass
        elif i in self.col_acc:  # accumulate_columns
            if op.op in ("colmax", "colmin"):
                nx = vcount(self.rows_of(op.args[0]), op.shape[1])
                self._temp("uint8_t", nx // 8)
                self._temp("float", nx)
        elif cp is not None and i in cp.writes:  # accumulate
            rows = self.rows_of(i)
            nr = ceil_to(rows, REPEAT)
            self._temp("float", nr)
            self._temp("float", nr)
            self._temp("float", ceil_to(rows, 8) * 8)
            if op.op in ("rowmax", "rowmin"):
                nx = vcount(rows, self.ops[op.args[0]].shape[1])
                self._temp("uint8_t", nx // 8)
                self._temp("float", nx)
        elif cp is not None and i in cp.reads:  # read_back
            n = self.count(i)
            if op.op == "rowmean":
                self._temp("float", n)
            if op.op in ("rowmax", "rowmin"):
                self._temp("float", n)
                self._temp("uint8_t", n // 8)
            self.replicated.add(i)
        elif op.op == "matmul":
            self._matmul(i, chunk)
        elif self._copy_ok(op):
            pass
        elif self._move_ok(op):  # move_plan.py
            self._move_op(i, chunk)
        elif self._vector_ok(op):
            self._vector_op(i, chunk)
            self._note_replicated(i)
        else:
            self._scalar_op(i, chunk)

    # -- vector.py
    def _vector_ok(self, op: N.Op) -> bool:
        return vector_ok(op, self.ops)

    def _copy_ok(self, op: N.Op) -> bool:
        return copy_ok(op, self.ops)

    def _ushape(self, ishape: tuple, chunk: bool) -> tuple:
        return (self.r if chunk and ishape[0] == self.m else ishape[0], ishape[1])

    def _operand(self, u: int, ishape: tuple, chunk: bool) -> None:
        op = self.ops[u]
        if op.shape is None:
            self._temp(TABLE[op.dtype if op.dtype in VFLOAT else "f32"].c_compute,
                       vcount(*self._ushape(ishape, chunk)))
        elif op.shape != ishape:
            self._materialise(u, self._ushape(ishape, chunk), chunk)

    def _at_or_bcast(self, u: int, ishape: tuple, chunk: bool) -> None:
        op = self.ops[u]
        if op.shape is None:
            self._temp(TABLE[op.dtype].c_compute, vcount(*self._ushape(ishape, chunk)))
        elif op.shape != ishape:
            self._materialise(u, self._ushape(ishape, chunk), chunk)

    def _materialise(self, u: int, shape: tuple, chunk: bool) -> None:
        op = self.ops[u]
        rows, cols = shape
        ct = TABLE[op.dtype].c_compute
        self._temp(ct, vcount(rows, cols))
        if (op.shape[1] == 1 and self.urows(u, chunk) == rows and ct == "float"
                and u not in self.replicated):  # wsp_bcast_col's gathered and spread values
            self._temp("float", ceil_to(rows, REPEAT))
            self._temp("float", ceil_to(rows, 8) * pc(1))

    def _convert_tile(self, sdt: str, ddt: str, n: int) -> None:
        if ddt in VFLOAT and (sdt in VFLOAT or sdt == "bool" or (sdt == "i32" and ddt != "bf16")):
            self._temp("float", n)
            self._vector_convert(sdt, ddt, n)
        else:
            self._temp(TABLE[ddt].c_compute, n)

    def _vector_convert(self, sdt: str, ddt: str, n: int) -> None:
        if sdt == "bool":
            self._temp("half", n)
        elif sdt == "i32" or not (sdt in VFLOAT and ddt not in ("f16", "bf16")):
            if ddt == "f16":
                self._temp("half", n)
            elif ddt == "bf16":
                self._temp("bfloat16_t", n)

    def _sigmoid(self, n: int) -> None:
        self._temp("float", n)
        self._temp("float", n)
        self._temp("uint8_t", n // 8)

    def _neg_inf_zero(self, n: int) -> None:
        self._temp("float", n)
        self._temp("uint8_t", n // 8)

    def _note_replicated(self, i: int) -> None:
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

    def _vector_op(self, i: int, chunk: bool) -> None:
        op = self.ops[i]
        name, shape, args = op.op, op.shape, op.args
        n = self.count(i)

        def A(u: int) -> None:  # noqa: N802 (vector.py's name)
            self._operand(u, shape, chunk)

        if name in ("add", "sub", "mul", "div"):
            a, b = args
            sa, sb = self.ops[a].shape is None, self.ops[b].shape is None
            if name in ("add", "mul") and (sa or sb):
                A(b if sa else a)
            elif name == "sub" and sb:
                A(a)
            elif name == "sub" and sa:
                A(b)
            else:
                A(a)
                A(b)
        elif name in ("maximum", "minimum"):
            A(args[0])
            A(args[1])
            self._temp("uint8_t", n // 8)  # nan_fix
        elif name in _CMP:
            A(args[0])
            A(args[1])
            self._temp("uint8_t", n // 8)
            self._temp("float", n)  # bool_from_mask
            self._temp("half", n)
        elif name == "where":
            c, a, b = args
            if self.ops[c].shape is None:
                self._temp("uint8_t", n)
            else:
                self._at_or_bcast(c, shape, chunk)
            self._temp("half", n)  # mask_of_bool
            self._temp("float", n)
            self._temp("float", n)
            self._temp("uint8_t", n // 8)
            A(a)
            A(b)
        elif name in ("convert", "cast"):
            (a,) = args
            if self.ops[a].dtype in VFLOAT:
                A(a)
            else:
                self._at_or_bcast(a, shape, chunk)
            self._vector_convert(self.ops[a].dtype, op.dtype, n)
        elif name == "broadcast":
            A(args[0])
        elif name == "pow":
            e = self.exponent(op)
            A(args[0])
            if e == -1.0:
                self._temp("float", n)
            elif e not in (2.0, 1.0, 0.0):
                self._temp("uint8_t", ADV_TMP)
        elif OPS[name].plan == "red":
            self._reduction(i, chunk)
        else:
            A(args[0])
            if name == "rsqrt":
                self._temp("float", n)
            elif name == "relu":
                self._temp("uint8_t", n // 8)
            elif name in ("tanh", "sin", "cos"):
                self._temp("uint8_t", ADV_TMP)
            elif name == "sigmoid":
                self._sigmoid(n)
            elif name == "silu":
                self._temp("float", n)
                self._sigmoid(n)
                self._neg_inf_zero(n)
            elif name == "gelu":
                self._temp("float", n)
                self._sigmoid(n)
                self._neg_inf_zero(n)

    # -- reductions.py
    def _reduction(self, i: int, chunk: bool) -> None:
        op = self.ops[i]
        (a,) = op.args
        rows = self.rows_of(i) if op.op.startswith("row") else self.rows_of(a)
        cols = self.ops[a].shape[1]
        nx = vcount(rows, cols)
        n = self.count(i)
        what = op.op[3:]
        if op.op.startswith("row"):
            nr = ceil_to(rows, REPEAT)
            self._temp("float", nr)
            if cols > REPEAT:
                self._temp("float", nr)
            if what == "mean":
                self._temp("float", nr)
            if what in ("max", "min"):
                self._temp("uint8_t", nx // 8)
                self._temp("float", nx)
                self._temp("float", nr)
                self._temp("uint8_t", nr // 8)
            spread = ceil_to(rows, 8) * pc(1)
            if spread > self.count(i):
                self._temp("float", spread)
            self.replicated.add(i)
            return
        if what == "mean":
            self._temp("float", n)
        if what in ("max", "min"):
            self._temp("uint8_t", nx // 8)
            self._temp("float", nx)
            self._temp("float", n)
            self._temp("uint8_t", n // 8)

    # -- matmul.py
    def _as_float(self, u: int, chunk: bool) -> None:
        op = self.ops[u]
        if op.dtype not in VFLOAT:
            self._convert_tile(op.dtype, "f32", vcount(self.urows(u, chunk), op.shape[1]))

    def _matmul(self, i: int, chunk: bool) -> None:
        op = self.ops[i]
        a, b = op.args[0], op.args[1]
        n = self.count(i)
        if a in self.in_place and b in self.in_place:  # matmul_tt
            rows = op.shape[0]
            self._as_float(self.in_place[a], False)
            self._as_float(self.in_place[b], False)
            self._temp("float", vcount(1, rows))
            self._temp("float", vcount(1, rows))
        elif b in self.in_place:  # matmul_dot
            inner = self.ops[a].shape[1]
            self._as_float(a, chunk)
            self._as_float(self.in_place[b], False)
            self._temp("float", vcount(1, inner))
            self._temp("float", ceil_to(-(-inner // REPEAT), 8))
            self._temp("float", ceil_to(op.shape[1] * 8, REPEAT))
        else:  # matmul_rows
            if a not in self.in_place:
                self._as_float(a, chunk)
            else:
                self._as_float(self.in_place[a], False)
            cols = op.shape[1]
            self._temp("float", pc(cols))
            if i in self.streams:
                src, conv = self.streams[i]
                p = self.params[str(self.ops[src].attr)]
                nb = vcount(self.kblock(i), cols)
                want = self.ops[conv].dtype if conv is not None else p.dtype
                if p.dtype != "f32" or want != "f32":
                    self._temp("float", nb)
                    if p.dtype != "f32":
                        if want not in ("f32", p.dtype):
                            self._vector_convert("f32", want, nb)
                    else:
                        self._vector_convert("f32", want, nb)
            else:
                self._as_float(b, False)
        if len(op.args) > 2:
            acc = op.args[2]
            if self.ops[acc].dtype in VFLOAT:
                self._operand(acc, op.shape, chunk)
            else:
                self._at_or_bcast(acc, op.shape, chunk)
                self._convert_tile(self.ops[acc].dtype, "f32", n)

    # -- scalar_ops.py, sorting.py
    def _scalar_op(self, i: int, chunk: bool) -> None:
        op = self.ops[i]
        if OPS[op.op].plan != "select":
            return
        (a,) = op.args
        adt = self.ops[a].dtype
        if self.sorts.vector and sortable(adt):
            self._sort(i, self.urows(a, chunk))

    def _sort(self, i: int, rows: int) -> None:
        """A sort on Sort32 / MrgSort (`scalar_select`): the indices buffer a topk's two ops
        share (`sort_side`), then, unless op i reads its pair's indices, the staging and
        merging buffers A and B (2 floats a column of a row, or of a block) and, by blocks,
        the list of each block's first min(k, block) pairs (`sorting.blocked_lines`)."""
        op = self.ops[i]
        a = op.args[0]
        adt, n, k = self.ops[a].dtype, self.ops[a].shape[1], op.shape[1]
        if not hasattr(self, "sort_pairs"):
            self.sort_pairs = sort_pairs(self.ops)
        pair = self.sort_pairs.get(i)
        if pair is not None and not self.passes and all(j in self.when for j in pair):
            first, second = pair
            record(self.reqs, ("sorted", first), rows * pc(k) * 4, self.when[first],
                   self.when[second])
            if pair[1] == i:  # paired_lines: its pair's indices, no scratch
                return
        whole = whole_rows(self.sorts, adt, n)
        width = n if whole else self.sorts.block or BLOCK
        self._temp("float", rows * 2 * pc(width))
        self._temp("float", rows * 2 * pc(width))
        if not whole:  # blocked_lines' winners
            self._temp("float", rows * -(-n // width) * min(k, width) * 2)


def footprint(k: N.Kernel, rows: int, cols: Optional[tuple[int, int]] = None,
              passes: tuple = (), read_acc: bool = False, sorts: Sorts = ON_SORT32) -> int:
    """Bytes of UB kernel k takes in chunks of `rows` rows (`cols` (N, C): k is one block of C
    of N columns, `narrow`ed, computed in `passes`; its sorts as `sorts` says)."""
    return UbPlan(k, rows, read_acc, cols, passes, sorts).footprint


@dataclass(frozen=True)
class Fit:
    """The chunking the Ascend emitter writes for a vector kernel: rows `m` in `nchunks` chunks
    of `rows`, and when a row does not fit, its N columns in blocks of C (`colblock` (N, C)) in
    `passes` passes; `footprint` its bytes of UB. `read_acc`: column reductions other ops read
    are accumulated across the chunks (then `passes` are over the rows). `sorts`: how its
    sorts run (whole rows, by blocks, or on the scalar unit when their scratch did not fit)."""

    rows: int
    m: int
    nchunks: int
    colblock: Optional[tuple[int, int]]
    passes: int
    footprint: int
    read_acc: bool
    sorts: Sorts
    plan: UbPlan = dataclasses.field(repr=False, compare=False)

    @property
    def blocks(self) -> int:
        """Blocks of columns (1: whole rows)."""
        return 1 if self.colblock is None else -(-self.colblock[0] // self.colblock[1])


def _plan_measure(k: N.Kernel, rows: int, read_acc: bool, cols, passes, sorts: Sorts):
    plan = UbPlan(k, rows, read_acc, cols, passes, sorts)
    return plan, plan.footprint


def _largest(measure, k: N.Kernel, cols, sorts: Sorts, passes=(), read_acc: bool = False):
    """(result or None, smallest footprint): the largest chunk of rows of k that fits the UB."""
    probe = KernelShape(k, 0, read_acc)
    m, chunked = probe.m, probe.chunked
    candidates = [r for r in range(m, 0, -1) if m % r == 0] if chunked else [m]
    smallest = None
    for r in candidates:
        got, fp = measure(k, r, read_acc, cols, passes, sorts)
        smallest = fp if smallest is None else min(smallest, fp)
        if fp <= UB_BUDGET:
            return got, smallest
    return None, smallest


def search(k: N.Kernel, measure=_plan_measure, sorts: Sorts = ON_SORT32):
    """(result or None, smallest footprint seen, column passes or None): the search for the
    chunking of kernel k (`_search`); when nothing fits and k has data moves on the vector unit
    (move_plan.py: their staging and offsets take UB), the same search with every move on the
    scalar unit (`sorts.moves` False), which needs none; its smallest footprint is then the
    one reported."""
    found = _search(k, measure, sorts)
    if found[0] is None and sorts.moves and has_moves(k.ops):
        return _search(k, measure, dataclasses.replace(sorts, moves=False))
    return found


def _search(k: N.Kernel, measure, sorts: Sorts):
    """The search with k's moves as `sorts.moves` says: the largest chunk of rows that fits;
    when none does and k sorts (on Sort32 / MrgSort, whose scratch is 16 bytes a row element), the same search with
    its sorts by blocks, then on the scalar unit (`Sorts.fallback`); when none does and column
    reductions feed the rows, the same with passes over the rows; when none does and a
    row is elementwise, blocks of the widest multiple of 32 columns that fit (N split in 2, 3,
    ...). `measure(k, rows, read_acc, cols, passes, sorts)` -> (result, footprint): the plan's
    (`UbPlan`), or the emitter's (`KernelEmitter.emit`, which emits the kernel and measures
    it: one search, so the two agree when their footprints do)."""
    best, smallest = _largest(measure, k, None, sorts)
    if best is None and has_sorts(k.ops) and sorts.fallback() is not None:
        return _search(k, measure, sorts.fallback())
    if best is None:
        best, fp = _largest(measure, k, None, sorts, read_acc=True)
        smallest = min(smallest, fp)
    colp = column_passes(k) if best is None else None
    if colp is not None:
        n = colp[0]
        for nb in range(2, n + 1):
            c = ceil_to(-(-n // nb), ROW_ALIGN)
            if c >= n:
                continue
            best, fp = _largest(measure, narrow(k, n, c), (n, c), sorts, colp[1])
            smallest = min(smallest, fp)
            if best is not None or c == ROW_ALIGN:
                break
    return best, smallest, colp


def fit(k: N.Kernel) -> Optional[Fit]:
    """The chunking the Ascend emitter writes for vector kernel k (a planned kernel: `k.plan`
    set, as the emitter plans it), or None when nothing fits the UB (the emitter's compile
    error)."""
    plan = search(k)[0]
    if plan is None:
        return None
    return Fit(plan.r, plan.m, plan.nchunks, plan.colblock, max(1, len(plan.passes)),
               plan.footprint, plan.read_acc, plan.sorts, plan)
