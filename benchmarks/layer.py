"""A whole Llama decoder layer (examples/llama_layer.wsp) on cpu_sim against the same layer in
float32 NumPy, in one process, interleaved, medians: a prefill batch (8 sequences of 64-256
new tokens onto contexts of up to 512) and a decode batch (64 sequences of one new token onto
contexts of up to 1,000); model dim 256, 4 heads of 64, FFN 512. NumPy runs with one BLAS
thread (set before NumPy loads), as one NumPy process per core would in a service; wspc with
`--workers` worker threads. Prints the ratio of medians and, for each batch, wspc's per-kernel
table from a traced run (where the time goes).

    python benchmarks/layer.py [--runs 15] [--workers 2] [--kind prefill --kind decode]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(var, "1")  # before NumPy loads: its BLAS reads them once

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import kernels as kernel_bench  # noqa: E402  (benchmarks/kernels.py: the shared timing loop)
import llama_layer as L  # noqa: E402  (examples/llama_layer.py: the data and the NumPy layer)

import ptowsp  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--kind", action="append", choices=["prefill", "decode", "mixed"])
    ap.add_argument("--schedule", default=None, help="the layer's schedule (default: main)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        os.environ.setdefault("WSPC_CACHE_DIR", str(Path(d) / "cache"))
        prog = ptowsp.load(str(L.SOURCE)).compile(target="cpu_sim", schedule=args.schedule)
        for kind in args.kind or ["prefill", "decode"]:
            spec = L.kinds(args.seed)[kind]
            a = L.batch(**spec, seed=args.seed)
            bind = L.binds(a)
            got = prog.run(bind=bind, workers=args.workers, **a)
            want = L.numpy_layer(a)
            err = max(float(np.abs(got[k] - want[k]).max()) for k in ("Y", "Kc", "Vc"))
            # both update the KV cache where it is, as a service does (a decode batch's caches
            # are 130 MB: copying them would be most of the step); rerunning a step rewrites
            # the same rows with the same values
            t_np, t_w = kernel_bench.medians_ms(
                [lambda a=a: L.numpy_layer(a, np.float32, inplace=True),
                 lambda a=a, bind=bind: prog.run(bind=bind, workers=args.workers, inplace=True,
                                                 **a)], args.runs)
            prog.run(bind=bind, workers=args.workers, trace=True, inplace=True, **a)
            tokens, ctx = len(a["X"]), a["ctx"]
            print(f"{kind}: {len(ctx)} sequences, {tokens} new tokens, contexts "
                  f"{int(ctx.min())}-{int(ctx.max())}; max |wspc - float64 NumPy| {err:.1e}")
            print(f"  medians of {args.runs} runs: numpy (float32, 1 BLAS thread) {t_np:.2f} ms, "
                  f"wspc cpu_sim ({args.workers} workers) {t_w:.2f} ms = {t_np / t_w:.2f}x numpy")
            print("\n".join("  " + line for line in prog.trace.summary().splitlines()))


if __name__ == "__main__":
    sys.exit(main())
