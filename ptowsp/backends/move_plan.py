"""The data moves a vector kernel makes on the vector unit (`Gather` over byte offsets built in
the UB: `backends/ascend/aicore/moves.py` writes them and says why each rule is what it is), as
facts about a kernel without its text: which ops move on the vector unit (`vector_move`), and
the UB temporaries each takes (`MovePlan`, a part of `ub_plan.UbPlan`). Below both back ends,
so the emitter and the UB plan share one rule, and the plan's search sees the emitter's
fallback: a kernel that fits no chunk with its moves' staging and offsets is emitted with every
move on the scalar unit (`sort_plan.Sorts.moves` False, tried by `ub_plan.search`).

The declarations in `MovePlan` repeat, temporary by temporary and in the same order, what
moves.py's writers request (`Frame.temp`); tests/ascend/conftest.py checks the two agree at
every measure of every kernel the Ascend tests emit.
"""

from __future__ import annotations

from ..dtypes import TABLE
from ..ir import nodes as N
from .vector_plan import CXX_SIZE, ceil_to, held_size, pc, vcount

# the ops the vector unit moves by one Gather
MOVE_OPS = ("transpose", "gather_cols", "slice_cols", "concat_cols", "slice_even", "slice_odd",
            "interleave")
# the type a Gather moves for each size an element is held in (8-bit values go through half,
# and 64-bit ones as pairs of 32-bit words)
GATHER_T = {8: "uint32_t", 4: "uint32_t", 2: "uint16_t", 1: "half"}
# the index dtypes a gather_cols converts to f32 on the vector unit
INDEX_DTYPES = ("i32", "u32", "i8", "u8", "i64", "u64")


def has_moves(ops) -> bool:
    """Whether any op of a kernel is a data move (`ub_plan.search` then has a fallback)."""
    return any(op.op in MOVE_OPS for op in ops)


def vector_move(ops, op: N.Op) -> bool:
    """Whether op (of the kernel's `ops`) moves on the vector unit by one Gather when the
    kernel's moves are there (`Sorts.moves`): see moves.py for what stays scalar and why."""
    if op.op not in MOVE_OPS or op.shape is None:
        return False
    args = [ops[a] for a in op.args]
    if any(a.shape is None for a in args) or held_size(op.dtype) not in GATHER_T:
        return False
    x = args[0]
    if op.op == "transpose":  # resident (never chunked): a's rows are the op's columns
        return x.dtype == op.dtype
    if x.dtype != op.dtype or x.shape[0] != op.shape[0]:
        return False
    if op.op == "gather_cols":
        if held_size(op.dtype) == 8:  # its offsets come per element, not per word
            return False
        it = args[1].dtype
        # 16-bit indices go through half, exact below 2048: for up to 2048 columns any
        # index it rounds is out of range before and after
        return args[1].shape == op.shape and (
            it in INDEX_DTYPES or (it in ("i16", "u16") and x.shape[1] <= 2048))
    return all(a.dtype == op.dtype and a.shape == x.shape for a in args) or \
        (op.op == "concat_cols" and all(a.dtype == op.dtype and a.shape[0] == x.shape[0]
                                        for a in args))


def gather_type(dtype: str) -> str:
    """The C++ type a Gather reads a value of dtype as (8-bit values as half)."""
    return "half" if held_size(dtype) == 1 else TABLE[dtype].c_compute


class MovePlan:
    """The UB temporaries of a move on the vector unit (`MoveOps.move_op`), declared for
    `ub_plan.UbPlan` (which supplies `ops`, `rows_of`, `nchunks`, `loop_start`, `loop_end`,
    `_temp` and `_request`)."""

    def _move_ok(self, op: N.Op) -> bool:
        return self.sorts.moves and vector_move(self.ops, op)

    def _move_op(self, i: int, chunk: bool) -> None:
        op = self.ops[i]
        rows, cols = self.rows_of(i), op.shape[1]
        count = rows * pc(cols)
        if op.op == "gather_cols":
            self._gather_cols_temps(i, rows)
        else:
            self._staged_temps(i, rows)
            k = 2 if held_size(op.dtype) == 8 else 1
            n = k * vcount(rows, cols)
            if chunk and self.nchunks > 1:  # offsets kept through the chunk loop
                self._request(("off", i), n * 4, self.loop_start, self.loop_end)
            else:
                self._temp("float", n)
            self._first_row_temps(op, k * pc(cols), k)
            count *= k
        if held_size(op.dtype) == 1:
            self._temp("half", count)

    def _source_temps(self, u: int, rows: int) -> None:
        op = self.ops[u]
        if held_size(op.dtype) == 1:
            self._temp("half", rows * pc(op.shape[1]))

    def _staged_temps(self, i: int, rows: int) -> None:
        op = self.ops[i]
        if op.op == "transpose":
            (a,) = op.args
            self._source_temps(a, self.ops[a].shape[0])
        elif len(op.args) == 1:
            self._source_temps(op.args[0], rows)
        else:
            a, b = op.args
            self._source_temps(a, rows)
            self._source_temps(b, rows)
            width = pc(self.ops[a].shape[1]) + pc(self.ops[b].shape[1])
            self._temp(gather_type(op.dtype), rows * width)

    def _first_row_temps(self, op: N.Op, m: int, k: int) -> None:
        n = ceil_to(m, 64)
        if k == 2:
            self._temp("float", n)
            self._temp("int32_t", n)
        if op.op == "concat_cols":
            self._temp("float", n)
        elif op.op == "interleave":
            self._temp("float", n)
            self._temp("int32_t", n)

    def _gather_cols_temps(self, i: int, rows: int) -> None:
        op = self.ops[i]
        a, b = op.args
        n = vcount(rows, op.shape[1])
        gdt = gather_type(op.dtype)
        self._temp(gdt, rows * pc(self.ops[a].shape[1]) + 32 // CXX_SIZE[gdt])
        dt = self.ops[b].dtype
        self._temp("float", n)  # the indices as f32
        if dt in ("i8", "u8", "i16", "u16"):
            self._temp("half", n)
        elif dt not in ("i32", "u32"):  # 64-bit: the words' offsets, the high words
            self._temp("float", n)
            self._temp("float", n)
        self._temp("float", n)  # the offsets
        self._temp("float", n)
        self._temp("uint8_t", n // 8)
