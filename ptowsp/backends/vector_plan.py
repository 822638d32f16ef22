"""What the Ascend vector emitter never holds whole in the Unified Buffer, as rules on a kernel's
op DAG: a matmul's right operand streamed from GM in blocks of rows, and a transpose that only
matmuls read (read in place, never computed). Shared by the emitter, which emits it
(`backends/ascend/aicore/chunks.py`), and the cycle model, which costs it
(`backends/cpu/cost.py`), so the model follows the code: one rule, one place.
"""

from __future__ import annotations

from typing import Optional

from ..dtypes import FLOAT_DTYPES, TABLE

# the dtypes the vector unit computes in f32 (f16 / bf16 held in f32, as nodes.py says)
VFLOAT = tuple(n for n in FLOAT_DTYPES if TABLE[n].c_compute == "float")


def streamed_operands(ops: tuple, stored: frozenset = frozenset()) -> dict[int, tuple[int, Optional[int]]]:
    """matmul op -> (param op, convert op or None) for a right operand read straight from GM in
    blocks of rows (a parameter, possibly converted to f32, that nothing else reads and the
    kernel does not store to: its GM rows must keep their entry values while the chunks run):
    it is never resident, so the weights of a matmul need not fit the UB."""
    users: dict[int, list[int]] = {}
    for i, op in enumerate(ops):
        for a in op.args:
            users.setdefault(a, []).append(i)

    def only_b(u: int) -> bool:
        return all(ops[c].op == "matmul" and ops[c].args[1] == u and u not in ops[c].args[:1] +
                   ops[c].args[2:] for c in users.get(u, []))

    out = {}
    for i, op in enumerate(ops):
        if op.op != "matmul":
            continue
        b = op.args[1]
        src = ops[b].args[0] if ops[b].op in ("convert", "cast") else b
        if ops[src].op != "param" or str(ops[src].attr) in stored:
            continue
        if ops[b].op == "param" and ops[b].dtype in VFLOAT and only_b(b):
            out[i] = (b, None)
        elif (ops[b].op in ("convert", "cast") and ops[b].dtype in VFLOAT and only_b(b)
              and ops[ops[b].args[0]].op == "param" and ops[ops[b].args[0]].dtype in VFLOAT
              and all(c == b or (ops[c].op in ("convert", "cast") and only_b(c))
                      for c in users.get(ops[b].args[0], []))):
            out[i] = (ops[b].args[0], b)
    return out


def in_place_transposes(ops: tuple, stored: frozenset = frozenset()) -> dict[int, int]:
    """transpose op -> its operand, for every `transpose` that is read only as the left or right
    operand of matmuls (never as an accumulator, never stored): the matmuls read the operand in
    place, so the transpose is never computed (language.md section 4, "Matrix")."""
    users: dict[int, list[tuple[int, int]]] = {}
    for i, op in enumerate(ops):
        for pos, a in enumerate(op.args):
            users.setdefault(a, []).append((i, pos))
    return {i: op.args[0] for i, op in enumerate(ops)
            if op.op == "transpose" and i not in stored and users.get(i)
            and all(ops[u].op == "matmul" and pos < 2 for u, pos in users[i])}
