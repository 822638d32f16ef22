"""`topk` / `sort` kernels of the Ascend target on `Sort32` / `MrgSort` (aicore/sorting.py)
against the scalar unit's rank loop (the same kernels emitted with every sort on the scalar
path: `KernelEmitter.vector_sorts` false), both run on the CPU Ascend C (tests/ascend/ascendc_cpu) and
checked against ref. The stand-in's time is dominated by its per-element `GetValue` /
`SetValue` checks, so the ratio measures the scalar unit's work the vector path saves, not
a device's time (no device here).

    python benchmarks/ascend_sort.py [--runs 3] [--no-scalar]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ptowsp.backends.ascend.aicore import kernel as K  # noqa: E402
from tests.ascend.ascendc_cpu import harness as H  # noqa: E402

# name, rows, columns, dtype, k, values ("normal", "ties": three levels, "wide": any i32)
CASES = [("moe_router", 16, 128, "f32", 8, "normal"), ("row2000", 2, 2000, "f32", 8, "normal"),
         ("sort_i16", 2, 1000, "i16", 1000, "normal"), ("row8000", 1, 8000, "f32", 16, "normal"),
         ("ties2000", 2, 2000, "f32", 2000, "ties"), ("i32_1000", 2, 1000, "i32", 1000, "wide")]


def _text() -> str:
    parts = ["module sortbench"]
    for name, r, c, dt, k, _ in CASES:
        parts.append(f"""
kernel {name}(x: In[Tile[{r}, {c}, {dt}]], tv: Out[Tile[{r}, {k}, {dt}]],
              ti: Out[Tile[{r}, {k}, i32]]) {{
    let v, i = topk(x, {k})
    store(tv, v)
    store(ti, i)
}}
""")
    return "\n".join(parts)


def _values(kind: str, dt: str, shape, rng) -> np.ndarray:
    if kind == "ties":
        return np.array([0.0, 1.0, -1.0], dtype=np.float32)[rng.integers(0, 3, shape)]
    if kind == "wide":
        return rng.integers(-2**31, 2**31 - 1, shape).astype(np.int32)
    return H.random_values(dt, shape, rng)


def _times(tmp: Path, runs: int) -> dict:
    lib, units = H.build_levels(_text(), "sortbench", tmp, levels=(2,))
    unit = units[0]
    rng = np.random.default_rng(0)
    out = {}
    for kern, (name, r, c, dt, _, kind) in zip(unit.kernels, CASES):
        task = H.random_task(kern, rng)
        x = _values(kind, dt, (r, c), rng)
        task.inputs["x"] = x
        H.tile_view(task, kern, "x")[...] = x
        best = float("inf")
        for _ in range(runs):
            t0 = time.perf_counter()
            got = H.run_task(lib, unit.name, kern, task)
            best = min(best, time.perf_counter() - t0)
        H.compare(kern, got, H.ref_outputs(kern, task), name)
        out[name] = best
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--no-scalar", action="store_true", help="skip the scalar path's runs")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        vec = _times(Path(tmp) / "vector", args.runs)
        scal = {}
        if not args.no_scalar:
            K.KernelEmitter.vector_sorts = False  # every sort on the scalar rank loop
            scal = _times(Path(tmp) / "scalar", 1)
    print(f"{'kernel':12s} {'shape':>12s} {'k':>5s} {'Sort32 ms':>10s} {'scalar ms':>10s}")
    for name, r, c, dt, k, _ in CASES:
        s = f"{scal[name] * 1e3:10.1f}" if name in scal else f"{'-':>10s}"
        print(f"{name:12s} {f'[{r}, {c}] {dt}':>12s} {k:5d} {vec[name] * 1e3:10.1f} {s}")


if __name__ == "__main__":
    main()
