"""What the emission of one tile kernel keeps and the primitives every op uses: the kernel's
shape facts (its row extent M, the chunk size R, which values are chunked), the lines written,
the hand-offs between pipes, and the Unified Buffer arena its values and temporaries live in.

The shape facts (chunking, the schedule of steps, the queues) are `backends/ub_plan.KernelShape`,
below both back ends, which the cycle model's plan of the same kernel uses too. The arena is
sized by running the emission twice: the first run records every buffer request (size, first
and last step it is live), `ub_plan.allocate` places them (buffers whose lifetimes do not
overlap share bytes), and the second run reads back the same requests in the same order with
their offsets. `ub_plan.UbPlan` declares the same requests without writing the kernel
(tests/ascend/test_ub_plan.py checks they agree).

Pipes: vector instructions that depend on each other are separated by PipeBarrier<PIPE_V>; a
hand-off between the vector pipe, the scalar unit and the copy engines is a SetFlag/WaitFlag
pair (`wsp_sync<E>`) unless a queue's EnQue/DeQue makes it.
"""

from __future__ import annotations

from ....diagnostics import InternalError
from ....dtypes import TABLE
from ....ir import nodes as N
from ... import cexpr as C
from ...cexpr import Expr
from ...sort_plan import ON_SORT32, Sorts
from ...ub_plan import KernelShape, allocate, record, request_size
from .layout import CXX_SIZE, held_size, pc


class Lines:
    """The lines of a body, indented by block depth."""

    def __init__(self, depth: int = 1):
        self.lines: list[str] = []
        self.depth = depth

    def __call__(self, text: str) -> None:
        for ln in text.split("\n"):
            self.lines.append(("    " * self.depth + ln) if ln else "")

    def open(self, text: str) -> None:
        self(f"{text} {{" if text else "{")
        self.depth += 1

    def close(self, text: str = "}") -> None:
        self.depth -= 1
        self(text)


class Frame(KernelShape):
    """The state of one kernel's emission with chunks of `rows` rows, and its primitives."""

    def __init__(self, k: N.Kernel, rows: int, read_acc: bool = False,
                 sorts: Sorts = ON_SORT32):
        super().__init__(k, rows, read_acc, sorts)
        self.scalar_index = {p.name: s for s, p in enumerate(p for p in k.params
                                                               if p.kind == "scalar")}
        self.this_pass = None  # the pass being written; None: whole rows

    # -- the arena
    def start_arena(self, final: bool) -> None:
        """Begin an emission run: the sizing one (`final` false) records the buffers, the
        final one reads back their offsets in the same order."""
        self.final = final
        if not final:
            self.reqs: dict = {}
        self.temp_at = 0
        self.temp_keys: dict[int, int] = {}  # step -> temporaries requested at it so far

    def request(self, key: tuple, size: int, start: int, end: int) -> int:
        """The arena offset of a buffer (0 while sizing). A key asked for again (the same value
        or temporary in another pass over the columns) is the same buffer, as large as the
        largest asked for."""
        if not self.final:
            record(self.reqs, key, size, start, end)
            return 0
        req = self.reqs.get(key)
        if req is None or req.size < request_size(size):
            raise InternalError("ascend", f"kernel `{self.k.name}`: the two emission passes "
                                f"diverged at buffer {key}")
        return req.off

    def allocate(self) -> None:
        """Place every recorded buffer at the lowest offset free over its lifetime."""
        self.arena = allocate(self.reqs)

    # -- pipes: which unit wrote last, so hand-offs get a SetFlag/WaitFlag pair
    def reset_pipes(self) -> None:
        self.v_dirty = self.s_dirty = True  # conservative at a phase start
        self.mte2_s = True

    def need_s(self) -> None:
        if self.v_dirty:
            self.out("wsp_sync<AscendC::HardEvent::V_S>();")
            self.v_dirty = False
        if self.mte2_s:
            self.out("wsp_sync<AscendC::HardEvent::MTE2_S>();")
            self.mte2_s = False

    def need_v(self) -> None:
        if self.s_dirty:
            self.out("wsp_sync<AscendC::HardEvent::S_V>();")
            self.s_dirty = False

    def vec(self, text: str) -> None:
        """One vector instruction, then the barrier its readers need."""
        self.need_v()
        self.out(text)
        self.out("AscendC::PipeBarrier<PIPE_V>();")
        self.v_dirty = True

    # -- buffers
    def temp(self, dtype_ct: str, elems: int) -> str:
        """A temporary LocalTensor of `elems` elements of C++ type `dtype_ct`, for this step."""
        size = elems * CXX_SIZE[dtype_ct]
        n = self.temp_keys.get(self.cur, 0)
        self.temp_keys[self.cur] = n + 1
        key = ("t", self.cur, n)  # the same op's temporaries in another pass share bytes
        self.temp_at += 1
        off = self.request(key, size, self.cur, self.cur)
        name = f"w{self.temp_at}"
        self.out(f"const AscendC::LocalTensor<{dtype_ct}> {name} = "
                 f"calc.GetWithOffset<{dtype_ct}>({elems}, {off});")
        return name

    def value_buffer(self, i: int) -> str:
        """Declare value i's arena tensor (in the current scope) and return its name."""
        op = self.ops[i]
        ct = TABLE[op.dtype].c_compute
        n = self.count(i) + self.slack(i)
        end = self.last.get(i, self.when[i])
        off = self.request(("v", i), n * held_size(op.dtype), self.when[i], max(end, self.when[i]))
        name = f"v{i}"
        self.out(f"const AscendC::LocalTensor<{ct}> {name} = calc.GetWithOffset<{ct}>({n}, {off});")
        self.tensor[i] = name
        return name

    def at(self, u: int, op_chunked: bool) -> str:
        """Value u as a tensor whose row 0 is the first row the current op needs."""
        name = self.tensor[u]
        sh = self.ops[u].shape
        if op_chunked and u not in self.chunked and sh[0] == self.m and self.nchunks > 1:
            return f"{name}[c0 * {pc(sh[1])}]"
        return name

    def row_offset(self, u: int, op_chunked: bool) -> Expr:
        """The C++ row of value u that row `i` of the current op reads (scalar path)."""
        sh = self.ops[u].shape
        if op_chunked and u not in self.chunked and sh[0] == self.m and self.nchunks > 1:
            return C.binop("+", "c0", "i")
        return C.E("i")
