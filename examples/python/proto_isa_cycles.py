"""Modelled cycles as the PTO-WSP prototype writes them: an ISA-level soft-capping kernel
(`@ptoisa_kernel` with `ptoisa.tload`, `TMULS`, `TMINS`, `TMAXS`, `tstore`) that tells the CPU
simulation each of its tasks costs `extra` more cycles (`ptoisa.cpu_sim_add_cycles` with
`ptoisa.scalar_expr` of a scalar parameter, as the prototype's kernels do), run twice: with the
kernels' own costs, and with a cost function per task (`TracePolicy.cycles(cost_fn)`, a
function with an `if`: rows of the first half are cheap).

`Y[r] = clip(X[r] * SCALE, -CAP, CAP)` for every row r; `reference()` is the same in NumPy. The
modelled time of row r's task is its kernel's cost plus `extra = 100 * r` in the first run, and
`cost(r) + 100 * r` in the second (`modelled()` reads them from the programs' traces). Run as a
script, it checks both and exits non-zero if either disagrees.
"""

import sys

import numpy as np

from pto_wsp import (
    DType,
    In,
    Out,
    P,
    Scalar,
    Tensor,
    Tile,
    TracePolicy,
    ptoisa,
    ptoisa_kernel,
    workload,
)

F32, I32 = DType.F32, DType.I32
ROWS, COLS, SCALE, CAP = 8, 64, 0.5, 1.5

rng = np.random.default_rng(19)
x_np = rng.standard_normal((ROWS, 1, COLS)).astype(np.float32) * 4
y_np = np.zeros_like(x_np)


@ptoisa_kernel(cpp_includes=["pto/pto-inst.hpp"])  # kept: no C++ is emitted for an ISA kernel
def softcap(x: In[Tile[1, COLS, F32]], y: Out[Tile[1, COLS, F32]], extra: Scalar[I32]):
    v = ptoisa.TMULS(ptoisa.tload(x), SCALE)
    v = ptoisa.TMAXS(ptoisa.TMINS(ptoisa.tile_expr(v), CAP), -CAP)
    ptoisa.tstore(y, v)
    ptoisa.cpu_sim_add_cycles(ptoisa.scalar_expr(extra))


X, Y = Tensor(data=x_np, dtype=F32), Tensor(data=y_np, dtype=F32)


@workload
def capped():
    for r in P(ROWS):
        softcap[r](x=X[r], y=Y[r], extra=100 * r)


def cost(task):
    """The prototype's cost function: a task of the first half of the rows is cheap."""
    if task.get("r") < ROWS // 2:
        return 200
    return 1000


def reference() -> np.ndarray:
    return np.clip(x_np * np.float32(SCALE), -CAP, CAP)


def modelled(program) -> list:
    """Each task's modelled cycles (its finish minus its start on the cycle model)."""
    sim = program.trace.sim
    return (sim["finish"] - sim["start"]).tolist()


own = capped().task_graph(trace=TracePolicy.cycles()).compile(target="cpu_sim")
own.execute()
own.synchronize()
own_ok = np.allclose(y_np, reference())
y_np[...] = 0
program = capped().task_graph(trace=TracePolicy.cycles(cost)).compile(target="cpu_sim")
program.execute()
program.synchronize()
costed_ok = np.allclose(y_np, reference())

if __name__ == "__main__":
    base = modelled(own)[0]  # row 0 adds nothing: its kernel's own cost
    want_own = [base + 100 * r for r in range(ROWS)]
    want_cost = [(200 if r < ROWS // 2 else 1000) + 100 * r for r in range(ROWS)]
    print("own costs:", modelled(own), "cost function:", modelled(program))
    ok = own_ok and costed_ok and modelled(own) == want_own and modelled(program) == want_cost
    print("matches NumPy and the modelled cycles:", ok)
    sys.exit(0 if ok else 1)
