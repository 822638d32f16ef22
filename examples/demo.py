"""What `make demo` runs: an example on random inputs through cpu_sim, checked against the NumPy
reference back end and against plain NumPy, with the task count and times."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

import ptowsp

HERE = Path(__file__).resolve().parent


def main() -> int:
    t0 = time.perf_counter()
    module = ptowsp.load(str(HERE / "softmax.wsp"))
    program = module.compile(target="cpu_sim")
    compiled = time.perf_counter() - t0
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((4096, 128)) * 4).astype(np.float32)
    y = program.run(X=x)["Y"]
    stats = program.stats
    ref = module.compile(target="ref").run(X=x)["Y"]
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    expected = e / e.sum(axis=1, keepdims=True)
    err_ref = float(np.abs(y - ref).max())
    err_np = float(np.abs(y - expected).max())
    print(f"examples/softmax.wsp: row softmax of a {x.shape[0]}x{x.shape[1]} f32 matrix")
    print(f"  compiled (and cached) in   {compiled * 1000:8.1f} ms")
    print(f"  tasks run                  {stats.task_count:8d}")
    print(f"  cpu_sim run time           {stats.execute_time_ms:8.2f} ms")
    print(f"  max |cpu_sim - ref|        {err_ref:8.2e}")
    print(f"  max |cpu_sim - numpy f64|  {err_np:8.2e}")
    print(f"  Y[0, :4] = {np.array2string(y[0, :4], precision=5)}")
    ok = err_ref < 1e-5 and err_np < 1e-5
    print("  result:", "matches NumPy" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
