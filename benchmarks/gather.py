"""An embedding lookup with `gather` inside a kernel on cpu_sim against NumPy, in one run: the
rows of a [64, 128] f32 table held as one tile, picked by the ids of each block of 16 tokens
and scaled, `gather(table, ids) * scale` (docs/language.md section 4, "Gather"), over R tokens.
The gather is read in place: the table's rows go straight into the store, one pass per block.

    python benchmarks/gather.py [--rows 524288] [--runs 9] [--workers 2]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import kernels as kernel_bench  # noqa: E402  (benchmarks/kernels.py: the shared timing loop)

import ptowsp  # noqa: E402

PROGRAM = """
sym R
input  EMB: f32[64, 128]
input  IDS: i32[R, 1]
output Y: f32[R, 128]
kernel embed(table: In[Tile[64, 128, f32]], ids: In[Tile[16, 1, i32]],
             y: Out[Tile[16, 128, f32]], scale: Scalar[f32] = 11.3137) {
    store(y, gather(table, ids) * scale)
}
workload main_w() {
    for t in P(R / 16) {
        embed[t](table = EMB, ids = IDS[t*16 : t*16 + 16, :], y = Y[t*16 : t*16 + 16, :])
    }
}
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=524288)
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    emb = rng.standard_normal((64, 128), dtype=np.float32)
    ids = rng.integers(0, 64, (args.rows, 1)).astype(np.int32)
    scale = np.float32(11.3137)

    def numpy_embed():  # the idiomatic NumPy (torch's F.embedding(ids, emb) * scale)
        return np.take(emb, ids[:, 0], axis=0) * scale

    with tempfile.TemporaryDirectory() as d:
        os.environ.setdefault("WSPC_CACHE_DIR", str(Path(d) / "cache"))
        prog = ptowsp.parse(PROGRAM, "gather.wsp").compile(target="cpu_sim")
        got = prog.run(EMB=emb, IDS=ids, workers=args.workers)["Y"]
        np.testing.assert_array_equal(got, numpy_embed())
        t_np, t_w = kernel_bench.medians_ms(
            [numpy_embed, lambda: prog.run(EMB=emb, IDS=ids, workers=args.workers)], args.runs)
    traffic = args.rows * 128 * 4 + ids.nbytes  # y out, ids in (the table stays in cache)
    print(f"embedding lookup, [{args.rows}, 128] f32 from a [64, 128] table, {args.workers} "
          f"workers, medians of {args.runs} runs: numpy {traffic / t_np / 1e6:.1f} GB/s, "
          f"cpu_sim {traffic / t_w / 1e6:.1f} GB/s = {t_np / t_w:.2f}x numpy")


if __name__ == "__main__":
    sys.exit(main())
